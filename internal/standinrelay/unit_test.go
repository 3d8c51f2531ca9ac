package standinrelay

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/canary"
	"github.com/relayload/relayload/compression"
)

func TestParseConfig(t *testing.T) {
	full := `
relay: {mode: managed, upstream: "http://127.0.0.1:9000/", host: 127.0.0.1, port: 3001}
logging: {level: warn, format: simplified}
sentry: {enabled: false}
http: {timeout: 3, encoding: br, global_metrics: false, auth_interval: 30, retry_delay: 2}
outcomes: {emit_outcomes: true, source: lt, aggregator: {bucket_interval: 1, flush_interval: 0}}
aggregator: {bucket_interval: 1, initial_delay: 0}
cache: {batch_interval: 0, batch_size: 50, project_expiry: 60, project_grace_period: 10, global_config_fetch_interval: 2}
limits: {max_thread_count: 2, max_concurrent_requests: 7, max_concurrent_queries: 3, shutdown_timeout: 4, query_timeout: 9, max_envelope_size: 1MiB}
metrics: {statsd: "127.0.0.1:8125", prefix: pfx}
standin: {capacity: 250.5, max_buffered_envelopes: 5, max_buffered_bytes: 1MiB}
unknown_section: {whatever: 1}
`
	c, err := ParseConfig([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"upstream", c.Upstream.String(), "http://127.0.0.1:9000"},
		{"listen", c.ListenAddr(), "127.0.0.1:3001"},
		{"level", c.LogLevel, LevelWarn},
		{"timeout", c.HTTPTimeout, 3 * time.Second},
		{"encoding", c.Encoding, compression.Brotli},
		{"auth_interval", c.AuthInterval, 30 * time.Second},
		{"retry_delay", c.RetryDelay, 2 * time.Second},
		{"emit", c.EmitOutcomes, OutcomesOn},
		{"source", c.OutcomeSource, "lt"},
		{"bucket", c.BucketInterval, time.Second},
		{"initial", c.InitialDelay, time.Duration(0)},
		{"batch_interval", c.BatchInterval, time.Duration(0)},
		{"batch_size", c.BatchSize, 50},
		{"expiry", c.ProjectExpiry, time.Minute},
		{"grace", c.ProjectGracePeriod, 10 * time.Second},
		{"global", c.GlobalFetchInterval, 2 * time.Second},
		{"threads", c.MaxThreadCount, 2},
		{"requests", c.MaxConcurrentRequests, 7},
		{"queries", c.MaxConcurrentQueries, 3},
		{"shutdown", c.ShutdownTimeout, 4 * time.Second},
		{"query_timeout", c.QueryTimeout, 9 * time.Second},
		{"max_envelope_size", c.MaxEnvelopeSize, int64(1 << 20)},
		{"statsd", c.StatsdAddr, "127.0.0.1:8125"},
		{"prefix", c.StatsdPrefix, "pfx"},
		{"capacity", c.Capacity, 250.5},
		{"max_buffered_envelopes", c.MaxBufferedEnvelopes, 5},
		{"max_buffered_bytes", c.MaxBufferedBytes, int64(1 << 20)},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}

	d, err := ParseConfig([]byte("relay: {mode: managed, upstream: 'http://h:1'}"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Encoding != compression.Zstd || d.EmitOutcomes != OutcomesAsClientReports || d.BatchInterval != 100*time.Millisecond ||
		d.GlobalFetchInterval != 10*time.Second || d.ShutdownTimeout != 10*time.Second || d.MaxConcurrentRequests != 100 || d.Port != 3000 || d.Capacity != 0 {
		t.Errorf("defaults: %+v", d)
	}
	if m, _ := ParseConfig([]byte("relay: {mode: managed, upstream: 'http://h:1'}\noutcomes: {emit_outcomes: as_client_reports}")); m.EmitOutcomes != OutcomesAsClientReports {
		t.Errorf("as_client_reports: %v", m.EmitOutcomes)
	}
	if m, _ := ParseConfig([]byte("relay: {mode: managed, upstream: 'http://h:1'}\noutcomes: {emit_outcomes: false}")); m.EmitOutcomes != OutcomesOff {
		t.Errorf("false: %v", m.EmitOutcomes)
	}

	bad := map[string]string{
		"proxy":         "relay: {mode: proxy, upstream: 'http://h:1'}",
		"no upstream":   "relay: {mode: managed}",
		"upstream path": "relay: {mode: managed, upstream: 'http://h:1/sentry'}",
		"ftp upstream":  "relay: {mode: managed, upstream: 'ftp://h:1'}",
		"port":          "relay: {mode: managed, upstream: 'http://h:1', port: 70000}",
		"encoding":      "relay: {mode: managed, upstream: 'http://h:1'}\nhttp: {encoding: lz4}",
		"emit":          "relay: {mode: managed, upstream: 'http://h:1'}\noutcomes: {emit_outcomes: sometimes}",
		"level":         "relay: {mode: managed, upstream: 'http://h:1'}\nlogging: {level: loud}",
		"negative":      "relay: {mode: managed, upstream: 'http://h:1'}\nhttp: {timeout: -1}",
		"zero batch":    "relay: {mode: managed, upstream: 'http://h:1'}\ncache: {batch_size: 0}",
		"size":          "relay: {mode: managed, upstream: 'http://h:1'}\nlimits: {max_envelope_size: lots}",
		"yaml":          "relay: [",
		"type":          "relay: {mode: managed, upstream: 'http://h:1'}\nlimits: {max_concurrent_requests: many}",
		"capacity<0":    "relay: {mode: managed, upstream: 'http://h:1'}\nstandin: {capacity: -1}",
		"capacity nan":  "relay: {mode: managed, upstream: 'http://h:1'}\nstandin: {capacity: .nan}",
		"capacity inf":  "relay: {mode: managed, upstream: 'http://h:1'}\nstandin: {capacity: .inf}",
		"capacity word": "relay: {mode: managed, upstream: 'http://h:1'}\nstandin: {capacity: lots}",
	}
	for name, y := range bad {
		if _, err := ParseConfig([]byte(y)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRateLimitHeaders(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ls := parseRateLimits("60:error;transaction:project:quota_x, 10::key:generic, junk, 5:session:organization", "", now)
	if len(ls) != 3 {
		t.Fatalf("%+v", ls)
	}
	if ls[0].scope != "project" || ls[0].reason != "quota_x" || !ls[0].covers("error") || !ls[0].covers("transaction") || ls[0].covers("session") {
		t.Errorf("limit 0: %+v", ls[0])
	}
	if !ls[1].covers("anything") || ls[1].scope != "key" || ls[1].until != now.Add(10*time.Second) {
		t.Errorf("limit 1: %+v", ls[1])
	}
	rl := newRateLimits()
	sc := scoping{orgID: 1, projectID: 42, key: keyA}
	rl.add(sc, ls, now)
	if l, ok := rl.check(sc, "error", now); !ok || l.reason != "quota_x" {
		t.Errorf("error: %+v %v", l, ok)
	}
	if l, ok := rl.check(sc, "monitor", now); !ok || l.scope != "key" {
		t.Errorf("monitor under the key-wide limit: %+v %v", l, ok)
	}
	other := scoping{orgID: 2, projectID: 43, key: keyB}
	if _, ok := rl.check(other, "error", now); ok {
		t.Error("limit leaked to another project")
	}
	if _, ok := rl.check(sc, "monitor", now.Add(11*time.Second)); ok {
		t.Error("key limit did not expire")
	}
	h, retry := formatRateLimits(ls[:2], now.Add(500*time.Millisecond))
	if h != "60:error;transaction:project:quota_x, 10::key:generic" || retry != 60 {
		t.Errorf("format: %q %d", h, retry)
	}
}

func TestScrubCanaries(t *testing.T) {
	out, _, err := processEvent([]byte(eventPayload()), eventID)
	if err != nil {
		t.Fatal(err)
	}
	var leaks []string
	kept := false
	canary.Scan(out, func(f canary.Finding) {
		if f.Leaked {
			leaks = append(leaks, f.Kind.Name)
		}
		kept = kept || f.Kind.Expect == canary.Kept
	})
	if len(leaks) > 0 || !kept {
		t.Errorf("leaks %v kept %v: %s", leaks, kept, out)
	}
	var ev map[string]any
	json.Unmarshal(out, &ev)
	meta := ev["_meta"].(map[string]any)
	pw := meta["request"].(map[string]any)["data"].(map[string]any)["password"].(map[string]any)[""].(map[string]any)
	if rem := pw["rem"].([]any)[0].([]any); rem[0] != "@password:filter" || rem[1] != "s" || pw["len"] != float64(len("rlcnry-pa-aaaab")) {
		t.Errorf("password remark %v", pw)
	}
	if ev["request"].(map[string]any)["headers"].(map[string]any)["User-Agent"] != "Mozilla/5.0" {
		t.Error("User-Agent header was scrubbed")
	}
	if ev["extra"].(map[string]any)["credentials"] != nil {
		t.Error("credentials object not removed")
	}
	if got := ev["extra"].(map[string]any)["db_url"]; got != "postgres://app:[Filtered]@db:5432/shop" {
		t.Errorf("db_url %v", got)
	}
	if got := ev["request"].(map[string]any)["cookies"].(map[string]any)["theme"]; got != "dark" {
		t.Errorf("harmless cookie %v", got)
	}

	// logentry.formatted gets the replace rules; exception values are exempt.
	out, _, err = processEvent([]byte(`{"logentry":{"formatted":"card 4111111111111111 for jane@example.com"},"exception":{"values":[{"type":"E","value":"password wrong"}]}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"formatted":"card [creditcard] for [email]"`) || !strings.Contains(string(out), `"value":"password wrong"`) {
		t.Errorf("logentry/exception: %s", out)
	}
	// Deterministic output.
	again, _, _ := processEvent([]byte(eventPayload()), eventID)
	again2, _, _ := processEvent([]byte(eventPayload()), eventID)
	if string(again) != string(again2) {
		t.Error("processing is not deterministic")
	}
	for _, bad := range []string{`{`, `[]`, `null`, `{"a":1} {"b":2}`, `"x"`} {
		if _, _, err := processEvent([]byte(bad), ""); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseSentryAuth(t *testing.T) {
	a, err := parseSentryAuth("sentry sentry_key=abc, sentry_version=7,sentry_client=x/1 ,sentry_secret=s")
	if err != nil || a.key != "abc" || a.version != "7" || a.client != "x/1" {
		t.Errorf("%+v %v", a, err)
	}
	for _, bad := range []string{"", "Sentry", "Basic abc", "Sentry sentry_version=7", "Sentry sentry_key="} {
		if _, err := parseSentryAuth(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if k, ok := validKey(keyA + ".no-cache"); !ok || k != keyA {
		t.Errorf("no-cache key: %q %v", k, ok)
	}
	for _, bad := range []string{"", strings.Repeat("a", 33), "ab-cd"} {
		if _, ok := validKey(bad); ok {
			t.Errorf("key %q accepted", bad)
		}
	}
	req := httptest.NewRequest("POST", "/api/1/envelope/", nil)
	req.Header.Set("Authorization", "Basic "+"MzFhNWE4OTRiNDUyNGY3NGE5YThkMGUyN2UyMWJhOTE6") // "<keyA>:"
	if a, found, err := requestAuth(req); err != nil || !found || a.key != keyA {
		t.Errorf("basic auth: %+v %v %v", a, found, err)
	}
}

func TestStatsdLines(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	s, err := newStatsd(pc.LocalAddr().String(), "sentry.relay")
	if err != nil {
		t.Fatal(err)
	}
	for range 40 {
		s.Timing("requests.duration", 1200*time.Microsecond, "route:envelope")
	}
	s.Count("event.accepted", 1)
	s.Count("event.accepted", 2)
	s.Gauge("buffer.envelopes_count", 3)
	s.Count("events.outcomes", 1, "reason:a,b|c#d")
	s.flush()
	var lines []string
	buf := make([]byte, 2048)
	pc.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			break
		}
		if n > maxDatagram {
			t.Errorf("datagram of %d bytes", n)
		}
		lines = append(lines, strings.Split(string(buf[:n]), "\n")...)
		pc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	}
	if len(lines) != 43 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
	count := map[string]int{}
	for _, l := range lines {
		count[l]++
	}
	if count["sentry.relay.requests.duration:1.2|ms|#route:envelope"] != 40 || count["sentry.relay.event.accepted:3|c"] != 1 || count["sentry.relay.buffer.envelopes_count:3|g"] != 1 ||
		count["sentry.relay.events.outcomes:1|c|#reason:a_b_c_d"] != 1 {
		t.Errorf("lines %v", count)
	}
}

func TestStandinEmitsStatsd(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	s := startStandin(t, baseConfig(up.srv.URL)+"metrics:\n  statsd: "+pc.LocalAddr().String()+"\n")
	waitFor(t, 5*time.Second, "ready", s.Ready)
	post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA))
	waitFor(t, 5*time.Second, "forwarded", func() bool { return len(up.received()) == 1 })
	seen := map[string]bool{}
	buf := make([]byte, 2048)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && !(seen["requests.duration"] && seen["event.accepted"] && seen["upstream.requests.duration"]) {
		pc.SetReadDeadline(deadline)
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			break
		}
		for _, l := range strings.Split(string(buf[:n]), "\n") {
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "sentry.relay."), ":")
			seen[name] = true
		}
	}
	for _, want := range []string{"requests.duration", "event.accepted", "upstream.requests.duration"} {
		if !seen[want] {
			t.Errorf("no %s metric (saw %v)", want, seen)
		}
	}
}

func TestClientReportMode(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	cfg := strings.Replace(baseConfig(up.srv.URL), "emit_outcomes: true", "emit_outcomes: as_client_reports", 1)
	up.envelopeHook = func(n int, e *receivedEnvelope) (int, http.Header) {
		if e.env.Items[0].Type == "event" {
			return 429, http.Header{"X-Sentry-Rate-Limits": {"60:error:key:q1"}}
		}
		return 0, nil
	}
	s := startStandin(t, cfg)
	waitFor(t, 5*time.Second, "ready", s.Ready)
	post(t, envURL(s, 42), singleItem("event", `{}`), authHeader(keyA))
	waitFor(t, 5*time.Second, "429", func() bool { return s.Stats().ForwardRateLimited == 1 })
	post(t, envURL(s, 42), singleItem("event", `{}`), authHeader(keyA))         // rate limited at ingest
	post(t, envURL(s, 42), singleItem("event", `{bad`), authHeader(keyA))       // limited before its JSON is looked at
	post(t, envURL(s, 42), singleItem("transaction", `{bad`), authHeader(keyA)) // invalid: not in client reports
	t.Cleanup(func() {
		if t.Failed() {
			up.mu.Lock()
			for _, e := range up.envelopes {
				t.Logf("upstream got %v: %s", e.itemTypes(), e.raw)
			}
			up.mu.Unlock()
			t.Logf("stats %+v", s.Stats())
		}
	})
	// The two limited events may land in different buckets: sum all reports.
	waitFor(t, 5*time.Second, "client reports", func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		var limited float64
		for _, e := range up.envelopes {
			if e.env.Items[0].Type != "client_report" {
				continue
			}
			var rep clientReport
			if err := json.Unmarshal(e.env.Items[0].Payload, &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Discarded) != 0 || len(rep.Filtered) != 0 {
				t.Fatalf("unexpected report %s", e.env.Items[0].Payload)
			}
			for _, r := range rep.RateLimited {
				if r.Reason != "q1" || r.Category != "error" {
					t.Fatalf("unexpected entry %+v", r)
				}
				limited += r.Quantity
			}
		}
		return limited == 2
	})
	if b := up.outcomeBuckets(); len(b) != 0 {
		t.Errorf("metric buckets in as_client_reports mode: %v", b)
	}
}

func TestScrubLogs(t *testing.T) {
	in := `{"version":2,"items":[{"timestamp":1.5,"level":"info","body":"mail to rlcnry-le-aaaab jane.doe@example.com",` +
		`"attributes":{"password":{"value":"rlcnry-la-aaaab","type":"string"},"retries":{"value":3,"type":"integer"},"note":{"value":"rlcnry-ke-aaaab","type":"string"}}},` +
		`{"timestamp":2,"level":"warn","body":"password reset for u-1"}]}`
	out, err := scrubLogs([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if leaks := leakedCanaries(out); len(leaks) > 0 {
		t.Errorf("leaks %v: %s", leaks, out)
	}
	for _, want := range []string{`"body":"mail to rlcnry-le-aaaab [email]"`, `"body":"[Filtered]"`, `"value":3`, `"rlcnry-ke-aaaab"`, `"version":2`, `"@email:replace"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %s: %s", want, out)
		}
	}
	for _, bad := range []string{`{}`, `{"items":3}`, `[`} {
		if _, err := scrubLogs([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
