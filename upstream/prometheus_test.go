package upstream

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relayload/relayload/internal/capture"
)

// richStats has a non-zero value in every field of the /stats JSON, label
// values that need escaping included.
func richStats() Stats {
	return Stats{
		UptimeSeconds: 12.5, SinceResetSeconds: 3.25,
		Registrations:  Registrations{Challenges: 3, Responses: 2, Failures: map[string]int64{"bad_signature": 1, "expired_token": 4}},
		ConfigRequests: ConfigRequests{Global: 5, GlobalPending: 1, Project: 6, KeysServed: 70, Pending: 8, Unchanged: 9, Unknown: 10},
		Signatures:     Signatures{Verified: 11, NotChecked: 14},
		Envelopes:      15, EnvelopesBySender: map[string]int64{"relay": 10, "sdk": 5},
		ItemsByType:   map[string]int64{"event": 16, "log": 17, "other": 1},
		RecordsByType: map[string]int64{"event": 16, "log": 170, "other": 1},
		Bytes:         map[string]EncodingBytes{"zstd": {Requests: 18, Wire: 1900, Decoded: 20000}, "identity": {Requests: 1, Wire: 21, Decoded: 21}},
		TopProjects:   []ProjectStats{{ID: 42, Envelopes: 9, Items: 22}, {ID: 7, Envelopes: 6, Items: 23}},
		MetricBuckets: 24,
		Outcomes: Outcomes{
			ByOutcome:  map[string]int64{"rate_limited": 30, "filtered": 5},
			ByCategory: map[string]int64{"error": 25, "transaction": 10},
			ByReason:   map[string]int64{`quota "q"\x`: 25, "": 5, "release-version": 5},
			Rows: []OutcomeRow{
				{Outcome: "filtered", Category: "transaction", Reason: "release-version", Quantity: 5, Count: 1},
				{Outcome: "rate_limited", Category: "error", Reason: `quota "q"\x`, Quantity: 25, Count: 3},
				{Outcome: "rate_limited", Category: "transaction", Reason: "", Quantity: 5, Count: 2},
			},
			Messages: map[string]int64{"metric_buckets": 26, "client_report": 27},
			Folded:   41,
		},
		Canaries: Canaries{ItemsScanned: 28, Leaks: map[string]int64{"password": 29}, KeptFound: map[string]int64{"kept": 30},
			Found: map[string]int64{"password": 31, "kept": 30}, ScrubbedItems: 32},
		Errors:   map[string]int64{"malformed_envelope:invalid_item_header": 33, "bad_signature": 34},
		Requests: map[string]map[string]int64{"envelope": {"200": 35, "413": 36}, "live": {"0": 37}},
		Faults:   map[string]int64{"429": 38, "reset": 39},
		Panics:   40,
		HTTPLayer: HTTPLayer{Connections: 41, ClosedBeforeRequest: 42, ClosedMidHeader: 43, HeaderTimeouts: 44,
			Rejected: map[string]int64{"400": 45, "431": 46}, WriteTimeouts: 47, ErrorLog: map[string]int64{"tls_handshake": 48}},
		Capture: &capture.Stats{Kept: 49, KeptBytes: 50, SkippedMax: 51, SkippedEvery: 52, Errors: 53, LastError: "capture: disk full"},
	}
}

// parseProm parses text exposition lines into "name{k="v",…}" → value, with
// label values unescaped and labels in their written order.
func parseProm(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	types := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if !utf8.ValidString(line) {
			t.Fatalf("invalid UTF-8: %q", line)
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if types[name] || (typ != "counter" && typ != "gauge") {
				t.Fatalf("TYPE line %q: repeated or unknown type", line)
			}
			types[name] = true
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			t.Fatalf("sample line %q", line)
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("sample line %q: %v", line, err)
		}
		series := line[:sp]
		name, labels, hasLabels := strings.Cut(series, "{")
		if !types[name] {
			t.Fatalf("sample %q before its TYPE line", line)
		}
		key := name
		if hasLabels {
			var parts []string
			rest := strings.TrimSuffix(labels, "}")
			for rest != "" {
				k, after, ok := strings.Cut(rest, `="`)
				if !ok {
					t.Fatalf("labels of %q", line)
				}
				var val strings.Builder
				i := 0
				for ; i < len(after) && after[i] != '"'; i++ {
					if after[i] == '\\' && i+1 < len(after) {
						i++
						switch after[i] {
						case 'n':
							val.WriteByte('\n')
						default:
							val.WriteByte(after[i])
						}
						continue
					}
					val.WriteByte(after[i])
				}
				parts = append(parts, k+"="+strconv.Quote(val.String()))
				rest = strings.TrimPrefix(after[min(i+1, len(after)):], ",")
			}
			key += "{" + strings.Join(parts, ",") + "}"
		}
		if _, dup := out[key]; dup {
			t.Fatalf("duplicate series %s", key)
		}
		out[key] = v
	}
	return out
}

