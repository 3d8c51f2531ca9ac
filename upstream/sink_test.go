package upstream

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/canary"
	"github.com/relayload/relayload/internal/compression"
)

const eventID = "9ec79c33ec9942ab8353589fcb2e04dc"

func TestEnvelopeSinkCountsEveryEncoding(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[4]
	raw := envelopeBody(p, eventID,
		item("event", `{"message":"hello"}`),
		item("attachment", "binary\x00data"),
		envelope.Item{Type: "log", ItemCount: 3, ContentType: "application/vnd.sentry.items.log+json", Payload: []byte(`{"items":[{},{},{}]}`)},
		item("nonsense_type", "x"),
	)
	for _, enc := range compression.Encodings() {
		resp := f.postEnvelope(p, enc, raw, nil)
		wantStatus(t, resp, 200, "")
		if got := resp.json(t)["id"]; got != eventID {
			t.Errorf("%s: id = %v", enc, got)
		}
	}
	n := int64(len(compression.Encodings()))
	st := f.srv.Stats()
	if st.Envelopes != n || st.EnvelopesBySender["sdk"] != n || st.EnvelopesBySender["relay"] != 0 {
		t.Fatalf("envelopes %d by sender %v", st.Envelopes, st.EnvelopesBySender)
	}
	wantItems := map[string]int64{"event": n, "attachment": n, "log": n, "other": n}
	wantRecords := map[string]int64{"event": n, "attachment": n, "log": 3 * n, "other": n}
	for k, v := range wantItems {
		if st.ItemsByType[k] != v || st.RecordsByType[k] != wantRecords[k] {
			t.Errorf("%s: items %d records %d, want %d %d", k, st.ItemsByType[k], st.RecordsByType[k], v, wantRecords[k])
		}
	}
	if len(st.ItemsByType) != len(wantItems) {
		t.Errorf("items by type %v", st.ItemsByType)
	}
	for _, enc := range compression.Encodings() {
		b := st.Bytes[string(enc)]
		if b.Requests != 1 || b.Decoded != int64(len(raw)) || b.Wire != int64(len(encode(t, enc, raw))) {
			t.Errorf("%s bytes %+v (raw %d)", enc, b, len(raw))
		}
	}
	if len(st.TopProjects) != 1 || st.TopProjects[0] != (ProjectStats{ID: p.ID, Envelopes: n, Items: 4 * n}) {
		t.Errorf("top projects %+v", st.TopProjects)
	}
	if st.Requests["envelope"]["200"] != n {
		t.Errorf("requests %v", st.Requests)
	}
}

// The distinct User-Agent headers of accepted envelopes are counted, a
// refused envelope's not, up to the bound.
func TestEnvelopeSinkUserAgents(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[1]
	raw := envelopeBody(p, eventID, item("event", `{"message":"hello"}`))
	for _, ua := range []string{"curl/8.5.0", "Wget/1.21.4", "curl/8.5.0", "python-requests/2.32.3", "Wget/1.21.4"} {
		wantStatus(t, f.postEnvelope(p, compression.Identity, raw, map[string]string{"User-Agent": ua}), 200, "")
	}
	wantStatus(t, f.do("POST", f.ps[2].EnvelopePath(), raw, map[string]string{"X-Sentry-Auth": p.AuthHeader("t"), "User-Agent": "refused/1"}), 403, "")
	if st := f.srv.Stats(); st.UserAgents != 3 {
		t.Fatalf("%d distinct agents, want 3", st.UserAgents)
	}
	c := newCounters(1, time.Now())
	for i := range maxUserAgents + 10 {
		c.countAgent(itoa(int64(i)))
	}
	if n := c.userAgents(); n != maxUserAgents {
		t.Fatalf("%d agents kept, want the bound %d", n, maxUserAgents)
	}
}

func TestEnvelopeSinkAnswerWithoutEventID(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.postEnvelope(f.ps[0], compression.Zstd, envelopeBody(f.ps[0], "", item("session", `{"sid":"x"}`)), nil)
	wantStatus(t, resp, 200, "")
	if string(resp.body) != "{}" {
		t.Errorf("body %s", resp.body)
	}
}

