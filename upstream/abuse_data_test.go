package upstream

// Abuse tests for what hostile clients put in the data: tables keyed by
// their strings, envelopes of a million tiny items, a relay id taken over
// with another key, unbounded /control durations, quantities that wrap, and
// Content-Encoding split over header lines (go test ./upstream -run Abuse).

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/projects"
)

// clientReportJSON builds a client_report payload with one discarded_events
// entry per category.
func clientReportJSON(categories []string, reason string, quantity string) string {
	var b strings.Builder
	b.WriteString(`{"timestamp":1782864000,"discarded_events":[`)
	for i, c := range categories {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"reason":%q,"category":%q,"quantity":%s}`, reason, c, quantity)
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestAbuseOutcomeRowsBounded: 15,000 distinct categories in SDK client
// reports (no relay credentials needed), 3,000 distinct outcome names in
// metric buckets and 3,000 distinct legacy outcome ids must not grow the
// outcome table past its bound; what does not fit is folded, not lost.
func TestAbuseOutcomeRowsBounded(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	const perEnvelope, envelopes = 1000, 15
	var sent int64
	for e := 0; e < envelopes; e++ {
		cats := make([]string, perEnvelope)
		for i := range cats {
			cats[i] = fmt.Sprintf("cat-%d-%d", e, i)
		}
		raw := envelopeBody(p, "", item("client_report", clientReportJSON(cats, "queue_overflow", "1")))
		wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, nil), 200, "")
		sent += perEnvelope
	}
	var buckets strings.Builder
	buckets.WriteByte('[')
	for i := 0; i < 3000; i++ {
		if i > 0 {
			buckets.WriteByte(',')
		}
		fmt.Fprintf(&buckets, `{"name":"c:outcomes/name-%d@none","type":"c","value":1,"tags":{"category":"1"}}`, i)
	}
	buckets.WriteByte(']')
	r := newRelay(t)
	f.register(r)
	metrics := `{"buckets":{"` + p.PublicKey + `":` + buckets.String() + `}}`
	wantStatus(t, f.signed(r, "/api/0/relays/metrics/", metrics), 200, "")
	sent += 3000
	var legacy strings.Builder
	legacy.WriteString(`{"outcomes":[`)
	for i := 0; i < 3000; i++ {
		if i > 0 {
			legacy.WriteByte(',')
		}
		fmt.Fprintf(&legacy, `{"outcome":%d,"category":%d,"quantity":1}`, 100+i, 1000+i)
	}
	legacy.WriteString(`]}`)
	wantStatus(t, f.signed(r, "/api/0/relays/outcomes/", legacy.String()), 200, "")
	sent += 3000

	st := f.srv.Stats()
	bound := maxOutcomeRows + (len(outcomeNames)+1)*(len(categoryNames)+1)
	if n := len(st.Outcomes.Rows); n > bound {
		t.Errorf("%d outcome rows kept, want at most %d", n, bound)
	}
	var total int64
	for _, row := range st.Outcomes.Rows {
		total += row.Quantity
	}
	if total != sent {
		t.Errorf("rows hold quantity %d, sent %d: folded outcomes were lost", total, sent)
	}
	if st.Outcomes.Folded == 0 || st.Outcomes.Folded != sent-int64(maxOutcomeRows) {
		t.Errorf("folded = %d, want %d (everything beyond the first %d rows)", st.Outcomes.Folded, sent-int64(maxOutcomeRows), maxOutcomeRows)
	}
	resp := f.do("GET", "/stats", nil, nil)
	wantStatus(t, resp, 200, "")
	if len(resp.body) > 2<<20 {
		t.Errorf("/stats is %d bytes after the attack, want ≤ 2 MiB", len(resp.body))
	}
}

// tinyItems is an envelope of n items of 14 bytes each ({"type":"a"}, an
// empty payload and its newline).
func tinyItems(p projects.Project, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"dsn":"http://` + p.PublicKey + `@127.0.0.1:3000/` + strconv.FormatInt(p.ID, 10) + `"}` + "\n")
	b.Grow(n * 14)
	for i := 0; i < n; i++ {
		b.WriteString("{\"type\":\"a\"}\n\n")
	}
	return b.Bytes()
}