func series(name string, labels ...string) string {
	s := promPrefix + name
	if len(labels) > 0 {
		var parts []string
		for i := 0; i < len(labels); i += 2 {
			parts = append(parts, labels[i]+"="+strconv.Quote(labels[i+1]))
		}
		s += "{" + strings.Join(parts, ",") + "}"
	}
	return s
}

// flatten turns the /stats JSON into leaf path → number. Array elements are
// named by their index.
func flatten(prefix string, v any, out map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(prefix+"/"+k, e, out)
		}
	case []any:
		for i, e := range x {
			flatten(prefix+"/"+strconv.Itoa(i), e, out)
		}
	default:
		out[prefix] = x
	}
}

// TestPrometheusCarriesEveryStat: every value of the /stats JSON appears in
// the Prometheus exposition with the same number (aggregates as the sum of
// their series), and the exposition has nothing the JSON lacks.
func TestPrometheusCarriesEveryStat(t *testing.T) {
	st := richStats()
	prom := parseProm(t, string(st.AppendPrometheus(nil)))
	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	leaves := map[string]any{}
	flatten("", doc, leaves)

	sumWhere := func(name, label, value string) float64 {
		var sum float64
		prefix := promPrefix + name + "{"
		for k, v := range prom {
			if strings.HasPrefix(k, prefix) && strings.Contains(k, label+"="+strconv.Quote(value)) {
				sum += v
			}
		}
		return sum
	}
	used := map[string]bool{}
	check := func(path, key string, want float64) {
		t.Helper()
		got, ok := prom[key]
		if !ok {
			t.Errorf("/stats %s has no Prometheus series %s", path, key)
			return
		}
		used[key] = true
		if got != want {
			t.Errorf("%s = %v, /stats %s = %v", key, got, path, want)
		}
	}
	simple := map[string]string{
		"/uptime_seconds": "uptime_seconds", "/since_reset_seconds": "since_reset_seconds",
		"/registrations/challenges": "registration_challenges_total", "/registrations/responses": "registration_responses_total",
		"/config_requests/global": "config_requests_global_total", "/config_requests/global_pending": "config_requests_global_pending_total",
		"/config_requests/project": "config_requests_project_total", "/config_requests/keys_served": "config_keys_served_total",
		"/config_requests/pending": "config_keys_pending_total", "/config_requests/unchanged": "config_keys_unchanged_total",
		"/config_requests/unknown": "config_keys_unknown_total", "/envelopes": "envelopes_total", "/data_envelopes": "data_envelopes_total", "/user_agents": "user_agents", "/metric_buckets": "metric_buckets_total",
		"/canaries/items_scanned": "canary_items_scanned_total", "/canaries/scrubbed_items": "scrubbed_items_total", "/panics": "panics_total", "/in_flight": "in_flight_requests",
		"/outcomes/folded":        "outcomes_folded_total",
		"/http_layer/connections": "http_connections_total", "/http_layer/write_timeouts": "http_write_timeouts_total",
		"/capture/kept": "capture_kept_total", "/capture/kept_bytes": "capture_kept_bytes_total", "/capture/errors": "capture_errors_total", "/capture/lost": "capture_lost_total",
	}
	httpClosed := map[string]string{"closed_before_request": "before_request", "closed_mid_header": "mid_header", "header_timeouts": "header_timeout"}
	labelled := map[string][2]string{ // JSON map → metric, label
		"/registrations/failures": {"registration_failures_total", "reason"}, "/envelopes_by_sender": {"envelopes_by_sender_total", "sender"},
		"/items_by_type": {"items_total", "type"}, "/records_by_type": {"records_total", "type"},
		"/outcomes/messages": {"outcome_messages_total", "source"}, "/canaries/leaks": {"canary_leaks_total", "kind"},
		"/canaries/kept_found": {"canary_kept_found_total", "kind"}, "/canaries/found": {"canary_found_total", "kind"},
		"/errors": {"errors_total", "reason"}, "/faults_injected": {"faults_injected_total", "fault"},
		"/http_layer/rejected": {"http_layer_rejected_total", "status"}, "/http_layer/error_log": {"http_error_log_total", "class"},
	}
	signatures := map[string]string{"verified": "verified", "not_checked": "not_checked"}
	bytesMetric := map[string]string{"requests": "bodies_total", "wire": "wire_bytes_total", "decoded": "decoded_bytes_total"}
	aggregates := map[string]string{"by_outcome": "outcome", "by_category": "category", "by_reason": "reason"}

	paths := make([]string, 0, len(leaves))
	for p := range leaves {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		v := leaves[path]
		num, isNum := v.(float64)
		seg := strings.Split(path, "/")[1:]
		dir, last := "/"+strings.Join(seg[:len(seg)-1], "/"), seg[len(seg)-1]
		switch {
		case seg[0] == "timeline":
			// A series over time: not a Prometheus sample (scrape the
			// data_envelopes_total counter instead).
		case simple[path] != "":
			check(path, series(simple[path]), num)
		case labelled[dir][0] != "":
			check(path, series(labelled[dir][0], labelled[dir][1], last), num)
		case dir == "/http_layer" && httpClosed[last] != "":
			check(path, series("http_layer_closed_total", "when", httpClosed[last]), num)
		case path == "/capture/last_error":
			// Text: in the JSON only.
		case dir == "/capture" && strings.HasPrefix(last, "skipped_"):
			check(path, series("capture_skipped_total", "reason", strings.TrimPrefix(last, "skipped_")), num)
		case dir == "/signatures":
			check(path, series("signatures_total", "result", signatures[last]), num)
		case len(seg) == 3 && seg[0] == "bytes_by_encoding":
			check(path, series(bytesMetric[last], "encoding", seg[1]), num)
		case len(seg) == 3 && seg[0] == "requests":
			check(path, series("requests_total", "route", seg[1], "status", seg[2]), num)
		case len(seg) == 3 && seg[0] == "top_projects":
			i, _ := strconv.Atoi(seg[1])
			p := st.TopProjects[i]
			id := strconv.FormatInt(p.ID, 10)
			switch last {
			case "id":
			case "envelopes":
				check(path, series("project_envelopes_total", "project", id), num)
			case "items":
				check(path, series("project_items_total", "project", id), num)
			default:
				t.Errorf("/stats %s: unmapped", path)
			}
		case len(seg) == 4 && seg[0] == "outcomes" && seg[1] == "rows":
			i, _ := strconv.Atoi(seg[2])
			r := st.Outcomes.Rows[i]
			labels := []string{"outcome", r.Outcome, "category", r.Category, "reason", r.Reason}
			switch last {
			case "outcome", "category", "reason":
				if !isNum && v != nil {
					continue // labels of the series below
				}
			case "quantity":
				check(path, series("outcomes_quantity_total", labels...), num)
			case "count":
				check(path, series("outcomes_records_total", labels...), num)
			default:
				t.Errorf("/stats %s: unmapped", path)
			}
		case len(seg) == 3 && seg[0] == "outcomes" && aggregates[seg[1]] != "":
			if got := sumWhere("outcomes_quantity_total", aggregates[seg[1]], last); got != num {
				t.Errorf("/stats %s = %v, Prometheus sum %v", path, num, got)
			}
		default:
			t.Errorf("/stats %s (%v) has no Prometheus counterpart in this test: map it", path, v)
		}
	}
	for k := range prom {
		if !used[k] {
			t.Errorf("Prometheus series %s is not in /stats", k)
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprint(len(leaves), " JSON leaves, ", len(prom), " series"))
	}
}

