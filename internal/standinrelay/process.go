package standinrelay

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/envelope"
)

// featureLogs must be in a project's config.features or a managed Relay
// drops log items without an outcome (docs/protocol.md, Project configs).
const featureLogs = "organizations:ourlogs-ingestion"

// itemGroup is Relay's processing group: each group of an envelope is
// forwarded as its own envelope.
type itemGroup int

const (
	groupError itemGroup = iota // event + attachments, user reports, …
	groupTransaction
	groupSession
	groupCheckIn
	groupLog
	groupSpan
	groupClientReport
	groupReplay
	groupMetrics
	groupOther
	numGroups
)

var groupNames = [numGroups]string{"error", "transaction", "session", "check_in", "log", "span", "client_report", "replay", "metrics", "other"}

// groupOf assigns an item to a group. Attachments and similar ride with the
// event; with only a transaction present they ride with it.
func groupOf(typ string, hasEvent, hasTransaction bool) itemGroup {
	switch typ {
	case "event", "security", "raw_security", "nel", "unreal_report", "form_data", "user_report", "feedback", "user_report_v2":
		return groupError
	case "attachment", "profile":
		if !hasEvent && hasTransaction {
			return groupTransaction
		}
		if typ == "profile" {
			return groupTransaction
		}
		return groupError
	case "transaction":
		return groupTransaction
	case "session", "sessions":
		return groupSession
	case "check_in":
		return groupCheckIn
	case "log", "otel_log":
		return groupLog
	case "span", "otel_span", "otel_traces_data":
		return groupSpan
	case "client_report":
		return groupClientReport
	case "replay_event", "replay_recording", "replay_video":
		return groupReplay
	case "metric_buckets", "statsd":
		return groupMetrics
	}
	return groupOther
}

// quantity is one data-category count of an item.
type quantity struct {
	category int
	n        float64
}

// itemQuantities returns what an item counts as for outcomes and rate limits.
func itemQuantities(it *envelope.Item, spans int) []quantity {
	switch it.Type {
	case "event":
		return []quantity{{catError, 1}}
	case "transaction":
		n := float64(1 + spans)
		return []quantity{{catTransaction, 1}, {catTransactionIndexed, 1}, {catSpan, n}, {catSpanIndexed, n}}
	case "attachment":
		return []quantity{{catAttachment, float64(len(it.Payload))}, {catAttachmentItem, 1}}
	case "session", "sessions":
		return []quantity{{catSession, float64(max(1, it.ItemCount))}}
	case "check_in":
		return []quantity{{catMonitor, 1}}
	case "log", "otel_log":
		return []quantity{{catLogItem, float64(max(1, it.ItemCount))}, {catLogByte, float64(len(it.Payload))}}
	case "span", "otel_span":
		n := float64(max(1, it.ItemCount))
		return []quantity{{catSpan, n}, {catSpanIndexed, n}}
	case "profile":
		return []quantity{{catProfile, 1}}
	case "replay_event", "replay_recording", "replay_video":
		return []quantity{{catReplay, 1}}
	case "security", "raw_security", "nel":
		return []quantity{{catSecurity, 1}}
	case "user_report_v2", "feedback":
		return []quantity{{catFeedback, 1}}
	}
	return nil
}

// rateLimitCategory is the category an item is checked against.
func rateLimitCategory(typ string) (string, bool) {
	switch typ {
	case "event":
		return "error", true
	case "transaction":
		return "transaction", true
	case "attachment":
		return "attachment", true
	case "session", "sessions":
		return "session", true
	case "check_in":
		return "monitor", true
	case "log", "otel_log":
		return "log_item", true
	case "span", "otel_span":
		return "span", true
	case "profile":
		return "profile", true
	case "replay_event", "replay_recording", "replay_video":
		return "replay", true
	case "security", "raw_security", "nel":
		return "security", true
	case "user_report_v2", "feedback":
		return "feedback", true
	}
	return "", false
}

func (r *Relay) emitItemOutcome(s scoping, it *envelope.Item, outcome int, reason string, spans int) {
	for _, q := range itemQuantities(it, spans) {
		r.emitOutcome(s, outcome, reason, q.category, q.n)
	}
}

