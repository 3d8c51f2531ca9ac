package upstream

import (
	"sort"
	"strconv"
	"strings"
)

// AppendPrometheus appends st in the Prometheus text exposition format
// (version 0.0.4). Metric names start with relayload_upstream_.
func (st *Stats) AppendPrometheus(b []byte) []byte {
	p := promWriter{b: b}
	p.gauge("uptime_seconds", "Seconds since the fake upstream started.", st.UptimeSeconds)
	p.gauge("since_reset_seconds", "Seconds since the counters were last reset.", st.SinceResetSeconds)

	p.counter("registration_challenges_total", "Registration challenge requests.", st.Registrations.Challenges)
	p.counter("registration_responses_total", "Registration response requests.", st.Registrations.Responses)
	p.labelled("registration_failures_total", "Failed registration steps by reason.", "reason", st.Registrations.Failures)

	p.counter("config_requests_global_total", "Global config requests.", st.ConfigRequests.Global)
	p.counter("config_requests_global_pending_total", "Global config answers with globalStatus pending.", st.ConfigRequests.GlobalPending)
	p.counter("config_requests_project_total", "Project config requests with at least one key.", st.ConfigRequests.Project)
	p.counter("config_keys_served_total", "Project keys answered with a config.", st.ConfigRequests.KeysServed)
	p.counter("config_keys_pending_total", "Project keys answered as pending.", st.ConfigRequests.Pending)
	p.counter("config_keys_unchanged_total", "Project keys answered as unchanged.", st.ConfigRequests.Unchanged)
	p.counter("config_keys_unknown_total", "Unknown project keys (omitted).", st.ConfigRequests.Unknown)

	p.labelled("signatures_total", "Relay signature checks by result.", "result", map[string]int64{
		"verified": st.Signatures.Verified, "not_checked": st.Signatures.NotChecked,
	})

	p.counter("envelopes_total", "Envelopes accepted by the sink.", st.Envelopes)
	p.counter("data_envelopes_total", "Envelopes with an item that is neither metrics nor a client report.", st.DataEnvelopes)
	p.gauge("user_agents", "Distinct User-Agent headers of accepted envelopes, up to 10000.", float64(st.UserAgents))
	p.labelled("envelopes_by_sender_total", "Envelopes accepted by sender.", "sender", st.EnvelopesBySender)
	p.labelled("items_total", "Envelope items by type.", "type", st.ItemsByType)
	p.labelled("records_total", "Records in envelope items (item_count, else 1) by type.", "type", st.RecordsByType)
	p.counter("metric_buckets_total", "Non-outcome metric buckets received.", st.MetricBuckets)

	req, wire, dec := map[string]int64{}, map[string]int64{}, map[string]int64{}
	for e, v := range st.Bytes {
		req[e], wire[e], dec[e] = v.Requests, v.Wire, v.Decoded
	}
	p.labelled("bodies_total", "Request bodies by Content-Encoding.", "encoding", req)
	p.labelled("wire_bytes_total", "Body bytes as received by Content-Encoding.", "encoding", wire)
	p.labelled("decoded_bytes_total", "Body bytes after decoding by Content-Encoding.", "encoding", dec)

	p.header("project_envelopes_total", "Envelopes of the busiest projects.", "counter")
	for _, pr := range st.TopProjects {
		p.sample("project_envelopes_total", [][2]string{{"project", strconv.FormatInt(pr.ID, 10)}}, float64(pr.Envelopes))
	}
	p.header("project_items_total", "Envelope items of the busiest projects.", "counter")
	for _, pr := range st.TopProjects {
		p.sample("project_items_total", [][2]string{{"project", strconv.FormatInt(pr.ID, 10)}}, float64(pr.Items))
	}

	p.header("outcomes_quantity_total", "Outcome quantities by outcome, category and reason.", "counter")
	for _, r := range st.Outcomes.Rows {
		p.sample("outcomes_quantity_total", [][2]string{{"outcome", r.Outcome}, {"category", r.Category}, {"reason", r.Reason}}, float64(r.Quantity))
	}
	p.header("outcomes_records_total", "Outcome records (rows, buckets, batch entries) by outcome, category and reason.", "counter")
	for _, r := range st.Outcomes.Rows {
		p.sample("outcomes_records_total", [][2]string{{"outcome", r.Outcome}, {"category", r.Category}, {"reason", r.Reason}}, float64(r.Count))
	}
	p.labelled("outcome_messages_total", "Outcome carriers by source.", "source", st.Outcomes.Messages)
	p.counter("outcomes_folded_total", "Outcome records folded into a reason \"other\" row because the outcome table was full.", st.Outcomes.Folded)

	p.counter("canary_items_scanned_total", "Items scanned for PII canaries.", st.Canaries.ItemsScanned)
	p.labelled("canary_leaks_total", "PII canaries that survived scrubbing, by kind.", "kind", st.Canaries.Leaks)
	p.labelled("canary_kept_found_total", "Negative-control canaries found, by kind.", "kind", st.Canaries.KeptFound)
	p.labelled("canary_found_total", "Canary markers found, by kind.", "kind", st.Canaries.Found)
	p.counter("scrubbed_items_total", "Items whose _meta records a scrubbing remark.", st.Canaries.ScrubbedItems)

	p.labelled("errors_total", "Rejected requests by reason.", "reason", st.Errors)
	p.labelled("faults_injected_total", "Injected faults by kind.", "fault", st.Faults)
	p.counter("panics_total", "Recovered handler panics.", st.Panics)
	p.gauge("in_flight_requests", "Requests being handled, not counting this one.", float64(st.InFlight))

	h := &st.HTTPLayer
	p.counter("http_connections_total", "Connections accepted.", h.Connections)
	p.labelled("http_layer_closed_total", "Connections closed before a handler had their request, by when.", "when", map[string]int64{
		"before_request": h.ClosedBeforeRequest, "mid_header": h.ClosedMidHeader, "header_timeout": h.HeaderTimeouts,
	})
	p.labelled("http_layer_rejected_total", "Requests answered by Go's HTTP server itself, by status.", "status", h.Rejected)
	p.counter("http_write_timeouts_total", "Connections whose answer missed its write deadline.", h.WriteTimeouts)
	p.labelled("http_error_log_total", "Lines of Go's HTTP server error log, by class.", "class", h.ErrorLog)

	if c := st.Capture; c != nil {
		p.counter("capture_kept_total", "Envelopes kept by the capture.", c.Kept)
		p.counter("capture_kept_bytes_total", "Decoded bytes of the envelopes kept by the capture.", c.KeptBytes)
		p.labelled("capture_skipped_total", "Envelopes the capture did not keep, by why: over its bounds (max) or thinned out (every).", "reason", map[string]int64{"max": c.SkippedMax, "every": c.SkippedEvery})
		p.counter("capture_errors_total", "Envelopes the capture failed to write.", c.Errors)
	}

	p.header("requests_total", "Requests by route and status.", "counter")
	for _, route := range sortedKeys(st.Requests) {
		codes := st.Requests[route]
		for _, code := range sortedKeys(codes) {
			p.sample("requests_total", [][2]string{{"route", route}, {"status", code}}, float64(codes[code]))
		}
	}
	return p.b
}