func TestEnvelopeSinkAuthSources(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[1]
	raw := envelopeBody(p, "", item("event", "{}"))
	// The DSN in the envelope header is enough.
	wantStatus(t, f.postEnvelope(p, compression.Identity, raw, map[string]string{"X-Sentry-Auth": ""}), 200, "")
	// Query string; nothing at all.
	hdrless := (&envelope.Envelope{Header: []byte(`{}`), Items: []envelope.Item{item("event", "{}")}}).Marshal()
	wantStatus(t, f.do("POST", p.EnvelopePath()+"?sentry_key="+p.PublicKey, hdrless, nil), 200, "")
	wantStatus(t, f.do("POST", p.EnvelopePath(), hdrless, nil), 401, "missing authorization")
	// A key of another project.
	wantStatus(t, f.postEnvelope(p, compression.Identity, hdrless, map[string]string{"X-Sentry-Auth": f.ps[2].AuthHeader("x")}), 403, "does not belong")
}

func TestEnvelopeSinkRejects(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxWireBytes = 64 << 10; c.MaxDecodedBytes = 256 << 10 })
	p := f.ps[0]
	good := envelopeBody(p, "", item("event", "{}"))
	tests := []struct {
		name   string
		path   string
		method string
		body   []byte
		hdr    map[string]string
		status int
		reason string
	}{
		{"unknown project", "/api/999/envelope/", "POST", good, nil, 403, "unknown_project"},
		{"bad encoding", p.EnvelopePath(), "POST", good, map[string]string{"Content-Encoding": "compress"}, 415, "bad_encoding"},
		{"corrupt zstd", p.EnvelopePath(), "POST", []byte("not zstd at all"), map[string]string{"Content-Encoding": "zstd"}, 400, "bad_compression"},
		{"corrupt gzip", p.EnvelopePath(), "POST", []byte("not gzip"), map[string]string{"Content-Encoding": "gzip"}, 400, "bad_compression"},
		{"malformed envelope", p.EnvelopePath(), "POST", []byte("{\"dsn\":1}\n"), nil, 400, "malformed_envelope:invalid_envelope_header"},
		{"missing length payload", p.EnvelopePath(), "POST", []byte("{}\n{\"type\":\"event\",\"length\":100}\n{}"), nil, 400, "malformed_envelope:unexpected_end_of_file"},
		{"wire too large", p.EnvelopePath(), "POST", bytes.Repeat([]byte("a"), 65<<10), nil, 413, "too_large_wire"},
		{"decoded too large", p.EnvelopePath(), "POST", encode(t, compression.Zstd, bytes.Repeat([]byte("a"), 300<<10)), map[string]string{"Content-Encoding": "zstd"}, 413, "too_large_decoded"},
		{"get", p.EnvelopePath(), "GET", nil, nil, 405, "method_not_allowed"},
		{"unknown route", "/api/0/nothing/", "POST", nil, nil, 404, "unknown_route"},
		{"store", "/api/1/store/", "POST", good, nil, 404, "store_endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{"X-Sentry-Auth": p.AuthHeader("t")}
			for k, v := range tc.hdr {
				hdr[k] = v
			}
			before := f.srv.Stats().Errors[tc.reason]
			resp := f.do(tc.method, tc.path, tc.body, hdr)
			wantStatus(t, resp, tc.status, "")
			if got := f.srv.Stats().Errors[tc.reason]; got != before+1 {
				t.Errorf("errors[%q] = %d, want %d (all: %v)", tc.reason, got, before+1, f.srv.Stats().Errors)
			}
		})
	}
	if st := f.srv.Stats(); st.Envelopes != 0 || st.Panics != 0 {
		t.Errorf("envelopes %d panics %d", st.Envelopes, st.Panics)
	}
}

// TestIdentityDecodedCap: an uncompressed body is also held to the decoded
// cap when that cap is below the wire cap.
func TestIdentityDecodedCap(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxWireBytes = 64 << 10; c.MaxDecodedBytes = 16 << 10 })
	p := f.ps[0]
	small := envelopeBody(p, "", item("attachment", strings.Repeat("x", 15<<10)))
	big := envelopeBody(p, "", item("attachment", strings.Repeat("x", 17<<10)))
	wantStatus(t, f.postEnvelope(p, compression.Identity, small, nil), 200, "")
	wantStatus(t, f.postEnvelope(p, compression.Identity, big, nil), 413, "decoded body too large")
	if st := f.srv.Stats(); st.Envelopes != 1 || st.Errors["too_large_decoded"] != 1 || st.Requests["envelope"]["413"] != 1 {
		t.Errorf("envelopes %d errors %v requests %v", st.Envelopes, st.Errors, st.Requests)
	}
}