// TestAbuseEnvelopeItemLimits: a 27 KB gzip body of a million tiny items,
// and envelopes over Relay's per-type count and size limits, are refused
// with 413 before anything is counted; envelopes at the limits pass.
func TestAbuseEnvelopeItemLimits(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	many := func(typ, payload string, n int) []byte {
		items := make([]envelope.Item, n)
		for i := range items {
			items[i] = item(typ, payload)
		}
		return envelopeBody(p, "", items...)
	}
	smallReport := clientReportJSON([]string{"error"}, "x", "1")
	bigReport := clientReportJSON(strings.Split(strings.Repeat("error,", 2000), ",")[:2000], strings.Repeat("r", 40), "1")
	tests := []struct {
		name   string
		raw    []byte
		status int
		detail string
	}{
		{"a million tiny items", tinyItems(p, 1_000_000), 413, "items"},
		{"one item over the item cap", tinyItems(p, MaxEnvelopeItems+1), 413, "items"},
		{"at the item cap", tinyItems(p, MaxEnvelopeItems), 200, ""},
		{"101 sessions", many("session", "{}", 101), 413, "session"},
		{"100 sessions", many("session", "{}", 100), 200, ""},
		{"31 attachments", many("attachment", "x", 31), 413, "attachment"},
		{"30 attachments", many("attachment", "x", 30), 200, ""},
		{"101 client reports", many("client_report", smallReport, 101), 413, "client_report"},
		{"client reports over 100 KiB", many("client_report", bigReport, 1), 413, "client_report"},
		{"26 standalone spans", many("span", "{}", 26), 413, "span"},
		{"25 standalone spans", many("span", "{}", 25), 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.srv.Stats()
			resp := f.postEnvelope(p, compression.Gzip, tc.raw, nil)
			wantStatus(t, resp, tc.status, tc.detail)
			after := f.srv.Stats()
			if tc.status == 200 {
				return
			}
			if after.Envelopes != before.Envelopes || after.Outcomes.Messages["client_report"] != before.Outcomes.Messages["client_report"] {
				t.Errorf("a refused envelope was counted: envelopes %d → %d", before.Envelopes, after.Envelopes)
			}
			if after.Errors["envelope_too_many_items"]+after.Errors["envelope_limit"] <= before.Errors["envelope_too_many_items"]+before.Errors["envelope_limit"] {
				t.Errorf("refusal not counted: errors %v", after.Errors)
			}
		})
	}
	if wire := len(encode(t, compression.Gzip, tinyItems(p, 1_000_000))); wire > 64<<10 {
		t.Errorf("the attack body is %d bytes gzip, expected tens of KB", wire)
	}
}

