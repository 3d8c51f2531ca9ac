package upstream

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
)

// The tests below assert the exact answers Relay reacts to
// (docs/faults.md).

func (f *fixture) setFaults(t *testing.T, js string) {
	t.Helper()
	resp := f.do("POST", "/control", []byte(js), nil)
	wantStatus(t, resp, 200, "")
}

func TestFault429(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	f.setFaults(t, `{"inject":[{"route":"envelope","status":429,"probability":1,"retry_after":30,"rate_limits":"30:error;transaction:project:quota_exceeded"}]}`)
	resp := f.postEnvelope(p, compression.Zstd, envelopeBody(p, "", item("event", "{}")), nil)
	wantStatus(t, resp, 429, "injected")
	if resp.header.Get("Retry-After") != "30" || resp.header.Get("X-Sentry-Rate-Limits") != "30:error;transaction:project:quota_exceeded" {
		t.Errorf("429 headers %v", resp.header)
	}
	// Defaults: Retry-After 60 and an organization-wide generic limit.
	f.setFaults(t, `{"inject":[{"route":"*","status":429,"probability":1}]}`)
	resp = f.postEnvelope(p, compression.Zstd, envelopeBody(p, "", item("event", "{}")), nil)
	if resp.status != 429 || resp.header.Get("Retry-After") != "60" || resp.header.Get("X-Sentry-Rate-Limits") != "60::organization:generic" {
		t.Errorf("default 429: %d %v", resp.status, resp.header)
	}
	st := f.srv.Stats()
	if st.Faults["429"] != 2 || st.Envelopes != 0 || st.Requests["envelope"]["429"] != 2 {
		t.Errorf("faults %v envelopes %d", st.Faults, st.Envelopes)
	}
	// /stats is never faulted.
	wantStatus(t, f.do("GET", "/stats", nil, nil), 200, "")
}

func TestFaultStatuses(t *testing.T) {
	for _, status := range []int{500, 502, 503, 504} {
		f := newFixture(t, nil)
		f.setFaults(t, `{"inject":[{"route":"projectconfigs","status":`+itoa(int64(status))+`,"probability":1}]}`)
		r := newRelay(t)
		f.srv.RegisterRelay(r.id, r.pub)
		resp := f.signed(r, "/api/0/relays/projectconfigs/?version=3", `{"global":true}`)
		wantStatus(t, resp, status, "injected")
		// Other routes are unaffected.
		wantStatus(t, f.do("GET", "/api/0/relays/live/", nil, nil), 200, "")
	}
}

func TestFaultProbabilityIsSeeded(t *testing.T) {
	run := func() []int {
		f := newFixture(t, func(c *Config) {
			c.Seed = 42
			c.Faults = Faults{Inject: []Injection{{Route: "live", Status: 503, Probability: 0.3}}}
		})
		var got []int
		for i := 0; i < 200; i++ {
			got = append(got, f.do("GET", "/api/0/relays/live/", nil, nil).status)
		}
		return got
	}
	a, b := run(), run()
	n503 := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed, different fault sequence")
		}
		if a[i] == 503 {
			n503++
		}
	}
	if n503 < 35 || n503 > 85 {
		t.Errorf("%d of 200 requests got 503 at p=0.3", n503)
	}
}

// isNetworkError reports what Relay would call a network error.
func isNetworkError(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "timeout"))
}

