package orchestrate

import (
	"context"
	"testing"

	"github.com/relayload/relayload/internal/testutil"
)

// TestHarnessMemoryFlat runs the same harness step three times. The live
// heap after them must be what it was before the first (nothing of a step
// stays alive), and a step's peak RSS must not include what earlier steps
// left: it grew by ~60 MB a step at 1000/s, because the fake upstream's
// body buffers piled up in its pool and because the garbage of earlier
// steps was still resident when the peak-RSS mark was reset.
func TestHarnessMemoryFlat(t *testing.T) {
	cfg := quick(400)
	cfg.Rounds = 3
	cfg.Idle = 0
	cfg.PoolSize = 2000 // a long-lived heap like a real run's makes collections rare
	cfg.WorkDir = t.TempDir()
	var log struct{ first, done uint64 }
	// The live heap is read before the first step and after the last
	// only: a collection between steps would hide garbage that earlier
	// steps leave resident, and one collection leaves what a step put in
	// sync.Pools (now in their victim caches) counted.
	cfg.onStep = func(st *Step, done bool) {
		switch {
		case st.Index == 1 && !done:
			log.first = testutil.LiveHeap()
		case st.Index == 3 && done:
			log.done = testutil.LiveHeap()
		}
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Steps) != 3 || rep.Failed != 0 || log.first == 0 || log.done == 0 {
		t.Fatalf("steps %d, failed %d, live heap read before %d, after %d", len(rep.Steps), rep.Failed, log.first, log.done)
	}
	mb := func(x uint64) float64 { return float64(x) / (1 << 20) }
	t.Logf("live heap %.1f MB before the first step, %.1f MB after the last", mb(log.first), mb(log.done))
	if log.done > log.first+2<<20 {
		t.Errorf("live heap grew from %.1f to %.1f MB over 3 steps: per-step state or pooled buffers kept alive", mb(log.first), mb(log.done))
	}
	// A stall can lift one step's peak (more requests in flight); growth
	// at every step is what earlier steps' leftovers look like.
	peaks := make([]uint64, len(rep.Steps))
	grows := true
	for i, st := range rep.Steps {
		peaks[i] = st.Memory.PeakRSS
		t.Logf("step %d: peak RSS %.1f MB", st.Index, mb(peaks[i]))
		if i > 0 && peaks[i] < peaks[i-1]+1<<19 {
			grows = false
		}
	}
	if raceEnabled {
		return // the race detector's shadow memory grows with the run and stays resident
	}
	if grows && peaks[2] > peaks[0]+4<<20 {
		t.Errorf("peak RSS grows step after step: %.1f, %.1f, %.1f MB", mb(peaks[0]), mb(peaks[1]), mb(peaks[2]))
	}
}