// TestAbuseReregisterWithAnotherKey: once a relay id is registered, a
// registration for that id with another key is refused (Sentry: 400
// "Attempted to register agent with a different public key"), in either
// step, and the real relay keeps signing with its own key.
func TestAbuseReregisterWithAnotherKey(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	real := newRelay(t)
	attacker := newRelay(t)
	attacker.id = real.id

	challengeBody := func(r *testRelay) string {
		return `{"relay_id":"` + r.id + `","public_key":"` + r.pub.String() + `","version":"26.6.0"}`
	}
	// The attacker gets a token for its key while the id is still free …
	resp := f.signed(attacker, "/api/0/relays/register/challenge/", challengeBody(attacker))
	wantStatus(t, resp, 200, "")
	attackerToken := resp.json(t)["token"].(string)
	// … the real relay registers …
	f.register(real)
	// … and neither step lets the attacker take the id over.
	wantStatus(t, f.signed(attacker, "/api/0/relays/register/challenge/", challengeBody(attacker)), 400, "different public key")
	responseBody := `{"relay_id":"` + real.id + `","token":"` + attackerToken + `","version":"26.6.0"}`
	wantStatus(t, f.signed(attacker, "/api/0/relays/register/response/", responseBody), 400, "different public key")

	wantStatus(t, f.postEnvelope(p, compression.Identity, envelopeBody(p, "", item("event", "{}")), f.relayHeaders(real)), 200, "")
	wantStatus(t, f.postEnvelope(p, compression.Identity, envelopeBody(p, "", item("event", "{}")), f.relayHeaders(attacker)), 401, "invalid relay signature")
	f.register(real) // re-registration with the same key (every auth_interval) still works
	if n := f.srv.Stats().Registrations.Failures["public_key_mismatch"]; n != 2 {
		t.Errorf("public_key_mismatch failures = %d, want 2", n)
	}

	// An allow-listed relay is held to its listed key the same way.
	g := newFixture(t, func(c *Config) {
		c.AllowList = true
	})
	listed := newRelay(t)
	g.srv.RegisterRelay(listed.id, listed.pub)
	impostor := newRelay(t)
	impostor.id = listed.id
	wantStatus(t, g.signed(impostor, "/api/0/relays/register/challenge/", challengeBody(impostor)), 400, "different public key")
}

// TestAbuseControlBounds: every duration and size /control takes is
// bounded; over a bound is 400 and nothing changes.
func TestAbuseControlBounds(t *testing.T) {
	f := newFixture(t, nil)
	manyInjections := `{"inject":[` + strings.TrimSuffix(strings.Repeat(`{"route":"envelope","status":500,"probability":0.01},`, MaxInjections+1), ",") + `]}`
	atInjections := `{"inject":[` + strings.TrimSuffix(strings.Repeat(`{"route":"envelope","status":500,"probability":0.01},`, MaxInjections), ",") + `]}`
	tests := []struct {
		body   string
		status int
	}{
		{`{"latency":{"envelope":{"min":"1000h"}}}`, 400},
		{`{"latency":{"envelope":{"min":"5m1s"}}}`, 400},
		{`{"latency":{"envelope":{"fixed":"5m1s"}}}`, 400},
		{`{"latency":{"envelope":{"max":"5m1s"}}}`, 400},
		{`{"latency":{"envelope":{"mean":"5m1s"}}}`, 400},
		{`{"latency":{"envelope":{"fixed":"4m","min":"2m"}}}`, 400},
		{`{"latency":{"envelope":{"fixed":"4m","min":"30s","max":"1m30s"}}}`, 400},
		{`{"latency":{"envelope":{"fixed":"1m","min":"2m","max":"3m","mean":"1m"}}}`, 200},
		{`{"latency":{"*":{"min":"5m"}}}`, 200},
		{`{"inject":[{"route":"envelope","status":429,"probability":1,"retry_after":3601}]}`, 400},
		{`{"inject":[{"route":"envelope","status":429,"probability":1,"retry_after":3600}]}`, 200},
		{`{"inject":[{"route":"envelope","status":429,"probability":1,"rate_limits":"1000000000:error:project"}]}`, 400},
		{`{"inject":[{"route":"envelope","status":429,"probability":1,"rate_limits":"60:error:project, 3601::organization"}]}`, 400},
		{`{"inject":[{"route":"envelope","status":429,"probability":1,"rate_limits":"x:error"}]}`, 400},
		{`{"inject":[{"route":"envelope","status":429,"probability":1,"rate_limits":"60:error:project:quota, 30::organization"}]}`, 200},
		{`{"inject":[{"route":"envelope","status":429,"probability":1,"rate_limits":"60:` + strings.Repeat("error;", 200) + `:project"}]}`, 400},
		{manyInjections, 400},
		{atInjections, 200},
		{`{"outage":{"mode":"hang","duration":"1h0m1s"}}`, 400},
		{`{"outage":{"mode":"hang","duration":"1h"}}`, 200},
		{`{"global_pending":true,"pad":"` + strings.Repeat("x", MaxControlBytes) + `"}`, 413},
	}
	for _, tc := range tests {
		name := tc.body
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			if err := f.srv.SetFaults(Faults{}); err != nil {
				t.Fatal(err)
			}
			resp := f.do("POST", "/control", []byte(tc.body), nil)
			wantStatus(t, resp, tc.status, "")
			if tc.status != 200 {
				if got := f.srv.Faults(); len(got.Latency)+len(got.Inject) != 0 || got.Outage != nil {
					t.Errorf("a refused /control body changed the faults: %+v", got)
				}
			}
		})
	}
	if err := f.srv.SetFaults(Faults{}); err != nil {
		t.Fatal(err)
	}
	// Even the largest latency each term allows sums to no more than the bound.
	s := f.srv
	for i := 0; i < 200; i++ {
		if d := s.latency(Latency{Fixed: Duration(maxLatency / 2), Min: Duration(maxLatency / 4), Max: Duration(maxLatency / 2), Mean: Duration(maxLatency)}); d > maxLatency {
			t.Fatalf("drew a latency of %s, more than %s", d, maxLatency)
		}
	}
}