// TestPrometheusEndpointMatchesJSON checks the HTTP side: after real traffic
// both formats of GET /stats carry the same counts.
func TestPrometheusEndpointMatchesJSON(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	for range 3 {
		wantStatus(t, f.postEnvelope(p, "zstd", envelopeBody(p, "", item("event", "{}"), item("log", "{}")), nil), 200, "")
	}
	wantStatus(t, f.do("POST", "/api/999/envelope/", nil, nil), 403, "unknown project")
	text := string(f.do("GET", "/stats?format=prometheus", nil, nil).body)
	prom := parseProm(t, text)
	for key, want := range map[string]float64{
		series("envelopes_total"):                                      3,
		series("items_total", "type", "log"):                           3,
		series("project_envelopes_total", "project", itoa(p.ID)):       3,
		series("project_items_total", "project", itoa(p.ID)):           6,
		series("errors_total", "reason", "unknown_project"):            1,
		series("requests_total", "route", "envelope", "status", "200"): 3,
		series("requests_total", "route", "envelope", "status", "403"): 1,
	} {
		if prom[key] != want {
			t.Errorf("%s = %v, want %v", key, prom[key], want)
		}
	}
}

func TestClipReasonKeepsUTF8(t *testing.T) {
	long := strings.Repeat("é", maxReasonLen) // 2 bytes each: a byte cut would split one
	got := clipReason(long)
	if len(got) > maxReasonLen || !utf8.ValidString(got) || len(got) < maxReasonLen-3 {
		t.Errorf("clipReason: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}