type promWriter struct{ b []byte }

const promPrefix = "relayload_upstream_"

func (p *promWriter) header(name, help, typ string) {
	p.b = append(p.b, "# HELP "+promPrefix+name+" "+help+"\n# TYPE "+promPrefix+name+" "+typ+"\n"...)
}

func (p *promWriter) sample(name string, labels [][2]string, v float64) {
	p.b = append(p.b, promPrefix+name...)
	if len(labels) > 0 {
		p.b = append(p.b, '{')
		for i, l := range labels {
			if i > 0 {
				p.b = append(p.b, ',')
			}
			p.b = append(p.b, l[0]...)
			p.b = append(p.b, '=', '"')
			p.b = append(p.b, escapeLabel(l[1])...)
			p.b = append(p.b, '"')
		}
		p.b = append(p.b, '}')
	}
	p.b = append(p.b, ' ')
	p.b = strconv.AppendFloat(p.b, v, 'g', -1, 64)
	p.b = append(p.b, '\n')
}

func (p *promWriter) counter(name, help string, v int64) {
	p.header(name, help, "counter")
	p.sample(name, nil, float64(v))
}

func (p *promWriter) gauge(name, help string, v float64) {
	p.header(name, help, "gauge")
	p.sample(name, nil, v)
}

func (p *promWriter) labelled(name, help, label string, m map[string]int64) {
	p.header(name, help, "counter")
	for _, k := range sortedKeys(m) {
		p.sample(name, [][2]string{{label, k}}, float64(m[k]))
	}
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