// TestAbuseOutcomeQuantities: quantities that would wrap a total saturate
// it; negative, fractional or out-of-range quantities are 400 in every
// carrier, counted, and nothing of the carrier is counted.
func TestAbuseOutcomeQuantities(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	r := newRelay(t)
	f.register(r)
	max := strconv.FormatInt(math.MaxInt64, 10)
	for _, q := range []string{max, "1"} {
		raw := envelopeBody(p, "", item("client_report", clientReportJSON([]string{"error"}, "wrap", q)))
		wantStatus(t, f.postEnvelope(p, compression.Identity, raw, nil), 200, "")
	}
	for _, q := range []string{max, "1"} {
		wantStatus(t, f.signed(r, "/api/0/relays/outcomes/", `{"outcomes":[{"outcome":2,"category":1,"reason":"wrap","quantity":`+q+`}]}`), 200, "")
	}
	st := f.srv.Stats()
	for _, row := range st.Outcomes.Rows {
		if row.Reason == "wrap" && row.Quantity != math.MaxInt64 {
			t.Errorf("row %+v: quantity wrapped instead of saturating at %d", row, int64(math.MaxInt64))
		}
	}
	if got := st.Outcomes.ByCategory["error"]; got != math.MaxInt64 {
		t.Errorf("by_category[error] = %d, want saturated %d", got, int64(math.MaxInt64))
	}
	if got := st.Outcomes.ByReason["wrap"]; got != math.MaxInt64 {
		t.Errorf("by_reason[wrap] = %d, want saturated", got)
	}

	bad := []string{"-1", "1.5", "-0.5", "1e30", "9223372036854775808", `"3"`}
	for _, q := range bad {
		t.Run(q, func(t *testing.T) {
			before := f.srv.Stats()
			raw := envelopeBody(p, "", item("client_report", clientReportJSON([]string{"error", "transaction"}, "bad", q)))
			wantStatus(t, f.postEnvelope(p, compression.Identity, raw, nil), 400, "quantity")
			bucket := `[{"name":"c:outcomes/filtered@none","type":"c","value":` + q + `,"tags":{"category":"1","reason":"bad"}}]`
			wantStatus(t, f.postEnvelope(p, compression.Identity, envelopeBody(p, "", item("metric_buckets", bucket)), f.relayHeaders(r)), 400, "quantity")
			wantStatus(t, f.signed(r, "/api/0/relays/metrics/", `{"buckets":{"`+p.PublicKey+`":`+bucket+`}}`), 400, "quantity")
			wantStatus(t, f.signed(r, "/api/0/relays/outcomes/", `{"outcomes":[{"outcome":2,"category":1,"reason":"ok","quantity":1},{"outcome":2,"category":1,"reason":"bad","quantity":`+q+`}]}`), 400, "quantity")
			after := f.srv.Stats()
			if fmt.Sprint(after.Outcomes.Rows) != fmt.Sprint(before.Outcomes.Rows) || after.Envelopes != before.Envelopes {
				t.Errorf("a refused carrier was counted:\n before %v\n after  %v", before.Outcomes.Rows, after.Outcomes.Rows)
			}
			if got := after.Errors["bad_outcome_quantity"] - before.Errors["bad_outcome_quantity"]; got != 4 {
				t.Errorf("bad_outcome_quantity counted %d times, want 4", got)
			}
		})
	}
	// Integral floats are quantities (Relay writes counter values as 3.0).
	bucket := `[{"name":"c:outcomes/filtered@none","type":"c","value":3.0,"tags":{"category":"1","reason":"float"}}]`
	wantStatus(t, f.signed(r, "/api/0/relays/metrics/", `{"buckets":{"`+p.PublicKey+`":`+bucket+`}}`), 200, "")
}

