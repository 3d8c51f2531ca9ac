package standinrelay

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	statsdrecv "github.com/relayload/relayload/internal/statsd"
	"github.com/relayload/relayload/internal/testutil"
	"github.com/relayload/relayload/upstream"
)

// TestRegistrationGatesEverything: until registration succeeds the
// stand-in is not ready and sends nothing else upstream, but it accepts
// envelopes and holds them; once registered it is ready, fetches the
// configs and forwards what it held.
func TestRegistrationGatesEverything(t *testing.T) {
	g := newRig(t, upstream.Config{})
	g.gate = make(chan struct{})
	s := startStandin(t, g.url, nil)
	if got := s.ready(t); got != http.StatusServiceUnavailable {
		t.Errorf("ready before registration: %d, want 503", got)
	}
	if status, _, body := s.post(t, g.ps[0], envelopeOf("", item("event"))); status != 200 {
		t.Fatalf("envelope before registration: %d %s", status, body)
	}
	if st := g.srv.Stats(); st.ConfigRequests != (upstream.ConfigRequests{}) || st.Envelopes != 0 {
		t.Errorf("upstream traffic before registration: configs %+v, envelopes %d", st.ConfigRequests, st.Envelopes)
	}
	close(g.gate)
	waitFor(t, 10*time.Second, "readiness", func() bool { return s.ready(t) == 200 })
	waitFor(t, 10*time.Second, "the held envelope upstream", func() bool { return g.srv.DataEnvelopes() == 1 })
	if st := g.srv.Stats(); st.Registrations.Responses != 1 || st.ConfigRequests.Global < 1 || st.ConfigRequests.KeysServed != 1 {
		t.Errorf("registrations %+v, configs %+v", st.Registrations, st.ConfigRequests)
	}
}