// process runs one envelope through the pipeline: checks against the
// project config, payload processing, split by group, forwarding.
func (r *Relay) process(j *job) {
	start := time.Now()
	r.metrics.Timing("event.wait_time", start.Sub(j.meta.received))
	status, st := r.projects.status(j.key)
	if status != projectEnabled || st == nil {
		r.stats.droppedDisabled.Add(1)
		return
	}
	sc := scoping{orgID: st.OrganizationID, projectID: st.ProjectID, key: j.key}
	if st.ProjectID != j.projectID {
		// Relay drops these with invalid/project_id (envelopes addressed to
		// the wrong project id for their key).
		for i := range j.env.Items {
			r.emitItemOutcome(sc, &j.env.Items[i], outcomeInvalid, "project_id", 0)
		}
		r.stats.droppedInvalid.Add(1)
		return
	}

	var hasEvent, hasTransaction bool
	for _, it := range j.env.Items {
		hasEvent = hasEvent || it.Type == "event"
		hasTransaction = hasTransaction || it.Type == "transaction"
	}
	var groups [numGroups][]envelope.Item
	for i := range j.env.Items {
		it := &j.env.Items[i]
		switch it.Type {
		case "event", "transaction":
			payload, spans, err := processEvent(it.Payload, j.env.EventID)
			if err != nil {
				r.log.Debugf("project %d: %s item: invalid JSON: %v", j.projectID, it.Type, err)
				r.emitItemOutcome(sc, it, outcomeInvalid, "invalid_json", spans)
				r.stats.itemsInvalid.Add(1)
				continue
			}
			out := *it
			out.Payload = payload
			groups[groupOf(it.Type, hasEvent, hasTransaction)] = append(groups[groupOf(it.Type, hasEvent, hasTransaction)], out)
		case "log", "otel_log":
			if !st.hasFeature(featureLogs) {
				r.stats.itemsDropped.Add(1)
				continue
			}
			out := *it
			if it.Type == "log" {
				payload, err := scrubLogs(it.Payload)
				if err != nil {
					r.log.Debugf("project %d: log item: %v", j.projectID, err)
					r.emitItemOutcome(sc, it, outcomeInvalid, "invalid_json", 0)
					r.stats.itemsInvalid.Add(1)
					continue
				}
				out.Payload = payload
			}
			groups[groupLog] = append(groups[groupLog], out)
		case "client_report":
			if r.cfg.EmitOutcomes != OutcomesOff {
				r.clientReportOutcomes(sc, it.Payload)
				continue
			}
			groups[groupClientReport] = append(groups[groupClientReport], *it)
		default:
			g := groupOf(it.Type, hasEvent, hasTransaction)
			groups[g] = append(groups[g], *it)
		}
	}
	r.metrics.Timing("event.processing_time", time.Since(start))
	for g := range groups {
		if len(groups[g]) == 0 {
			continue
		}
		hasEvt := itemGroup(g) == groupError || itemGroup(g) == groupTransaction
		body := r.rewriteEnvelope(j, st, groups[g], hasEvt)
		r.stats.parts.Add(1)
		r.forward(r.hardCtx, &envelopeRequest{
			projectID:    st.ProjectID,
			publicKey:    j.key,
			client:       j.meta.client,
			version:      j.meta.version,
			userAgent:    j.meta.userAgent,
			forwardedFor: j.meta.forwardedFor,
			origin:       j.meta.origin,
			body:         body,
		}, groupNames[g])
	}
}

// processEvent parses an event/transaction, fills event_id, scrubs it and
// serializes it again. spans is the transaction's span count (for outcomes).
func processEvent(payload []byte, eventID string) (out []byte, spans int, err error) {
	var ev map[string]any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&ev); err != nil {
		return nil, 0, err
	}
	if ev == nil {
		return nil, 0, errNotObject
	}
	if dec.More() {
		return nil, 0, errTrailing
	}
	if s, ok := ev["spans"].([]any); ok {
		spans = len(s)
	}
	if _, ok := ev["event_id"]; !ok && eventID != "" {
		ev["event_id"] = normalizeEventID(eventID)
	}
	scrubEvent(ev)
	out, err = json.Marshal(ev)
	return out, spans, err
}