func TestRelayEnvelopeSignatures(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	f.register(r)
	p := f.ps[0]
	raw := envelopeBody(p, "", item("transaction", "{}"))
	hdr := f.relayHeaders(r)
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, hdr), 200, "")
	// The same signature value again: verified again.
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, hdr), 200, "")
	st := f.srv.Stats()
	if st.Signatures.Verified != 4 || st.EnvelopesBySender["relay"] != 2 {
		t.Fatalf("signatures %+v senders %v", st.Signatures, st.EnvelopesBySender)
	}
	// After the max age the value is rejected.
	f.clock.Add(DefaultMaxSignatureAge + time.Second)
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, hdr), 401, "expired")
	// Forged, signed over non-empty data, missing, unknown relay.
	forged := map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": newRelay(t).sk.Sign(nil, f.clock.Now())}
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, forged), 401, "invalid relay signature")
	overBody := map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": r.sk.Sign(raw, f.clock.Now())}
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, overBody), 401, "invalid relay signature")
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, map[string]string{"X-Sentry-Relay-Id": r.id}), 401, "missing X-Sentry-Relay-Signature")
	stranger := newRelay(t)
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, f.relayHeaders(stranger)), 403, "relay not registered")
	st = f.srv.Stats()
	if st.Errors["expired_signature"] != 1 || st.Errors["bad_signature"] != 2 || st.Errors["missing_signature"] != 1 || st.Errors["unknown_relay"] != 1 {
		t.Errorf("errors %v", st.Errors)
	}
}

func TestOutcomes(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	f.register(r)
	p := f.ps[0]
	buckets := `[{"timestamp":1782864000,"width":0,"name":"c:outcomes/rate_limited@none","type":"c","value":3.0,"tags":{"category":"1","reason":"rate_limited","source":"lt"}},
{"timestamp":1782864000,"width":0,"name":"c:outcomes/filtered@none","type":"c","value":2,"tags":{"category":"2","reason":"release-version"}},
{"timestamp":1782864000,"width":0,"name":"c:outcomes/invalid@none","type":"c","value":1,"tags":{"category":"99"}},
{"timestamp":1782864000,"width":0,"name":"d:transactions/duration@millisecond","type":"d","value":[1,2],"tags":{}}]`
	report := `{"timestamp":1782864000,"discarded_events":[{"reason":"queue_overflow","category":"error","quantity":4}],"rate_limited_events":[{"reason":"","category":"transaction","quantity":5}]}`
	raw := envelopeBody(p, "", item("metric_buckets", buckets), item("client_report", report))
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, f.relayHeaders(r)), 200, "")

	legacy := `{"outcomes":[{"timestamp":"2026-05-01T12:00:00.123456Z","org_id":1,"project_id":1,"outcome":2,"reason":"rate_limited","category":1,"quantity":7},{"timestamp":"2026-05-01T12:00:00Z","outcome":3,"reason":"project_id"}]}`
	wantStatus(t, f.signed(r, "/api/0/relays/outcomes/", legacy), 200, "")

	metrics := `{"buckets":{"` + p.PublicKey + `":[{"timestamp":1782864000,"width":1,"name":"c:outcomes/accepted@none","type":"c","value":2.0,"tags":{"category":"1"}}]}}`
	zbody := encode(t, compression.Zstd, []byte(metrics))
	resp := f.do("POST", "/api/0/relays/metrics/", zbody, map[string]string{
		"Content-Encoding": "zstd", "X-Sentry-Relay-Id": r.id,
		"X-Sentry-Relay-Signature": r.sk.Sign([]byte(metrics), f.clock.Now()),
	})
	wantStatus(t, resp, 200, "")
	// Signed over the compressed bytes instead: rejected.
	resp = f.do("POST", "/api/0/relays/metrics/", zbody, map[string]string{
		"Content-Encoding": "zstd", "X-Sentry-Relay-Id": r.id,
		"X-Sentry-Relay-Signature": r.sk.Sign(zbody, f.clock.Now()),
	})
	wantStatus(t, resp, 401, "invalid relay signature")

	o := f.srv.Stats().Outcomes
	wantRows := []OutcomeRow{
		{"accepted", "error", "", 2, 1},
		{"client_discard", "error", "queue_overflow", 4, 1},
		{"filtered", "transaction", "release-version", 2, 1},
		{"invalid", "default", "project_id", 1, 1},
		{"invalid", "unknown:99", "", 1, 1},
		{"rate_limited", "error", "rate_limited", 10, 2},
		{"rate_limited", "transaction", "", 5, 1},
	}
	if fmt.Sprint(o.Rows) != fmt.Sprint(wantRows) {
		t.Errorf("rows\n got %v\nwant %v", o.Rows, wantRows)
	}
	if o.ByOutcome["rate_limited"] != 15 || o.ByCategory["error"] != 16 || o.ByReason["rate_limited"] != 10 {
		t.Errorf("by outcome %v category %v reason %v", o.ByOutcome, o.ByCategory, o.ByReason)
	}
	if o.Messages["metric_buckets"] != 1 || o.Messages["client_report"] != 1 || o.Messages["legacy_outcomes"] != 1 || o.Messages["metrics_endpoint"] != 1 {
		t.Errorf("messages %v", o.Messages)
	}
	if st := f.srv.Stats(); st.MetricBuckets != 1 {
		t.Errorf("metric buckets %d", st.MetricBuckets)
	}
}

