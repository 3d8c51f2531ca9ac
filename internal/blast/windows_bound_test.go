package blast

import (
	"testing"
	"time"

	"github.com/relayload/relayload/internal/pool"
)

// Only the most recent latencyWindows windows keep a latency sketch, so a
// run's memory does not grow by a sketch per second forever; counts stay.
func TestWindowLatencySketchesBounded(t *testing.T) {
	r := &runner{latencyWindows: 3}
	rec := &recorder{win: window{latency: NewSketch()}, winIdx: -1}
	for sec := 0; sec < 10; sec++ {
		rec.addWindow(r, sec, &window{sent: 1, ok: 1}, time.Duration(sec+1)*time.Millisecond, true)
	}
	rec.flushWindow(r)
	// A late outcome for a window whose sketch is gone still counts.
	rec.addWindow(r, 2, &window{sent: 1, ok: 1}, time.Millisecond, true)
	if len(r.windows) != 10 {
		t.Fatalf("%d windows, want 10", len(r.windows))
	}
	for i, w := range r.windows {
		wantSent := int64(1)
		if i == 2 {
			wantSent = 2
		}
		if w.sent != wantSent || w.ok != wantSent {
			t.Errorf("window %d: sent %d ok %d, want %d", i, w.sent, w.ok, wantSent)
		}
		if kept := w.latency != nil; kept != (i >= 7) {
			t.Errorf("window %d keeps a sketch: %v, want %v", i, kept, i >= 7)
		}
		if w.latency != nil && w.latency.Count() != 1 {
			t.Errorf("window %d sketch holds %v values", i, w.latency.Count())
		}
	}
	if DefaultLatencyWindows < 600 {
		t.Errorf("DefaultLatencyWindows %d: charts need at least ten minutes", DefaultLatencyWindows)
	}
}

// Merging a window without a sketch gives a window without a sketch, and
// counts still add up.
func TestMergeWindowsWithoutSketch(t *testing.T) {
	mk := func(withSketch bool) *Result {
		shard := 0
		if !withSketch {
			shard = 1
		}
		// Counters that agree with the window (Merge checks them).
		r := &Result{Schema: SchemaVersion, Rate: 1000, Shards: 2, Shard: shard, Scheduled: 2, Sent: 2, OK: 2,
			ByStatus: map[int]int64{200: 2}, ByKind: map[pool.Kind]int64{"error": 2}, OKByKind: map[pool.Kind]int64{"error": 2},
			Latency: NewSketch(), Lag: NewSketch(), Service: NewSketch()}
		for _, s := range []*Sketch{r.Latency, r.Lag, r.Service} {
			s.Add(time.Millisecond)
			s.Add(time.Millisecond)
		}
		w := Window{Second: 0, Sent: 2, OK: 2}
		if withSketch {
			w.Latency = NewSketch()
			w.Latency.Add(time.Millisecond)
			w.Latency.Add(time.Millisecond)
		}
		r.Windows = []Window{w}
		return r
	}
	out, err := Merge(mk(true), mk(false))
	if err != nil {
		t.Fatal(err)
	}
	if out.Windows[0].Sent != 4 || out.Windows[0].Latency != nil {
		t.Errorf("merged window %+v", out.Windows[0])
	}
	out, err = Merge(mk(false), mk(true))
	if err != nil {
		t.Fatal(err)
	}
	if out.Windows[0].Sent != 4 || out.Windows[0].Latency != nil {
		t.Errorf("merged window (other order) %+v", out.Windows[0])
	}
}