// TestForwarding: envelopes of every kind relayload sends are answered
// 200 with their event id, wait for their configs (asked for in one
// batched request), and reach the upstream zstd-compressed and signed
// (every signature verified), one forwarded envelope per envelope sent;
// StatsD has event.accepted twice and event.processing_time once per
// envelope, in Relay's wire format.
func TestForwarding(t *testing.T) {
	g := newRig(t, upstream.Config{})
	rec, err := statsdrecv.Listen(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	s := startStandin(t, g.url, func(c *Config) { c.StatsdAddr, c.BatchInterval = rec.Addr(), 100*time.Millisecond })
	waitFor(t, 10*time.Second, "readiness", func() bool { return s.ready(t) == 200 })
	kinds := []string{"event", "transaction", "session", "check_in", "log"}
	for i, k := range kinds {
		id := strings.Repeat(strconv.Itoa(i), 32)
		status, _, body := s.post(t, g.ps[i%2], envelopeOf(id, item(k)))
		if status != 200 || body != `{"id":"`+id+`"}` {
			t.Errorf("%s: %d %s", k, status, body)
		}
	}
	n := int64(len(kinds))
	waitFor(t, 10*time.Second, "every envelope upstream", func() bool { return g.srv.DataEnvelopes() == n })
	st := g.srv.Stats()
	if len(st.Errors) != 0 || st.Signatures.Verified < n {
		t.Errorf("upstream errors %v, signatures %+v", st.Errors, st.Signatures)
	}
	if b := st.Bytes["zstd"]; b.Requests != n {
		t.Errorf("bytes by encoding %+v, want %d zstd envelopes", st.Bytes, n)
	}
	for _, k := range kinds {
		if st.ItemsByType[k] != 1 {
			t.Errorf("items by type %v", st.ItemsByType)
		}
	}
	if c := st.ConfigRequests; c.Project != 1 || c.KeysServed != 2 {
		t.Errorf("config requests %+v, want both keys in one request", c)
	}
	if st.EnvelopesBySender["relay"] != n {
		t.Errorf("envelopes by sender %v", st.EnvelopesBySender)
	}
	waitFor(t, 5*time.Second, "the StatsD metrics", func() bool {
		snap := rec.Snapshot()
		return snap.Counters["sentry.relay.event.accepted"] == float64(2*n) && snap.Timers["sentry.relay.event.processing_time"].Count == float64(n)
	})
	if snap := rec.Snapshot(); snap.Malformed != 0 || len(snap.Names()) != 2 {
		t.Errorf("statsd: %d malformed lines, metrics %v", snap.Malformed, snap.Names())
	}
}

// TestDisabledProject: an envelope for a key the upstream has no config
// for is dropped once the answer arrives; later ones are answered 403.
func TestDisabledProject(t *testing.T) {
	g := newRig(t, upstream.Config{})
	s := startStandin(t, g.url, nil)
	unknown := g.ps[0]
	unknown.PublicKey = strings.Repeat("ab", 16)
	if status, _, body := s.post(t, unknown, envelopeOf("", item("event"))); status != 200 {
		t.Fatalf("first envelope: %d %s", status, body)
	}
	waitFor(t, 10*time.Second, "the config answer", func() bool { return g.srv.Stats().ConfigRequests.Unknown == 1 })
	waitFor(t, 5*time.Second, "the envelope dropped", func() bool { return s.buffer.len() == 0 })
	if status, _, body := s.post(t, unknown, envelopeOf("", item("event"))); status != http.StatusForbidden {
		t.Errorf("envelope for a disabled project: %d %s", status, body)
	}
	if n := g.srv.Stats().Envelopes; n != 0 {
		t.Errorf("%d envelopes forwarded", n)
	}
}

// TestPendingConfig: keys the upstream answers as pending are asked for
// again until their configs come.
func TestPendingConfig(t *testing.T) {
	g := newRig(t, upstream.Config{PendingFor: 200 * time.Millisecond})
	s := startStandin(t, g.url, nil)
	if status, _, body := s.post(t, g.ps[0], envelopeOf("", item("event"))); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	waitFor(t, 10*time.Second, "the envelope upstream", func() bool { return g.srv.DataEnvelopes() == 1 })
	if c := g.srv.Stats().ConfigRequests; c.Pending < 1 || c.KeysServed != 1 {
		t.Errorf("config requests %+v", c)
	}
}

// TestOutageRetries: during an upstream outage (every request 503) the
// stand-in goes on answering 200 and keeps what it cannot send; like
// Relay, nothing is retried while sends keep failing (about one 503 per
// envelope), and everything goes out once the upstream answers again.
// Seen with Relay 26.4.0: a 3 s outage at 100/s got 300 503s and nothing
// was lost.
func TestOutageRetries(t *testing.T) {
	g := newRig(t, upstream.Config{})
	s := startStandin(t, g.url, func(c *Config) { c.RetryDelay = 300 * time.Millisecond })
	p := g.ps[0]
	if status, _, _ := s.post(t, p, envelopeOf("", item("event"))); status != 200 {
		t.Fatal(status)
	}
	waitFor(t, 10*time.Second, "the first envelope upstream", func() bool { return g.srv.DataEnvelopes() == 1 })
	const outage = 1500 * time.Millisecond
	if err := g.srv.SetFaults(upstream.Faults{Outage: &upstream.Outage{Mode: upstream.OutageUnavailable, Duration: upstream.Duration(outage)}}); err != nil {
		t.Fatal(err)
	}
	stalls := testutil.StartStalls()
	end := time.Now().Add(outage)
	sent := int64(1)
	for time.Now().Before(end.Add(-100 * time.Millisecond)) {
		if status, _, body := s.post(t, p, envelopeOf("", item("check_in"))); status != 200 {
			t.Fatalf("during the outage: %d %s", status, body)
		}
		sent++
		time.Sleep(50 * time.Millisecond)
	}
	lost := stalls.Stop()
	waitFor(t, 20*time.Second, "everything upstream after the outage", func() bool { return g.srv.DataEnvelopes() == sent })
	unavailable := g.srv.Stats().Requests["envelope"]["503"]
	t.Logf("%d envelopes during a %s outage, %d answered 503, %s lost to the machine", sent-1, outage, unavailable, lost)
	// An envelope whose forward a stall held past the outage's end gets no
	// 503: each 50 ms lost (one post's interval) excuses one.
	if least := sent/2 - int64(lost/(50*time.Millisecond)); unavailable < least || unavailable > (sent-1)*3/2 {
		t.Errorf("%d 503s for %d envelopes sent during the outage: want about one each (%s lost to the machine)", unavailable, sent-1, lost)
	}
}

// TestUpstream429: after the upstream answers a forwarded envelope 429
// (the fake upstream's 429 storm: X-Sentry-Rate-Limits "1::organization:
// generic"), that project key's envelopes are answered 429 with
// Retry-After and not forwarded; other keys are not limited. Seen with
// Relay 26.4.0 in a 3 s 429 storm at 100/s: the upstream answered 31
// envelopes 429, clients got 318 429s.
func TestUpstream429(t *testing.T) {
	g := newRig(t, upstream.Config{})
	s := startStandin(t, g.url, nil)
	a, b := g.ps[0], g.ps[1]
	for _, p := range []int{0, 1} {
		if status, _, _ := s.post(t, g.ps[p], envelopeOf("", item("event"))); status != 200 {
			t.Fatal(status)
		}
	}
	waitFor(t, 10*time.Second, "the configs", func() bool { return g.srv.DataEnvelopes() == 2 })
	if err := g.srv.SetFaults(upstream.Faults{Inject: []upstream.Injection{{Route: "envelope", Status: 429, Probability: 1, RetryAfter: 30}}}); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := s.post(t, a, envelopeOf("", item("event"))); status != 200 {
		t.Fatal(status)
	}
	waitFor(t, 10*time.Second, "the upstream's 429", func() bool { return g.srv.Stats().Requests["envelope"]["429"] == 1 })
	waitFor(t, 5*time.Second, "the limit cached", func() bool {
		_, limited := s.limits.check(a.PublicKey, "transaction", time.Now())
		return limited
	})
	_ = g.srv.SetFaults(upstream.Faults{})
	status, hdr, _ := s.post(t, a, envelopeOf("", item("event"), item("log")))
	if ra, _ := strconv.Atoi(hdr.Get("Retry-After")); status != http.StatusTooManyRequests || ra < 28 || ra > 30 {
		t.Errorf("limited key: %d, Retry-After %q", status, hdr.Get("Retry-After"))
	}
	if status, _, _ := s.post(t, b, envelopeOf("", item("event"))); status != 200 {
		t.Errorf("other key: %d", status)
	}
	waitFor(t, 10*time.Second, "the other key's envelope", func() bool { return g.srv.DataEnvelopes() == 3 })
	if n := g.srv.Stats().Requests["envelope"]["429"]; n != 1 {
		t.Errorf("%d envelopes answered 429 upstream, want 1 (the limited key's are not sent)", n)
	}
}

// TestNeverForwardedItems: like Relay 26.4.0, the stand-in answers 200 to
// an envelope of client reports or trace metrics alone and forwards
// nothing of it, and forwards an event sent beside them without them.
func TestNeverForwardedItems(t *testing.T) {
	g := newRig(t, upstream.Config{})
	s := startStandin(t, g.url, nil)
	waitFor(t, 10*time.Second, "readiness", func() bool { return s.ready(t) == 200 })
	for _, body := range [][]byte{
		envelopeOf("", item("client_report")),
		envelopeOf("", item("trace_metric")),
		envelopeOf("", item("client_report"), item("trace_metric")),
		envelopeOf(strings.Repeat("a", 32), item("event"), item("client_report")),
	} {
		if status, _, resp := s.post(t, g.ps[0], body); status != 200 {
			t.Fatalf("%q: %d %s", body, status, resp)
		}
	}
	waitFor(t, 10*time.Second, "the event upstream", func() bool { return g.srv.DataEnvelopes() >= 1 })
	st := g.srv.Stats()
	if st.Envelopes != 1 || st.ItemsByType["event"] != 1 || st.ItemsByType["client_report"] != 0 || st.ItemsByType["trace_metric"] != 0 {
		t.Errorf("upstream got %d envelopes, items %v; want the event alone", st.Envelopes, st.ItemsByType)
	}
}