func TestFaultReset(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Faults = Faults{Inject: []Injection{{Route: "envelope", Reset: true, Probability: 1}}}
	})
	p := f.ps[0]
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("POST", f.http.URL+p.EnvelopePath(), strings.NewReader(string(envelopeBody(p, "", item("event", "{}")))))
	req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want a connection error", resp.StatusCode)
	}
	if !isNetworkError(err) {
		t.Errorf("error %v is not a network error", err)
	}
	// The server counts the request after dropping the connection, so the
	// client may see the reset first (on a loaded machine, a while first).
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := f.srv.Stats()
		if st.Faults["reset"] == 1 && st.Envelopes == 0 && st.Requests["envelope"]["0"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("faults %v requests %v envelopes %d", st.Faults, st.Requests, st.Envelopes)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFaultOutage(t *testing.T) {
	t.Run("unavailable", func(t *testing.T) {
		f := newFixture(t, nil)
		f.setFaults(t, `{"outage":{"mode":"unavailable","duration":"10s"}}`)
		wantStatus(t, f.do("GET", "/api/0/relays/live/", nil, nil), 503, "outage")
		// GET /control shows it with its end time.
		var cur Faults
		if err := json.Unmarshal(f.do("GET", "/control", nil, nil).body, &cur); err != nil || cur.Outage == nil || cur.Outage.Until.IsZero() {
			t.Fatalf("control %+v %v", cur, err)
		}
		f.clock.Add(10 * time.Second)
		wantStatus(t, f.do("GET", "/api/0/relays/live/", nil, nil), 200, "")
		if cur := f.srv.Faults(); cur.Outage != nil {
			t.Errorf("ended outage still reported: %+v", cur.Outage)
		}
	})
	t.Run("refuse", func(t *testing.T) {
		f := newFixture(t, nil)
		f.setFaults(t, `{"outage":{"mode":"refuse","duration":"10s"}}`)
		resp, err := http.Get(f.http.URL + "/api/0/relays/live/")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("status %d during refuse outage", resp.StatusCode)
		}
		if !isNetworkError(err) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("hang", func(t *testing.T) {
		f := newFixture(t, nil)
		f.setFaults(t, `{"outage":{"mode":"hang","duration":"1h"}}`)
		client := &http.Client{Timeout: 200 * time.Millisecond}
		start := time.Now()
		resp, err := client.Get(f.http.URL + "/api/0/relays/live/")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("status %d during hang outage", resp.StatusCode)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) < 200*time.Millisecond {
			t.Errorf("error %v after %s, want a client timeout", err, time.Since(start))
		}
		// The harness routes still answer.
		wantStatus(t, f.do("GET", "/stats", nil, nil), 200, "")
	})
}

func TestFaultGlobalPendingAndRelayStop(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	f.srv.RegisterRelay(r.id, r.pub)
	f.setFaults(t, `{"global_pending":true}`)
	if a := f.configs(r, `{"global":true}`); a.GlobalStatus != "pending" || a.Global == nil {
		t.Fatalf("global answer %+v", a)
	}
	if st := f.srv.Stats().ConfigRequests; st.GlobalPending != 1 {
		t.Errorf("config stats %+v", st)
	}
	f.setFaults(t, `{"relay_stop":true}`)
	resp := f.signed(r, "/api/0/relays/projectconfigs/?version=3", `{"global":true}`)
	wantStatus(t, resp, 403, "stopped")
	if resp.json(t)["relay"] != "stop" {
		t.Errorf("body %s", resp.body)
	}
	other := newRelay(t)
	body := `{"relay_id":"` + other.id + `","public_key":"` + other.pub.String() + `","version":"26.6.0"}`
	resp = f.signed(other, "/api/0/relays/register/challenge/", body)
	if resp.status != 403 || resp.json(t)["relay"] != "stop" {
		t.Errorf("challenge during relay stop: %d %s", resp.status, resp.body)
	}
	// SDK traffic without a relay id is not stopped.
	p := f.ps[0]
	wantStatus(t, f.postEnvelope(p, compression.Identity, envelopeBody(p, "", item("event", "{}")), nil), 200, "")
	f.setFaults(t, `{}`)
	wantStatus(t, f.signed(r, "/api/0/relays/projectconfigs/?version=3", `{"global":true}`), 200, "")
}

func TestFaultLatency(t *testing.T) {
	f := newFixture(t, nil)
	f.setFaults(t, `{"latency":{"live":{"fixed":"80ms"},"*":{"fixed":"1m"}}}`)
	start := time.Now()
	wantStatus(t, f.do("GET", "/api/0/relays/live/", nil, nil), 200, "")
	if d := time.Since(start); d < 80*time.Millisecond || d > 50*time.Second {
		t.Errorf("live took %s, want ≥ 80ms (its own entry, not *)", d)
	}
	// The harness routes never wait (a minute of "*" latency would show).
	start = time.Now()
	wantStatus(t, f.do("GET", "/stats", nil, nil), 200, "")
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("/stats took %s; latency must not apply", d)
	}
	l := Latency{Min: Duration(10 * time.Millisecond), Max: Duration(20 * time.Millisecond), Mean: Duration(5 * time.Millisecond)}
	for i := 0; i < 100; i++ {
		if d := f.srv.latency(l); d < 10*time.Millisecond {
			t.Fatalf("latency draw %s below the minimum", d)
		}
	}
}

func TestControlRejectsBadFaults(t *testing.T) {
	f := newFixture(t, nil)
	for _, js := range []string{
		`{"inject":[{"route":"envelope","status":200,"probability":1}]}`,
		`{"inject":[{"route":"nowhere","status":500,"probability":1}]}`,
		`{"inject":[{"route":"envelope","status":500,"probability":2}]}`,
		`{"inject":[{"route":"envelope","status":500,"reset":true,"probability":1}]}`,
		`{"outage":{"mode":"explode","duration":"1s"}}`,
		`{"outage":{"mode":"hang","duration":"0s"}}`,
		`{"latency":{"envelope":{"fixed":"-1s"}}}`,
		`{"unknown_field":true}`,
		`not json`,
	} {
		resp := f.do("POST", "/control", []byte(js), nil)
		wantStatus(t, resp, 400, "invalid faults")
	}
	if got := f.srv.Stats().Errors["bad_control"]; got != 9 {
		t.Errorf("bad_control = %d", got)
	}
	wantStatus(t, f.do("DELETE", "/control", nil, nil), 405, "method not allowed")
}
