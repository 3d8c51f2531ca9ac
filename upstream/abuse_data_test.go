package upstream

// Abuse tests for what hostile clients put in the data: tables keyed by
// their strings, envelopes of a million tiny items, a relay id taken over
// with another key, unbounded /control durations, quantities that wrap, and
// Content-Encoding split over header lines. Each reproduces an attack that
// succeeded against commit 548bb3b (go test ./upstream -run Abuse).

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/relayload/relayload/internal/compression"
)

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