type jsonError string

func (e jsonError) Error() string { return string(e) }

const (
	errNotObject = jsonError("payload is not a JSON object")
	errTrailing  = jsonError("trailing data after JSON value")
)

// normalizeEventID returns the 32-hex form of a UUID.
func normalizeEventID(id string) string {
	return strings.ToLower(strings.ReplaceAll(id, "-", ""))
}

// rewriteEnvelope builds the forwarded envelope for one group: the SDK's
// header fields kept, dsn pointing at the upstream, fresh sent_at and the
// request metadata Relay adds (docs/protocol.md, Forwarded envelopes).
func (r *Relay) rewriteEnvelope(j *job, st *ProjectState, items []envelope.Item, keepEventID bool) []byte {
	hdr := map[string]json.RawMessage{}
	_ = json.Unmarshal(j.env.Header, &hdr) // parsed once already by envelope.Parse
	delete(hdr, "event_id")
	if keepEventID && j.env.EventID != "" {
		hdr["event_id"] = jsonString(normalizeEventID(j.env.EventID))
	}
	hdr["dsn"] = jsonString(r.upstreamDSN(j.key, st.ProjectID))
	hdr["sent_at"] = jsonString(time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
	if j.meta.client != "" {
		hdr["client"] = jsonString(j.meta.client)
	}
	if j.meta.version != "" {
		if v, err := strconv.Atoi(j.meta.version); err == nil {
			hdr["version"] = json.RawMessage(strconv.Itoa(v))
		}
	}
	hdr["forwarded_for"] = jsonString(j.meta.forwardedFor)
	if j.meta.userAgent != "" {
		hdr["user_agent"] = jsonString(j.meta.userAgent)
	}
	if j.meta.origin != "" {
		hdr["origin"] = jsonString(j.meta.origin)
	}
	h, _ := json.Marshal(hdr)
	env := envelope.Envelope{Header: h, Items: items}
	return env.Marshal()
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// upstreamDSN is the dsn Relay writes into forwarded envelope headers.
func (r *Relay) upstreamDSN(key string, projectID int64) string {
	return r.cfg.Upstream.Scheme + "://" + key + ":@" + r.cfg.Upstream.Host + "/" + strconv.FormatInt(projectID, 10)
}

// relayEnvelope builds an envelope Relay makes itself (outcomes).
func (r *Relay) relayEnvelope(ps projectScope, it itemPayload) []byte {
	h, _ := json.Marshal(map[string]string{
		"dsn":     r.upstreamDSN(ps.key, ps.projectID),
		"sent_at": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
	})
	env := envelope.Envelope{Header: h, Items: []envelope.Item{{Type: it.typ, Payload: it.payload}}}
	return env.Marshal()
}

// clientReportOutcomes turns an SDK client report into outcomes (docs/protocol.md,
// Outcomes).
func (r *Relay) clientReportOutcomes(s scoping, payload []byte) {
	var rep struct {
		Discarded      []clientReportEntry `json:"discarded_events"`
		RateLimited    []clientReportEntry `json:"rate_limited_events"`
		Filtered       []clientReportEntry `json:"filtered_events"`
		FilteredSample []clientReportEntry `json:"filtered_sampling_events"`
	}
	if err := json.Unmarshal(payload, &rep); err != nil {
		r.stats.itemsInvalid.Add(1)
		return
	}
	for _, set := range []struct {
		outcome int
		entries []clientReportEntry
	}{{outcomeClientDiscard, rep.Discarded}, {outcomeRateLimited, rep.RateLimited}, {outcomeFiltered, rep.Filtered}, {outcomeFiltered, rep.FilteredSample}} {
		for _, e := range set.entries {
			cat, ok := categoryID(e.Category)
			if !ok || e.Quantity <= 0 || len(e.Reason) > 200 {
				continue
			}
			r.emitOutcome(s, set.outcome, e.Reason, cat, e.Quantity)
		}
	}
}