// TestAbuseContentEncodingLines: Content-Encoding is one list however many
// header lines carry it; a stack of two real codings is refused (415) on
// one line and on two alike, instead of the second line being ignored.
func TestAbuseContentEncodingLines(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	raw := envelopeBody(p, eventID, item("event", "{}"))
	gz := encode(t, compression.Gzip, raw)
	tests := []struct {
		name   string
		lines  []string
		status int
	}{
		{"gzip then zstd on two lines", []string{"gzip", "zstd"}, 415},
		{"gzip then zstd on one line", []string{"gzip, zstd"}, 415},
		{"zstd then gzip on two lines", []string{"zstd", "gzip"}, 415},
		{"gzip twice", []string{"gzip", "gzip"}, 415},
		{"gzip and an unknown coding", []string{"gzip", "compress"}, 415},
		{"gzip", []string{"gzip"}, 200},
		{"gzip with empty list elements", []string{" , gzip ,"}, 200},
		{"identity then gzip", []string{"identity", "gzip"}, 200},
		{"gzip and an empty line", []string{"gzip", ""}, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{p.EnvelopePath(), "/control"} {
				body := gz
				if path == "/control" {
					body = encode(t, compression.Gzip, []byte(`{}`))
				}
				req, err := http.NewRequest("POST", f.http.URL+path, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Sentry-Auth", p.AuthHeader("test/1.0"))
				for _, l := range tc.lines {
					req.Header.Add("Content-Encoding", l)
				}
				resp, err := f.http.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantStatus(t, response{status: resp.StatusCode, body: b}, tc.status, "")
			}
		})
	}
}

// TestAbuseQueryBodyBounded: a project-config or public-key query of
// millions of tiny keys is refused by its size (413) before it is decoded,
// instead of being decoded in full and only then refused for its key count.
func TestAbuseQueryBodyBounded(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	f.register(r)
	keys := strings.TrimSuffix(strings.Repeat(`"k",`, 600_000), ",")
	wantStatus(t, f.signed(r, "/api/0/relays/projectconfigs/?version=3", `{"publicKeys":[`+keys+`]}`), 413, "too large")
	wantStatus(t, f.signed(r, "/api/0/relays/publickeys/", `{"relay_ids":[`+keys+`]}`), 413, "too large")
	if n := f.srv.Stats().Errors["too_large_query"]; n != 2 {
		t.Errorf("too_large_query counted %d times, want 2", n)
	}
	wantStatus(t, f.signed(r, "/api/0/relays/projectconfigs/?version=3", `{"publicKeys":["`+f.ps[0].PublicKey+`"]}`), 200, "")
}