func TestCanaries(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	kinds := canary.Kinds()
	var removed, masked, kept canary.Kind
	for _, k := range kinds {
		switch k.Expect {
		case canary.Removed:
			removed = k
		case canary.Masked:
			masked = k
		case canary.Kept:
			kept = k
		}
	}
	leakedEvent := fmt.Sprintf(`{"extra":{"a":%q,"b":%q,"c":%q}}`, removed.Value(7), masked.Value(7), kept.Value(7))
	scrubbed := fmt.Sprintf(`{"extra":{"a":"[Filtered]","b":"%s [Filtered]","c":%q},"_meta":{"extra":{"a":{"":{"rem":[["@password:filter","s",0,10]],"len":20}}}}}`, masked.Marker(8), kept.Value(8))
	raw := envelopeBody(p, "", item("event", leakedEvent))
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, nil), 200, "")
	raw = envelopeBody(p, "", item("transaction", scrubbed), item("attachment", removed.Value(9)))
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, nil), 200, "")
	c := f.srv.Stats().Canaries
	if c.ItemsScanned != 2 || c.ScrubbedItems != 1 {
		t.Errorf("scanned %d scrubbed %d", c.ItemsScanned, c.ScrubbedItems)
	}
	if c.Leaks[removed.Name] != 1 || c.Leaks[masked.Name] != 1 || len(c.Leaks) != 2 {
		t.Errorf("leaks %v", c.Leaks)
	}
	if c.KeptFound[kept.Name] != 2 || c.Found[masked.Name] != 2 {
		t.Errorf("kept %v found %v", c.KeptFound, c.Found)
	}
}

// TestConcurrentCountsAndResets posts envelopes from many goroutines while
// resetting: the sum over reset snapshots and the final snapshot is exact.
func TestConcurrentCountsAndResets(t *testing.T) {
	f := newFixture(t, nil)
	const workers, per = 16, 60
	raws := make([][]byte, len(f.ps))
	for i, p := range f.ps {
		raws[i] = encode(t, compression.Zstd, envelopeBody(p, "", item("event", "{}"), item("session", "{}"), item("log", "{}")))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var resets []Stats
	var rmu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				st := f.srv.ResetStats()
				rmu.Lock()
				resets = append(resets, st)
				rmu.Unlock()
			}
		}
	}()
	var sent sync.WaitGroup
	client := f.http.Client()
	for w := 0; w < workers; w++ {
		sent.Add(1)
		go func(w int) {
			defer sent.Done()
			for i := 0; i < per; i++ {
				pi := (w + i) % len(f.ps)
				p := f.ps[pi]
				req, _ := http.NewRequest("POST", f.http.URL+p.EnvelopePath(), bytes.NewReader(raws[pi]))
				req.Header.Set("Content-Encoding", "zstd")
				req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}(w)
	}
	sent.Wait()
	close(stop)
	wg.Wait()
	all := append(resets, f.srv.Stats())
	var env, ev, logs, req200 int64
	for _, st := range all {
		env += st.Envelopes
		ev += st.ItemsByType["event"]
		logs += st.ItemsByType["log"]
		req200 += st.Requests["envelope"]["200"]
	}
	const total = workers * per
	if env != total || ev != total || logs != total || req200 != total {
		t.Fatalf("over %d generations: envelopes %d events %d logs %d requests %d, want %d", len(all), env, ev, logs, req200, total)
	}
	if len(resets) < 2 {
		t.Logf("only %d resets happened", len(resets))
	}
}

