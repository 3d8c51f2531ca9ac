package upstream

import (
	"slices"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
)

// TestTimeline checks that data envelopes are counted by the second they
// arrived in, that Relay's own metric and client-report envelopes are not
// data, and that a reset starts a new timeline.
func TestTimeline(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	f.register(r)
	p := f.ps[1]
	event := envelopeBody(p, eventID, item("event", `{"message":"x"}`))
	mixed := envelopeBody(p, "", item("client_report", `{"timestamp":1782864000}`), item("check_in", `{"check_in_id":"a"}`))
	metricsOnly := envelopeBody(p, "", item("metric_buckets", `[]`))
	reportOnly := envelopeBody(p, "", item("client_report", `{"timestamp":1782864000}`))

	post := func(raw []byte, n int) {
		for range n {
			wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, f.relayHeaders(r)), 200, "")
		}
	}
	f.srv.ResetStats()
	post(event, 3)       // second 0
	post(metricsOnly, 5) // not data
	f.clock.Add(1500 * time.Millisecond)
	post(mixed, 2) // second 1: a check-in with a report is data
	f.clock.Add(2 * time.Second)
	post(event, 1)      // second 3
	post(reportOnly, 4) // not data

	st := f.srv.Stats()
	if want := []int64{3, 2, 0, 1}; !slices.Equal(st.Timeline.Envelopes, want) {
		t.Errorf("timeline %v, want %v", st.Timeline.Envelopes, want)
	}
	if st.DataEnvelopes != 6 || st.Envelopes != 15 || st.Timeline.Total() != 6 || f.srv.DataEnvelopes() != 6 {
		t.Errorf("data %d envelopes %d timeline total %d, want 6 15 6", st.DataEnvelopes, st.Envelopes, st.Timeline.Total())
	}

	old := f.srv.ResetStats()
	if old.Timeline.Total() != 6 {
		t.Errorf("the reset's final snapshot has %d data envelopes", old.Timeline.Total())
	}
	st = f.srv.Stats()
	if len(st.Timeline.Envelopes) != 0 || !st.Timeline.Start.Equal(f.clock.Now()) {
		t.Errorf("after reset: %v starting %v", st.Timeline.Envelopes, st.Timeline.Start)
	}
	f.clock.Add(TimelineSeconds * time.Second)
	post(event, 2)
	if st := f.srv.Stats(); st.Timeline.Later != 2 || len(st.Timeline.Envelopes) != 0 || st.Timeline.Total() != 2 {
		t.Errorf("beyond the last bucket: later %d, %d buckets", st.Timeline.Later, len(st.Timeline.Envelopes))
	}
}
