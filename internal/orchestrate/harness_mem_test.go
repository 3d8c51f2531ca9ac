package orchestrate

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
)

// TestHarnessMemoryFlat runs the same harness step three times. Nothing
// of a step may stay reachable: the live heap after the third step must be
// what it was after the first, within 1 MiB (a leak of half a megabyte a
// step fails it). And a step's peak RSS must not include what earlier
// steps left: it grew step by step when the fake upstream's body buffers
// piled up in its pool (upstream's
// TestBodyBuffersBoundedByInflight holds that) and because the garbage of
// earlier steps was still resident when the peak-RSS mark was reset.
//
// The live heap is read once a step's goroutines have wound down and two
// collections have emptied the sync.Pools: what a step leaves in them and
// what its goroutines hold while they exit grow with the requests in
// flight, so with the load on the machine, and the runtime reclaims them.
// Both readings are after a step, so what any step leaves for a while
// (fasthttp's worker-pool cleaner keeps a closed server for up to 10 s)
// and the one-time state a first step sets up are in both.
func TestHarnessMemoryFlat(t *testing.T) {
	cfg := quick(400)
	cfg.Rounds = 3
	cfg.Idle = 0
	cfg.PoolSize = 2000 // a long-lived heap like a real run's makes collections rare
	cfg.WorkDir = t.TempDir()
	var log struct{ first, third uint64 }
	cfg.onStep = func(st *Step, done bool) {
		switch {
		case st.Index == 1 && done:
			log.first = settledHeap()
		case st.Index == 3 && done:
			log.third = settledHeap()
		}
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Steps) != 3 || rep.Failed != 0 || log.first == 0 || log.third == 0 {
		t.Fatalf("steps %d, failed %d, live heap read after step 1 %d, after step 3 %d", len(rep.Steps), rep.Failed, log.first, log.third)
	}
	mb := func(x uint64) float64 { return float64(x) / (1 << 20) }
	t.Logf("live heap %.2f MB after the first step, %.2f MB after the third", mb(log.first), mb(log.third))
	// Two more steps of 2,700 requests each: a leak of a step's state
	// (its upstream, its counts, a request's buffer) is megabytes.
	if log.third > log.first+1<<20 {
		t.Errorf("live heap grew from %.2f to %.2f MB over two steps: per-step state kept reachable", mb(log.first), mb(log.third))
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

// settledHeap is the live heap once it stops shrinking: read after two
// collections (the second frees what the first moved into the sync.Pools'
// victim caches) every 50 ms until two readings are within 64 KiB, at most
// for 30 s (a step's goroutines exit a scheduling delay after it ends). Two
// readings count only if the 50 ms between them were not overslept: on a
// loaded machine that held the process back, the exiting goroutines did
// not run either, and the heap only looked settled.
func settledHeap() uint64 {
	read := func() uint64 {
		runtime.GC()
		return testutil.LiveHeap()
	}
	last := read()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		slept := time.Now()
		time.Sleep(50 * time.Millisecond)
		ran := time.Since(slept) < 60*time.Millisecond
		now := read()
		if ran && now+64<<10 > last && last+64<<10 > now {
			return min(now, last)
		}
		last = now
	}
	return last
}