func TestStatsEndpoints(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	wantStatus(t, f.postEnvelope(p, compression.Gzip, envelopeBody(p, "", item("event", "{}"), item("check_in", "{}")), nil), 200, "")
	resp := f.do("GET", "/stats?format=prometheus", nil, nil)
	if resp.status != 200 || !strings.HasPrefix(resp.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("prometheus: %d %s", resp.status, resp.header.Get("Content-Type"))
	}
	text := string(resp.body)
	for _, want := range []string{
		"relayload_upstream_envelopes_total 1\n",
		`relayload_upstream_items_total{type="check_in"} 1` + "\n",
		`relayload_upstream_items_total{type="event"} 1` + "\n",
		`relayload_upstream_requests_total{route="envelope",status="200"} 1` + "\n",
		"# TYPE relayload_upstream_items_total counter\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("prometheus output lacks %q", want)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.HasPrefix(line, "relayload_upstream_") || strings.Count(line, " ") < 1 {
			t.Errorf("bad sample line %q", line)
		}
	}
	wantStatus(t, f.do("GET", "/stats?format=xml", nil, nil), 400, "unknown format")
	wantStatus(t, f.do("GET", "/stats/reset", nil, nil), 405, "method not allowed")
	reset := f.do("POST", "/stats/reset", nil, nil)
	wantStatus(t, reset, 200, "")
	if reset.json(t)["envelopes"] != 1.0 {
		t.Errorf("reset returned %s", reset.body)
	}
	st := f.srv.Stats()
	if st.Envelopes != 0 || len(st.ItemsByType) != 0 || st.Requests["stats_reset"]["200"] != 1 {
		t.Errorf("after reset: %+v", st)
	}
	pr := f.do("GET", "/projects?origin=http://relay.example:3000", nil, nil)
	wantStatus(t, pr, 200, "")
	if !strings.Contains(string(pr.body), `"dsn":"http://`+p.PublicKey+`@relay.example:3000/1"`) {
		t.Errorf("projects: %.200s", pr.body)
	}
	pr = f.do("GET", "/projects", nil, nil)
	host := strings.TrimPrefix(f.http.URL, "http://")
	if !strings.Contains(string(pr.body), `@`+host+`/1"`) {
		t.Errorf("projects without origin: %.200s", pr.body)
	}
	wantStatus(t, f.do("GET", "/projects?origin=ftp://x", nil, nil), 400, "bad origin")
}

func TestUptimeAndSinceReset(t *testing.T) {
	f := newFixture(t, nil)
	f.clock.Add(90 * time.Second)
	if st := f.srv.Stats(); st.UptimeSeconds != 90 || st.SinceResetSeconds != 90 {
		t.Fatalf("uptime %v since reset %v, want 90 90", st.UptimeSeconds, st.SinceResetSeconds)
	}
	f.srv.ResetStats()
	f.clock.Add(30 * time.Second)
	if st := f.srv.Stats(); st.UptimeSeconds != 120 || st.SinceResetSeconds != 30 {
		t.Fatalf("after a reset: uptime %v since reset %v, want 120 30", st.UptimeSeconds, st.SinceResetSeconds)
	}
}

func TestPanicRecovered(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.hook = func(r *http.Request) {
		if r.URL.Path == "/api/0/relays/live/" {
			panic("boom")
		}
	}
	resp := f.do("GET", "/api/0/relays/live/", nil, nil)
	wantStatus(t, resp, 500, "internal error")
	st := f.srv.Stats()
	if st.Panics != 1 || st.Errors["panic"] != 1 || st.Requests["live"]["500"] != 1 {
		t.Errorf("panics %d errors %v requests %v", st.Panics, st.Errors, st.Requests)
	}
}

func TestChunkedBodies(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxWireBytes = 64 << 10 })
	p := f.ps[0]
	post := func(body []byte) int {
		// A reader of unknown length makes the client send chunked.
		req, _ := http.NewRequest("POST", f.http.URL+p.EnvelopePath(), io.MultiReader(bytes.NewReader(body)))
		req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
		resp, err := f.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(resp.TransferEncoding) != 0 || req.ContentLength != 0 {
			t.Fatalf("request was not chunked")
		}
		return resp.StatusCode
	}
	if got := post(envelopeBody(p, "", item("event", "{}"))); got != 200 {
		t.Errorf("small chunked body: %d", got)
	}
	big := envelopeBody(p, "", item("attachment", strings.Repeat("x", 70<<10)))
	if got := post(big); got != 413 {
		t.Errorf("chunked body over the cap: %d", got)
	}
	if st := f.srv.Stats(); st.Envelopes != 1 || st.Errors["too_large_wire"] != 1 {
		t.Errorf("envelopes %d errors %v", st.Envelopes, st.Errors)
	}
}
