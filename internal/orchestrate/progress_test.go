package orchestrate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// progressCall is one call of Config.Progress and when it came.
type progressCall struct {
	at time.Time
	p  Progress
}

// progressRecorder records Config.Progress's calls and whether two ever
// overlapped or one came after Run returned (after done).
type progressRecorder struct {
	mu      sync.Mutex
	got     []progressCall
	inside  atomic.Int32
	overlap atomic.Bool
	done    atomic.Bool
	late    atomic.Int32
}

// recordProgress sets cfg.Progress to record its calls.
func recordProgress(cfg *Config) *progressRecorder {
	rec := &progressRecorder{}
	cfg.Progress = func(p Progress) {
		if rec.inside.Add(1) > 1 {
			rec.overlap.Store(true)
		}
		defer rec.inside.Add(-1)
		if rec.done.Load() {
			rec.late.Add(1)
		}
		rec.mu.Lock()
		rec.got = append(rec.got, progressCall{time.Now(), p})
		rec.mu.Unlock()
	}
	return rec
}

// calls marks Run as returned and returns the calls so far.
func (rec *progressRecorder) calls(t *testing.T) []progressCall {
	t.Helper()
	rec.done.Store(true)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) == 0 {
		t.Fatal("Config.Progress was never called")
	}
	if rec.overlap.Load() {
		t.Error("two calls of Config.Progress overlapped")
	}
	return append([]progressCall(nil), rec.got...)
}

// TestStandinProgress runs a sweep of the stand-in relay at two rates with
// Config.Progress set: its calls say step 1 then step 2 of 2, the phases in
// order, what blast sends and Relay's cores during the measured window, an
// elapsed time that grows with the clock, and a time left that estimates
// the rest: at step 2's start, what step 1 took. None comes after Run.
func TestStandinProgress(t *testing.T) {
	bin := standin(t)
	cfg := quick(50, 100)
	// A measured window of a few seconds holds a report or two (one a
	// second) even on a loaded machine.
	cfg.Duration = 3 * time.Second
	cfg.Builds = []Build{{Name: "standin", Bin: bin}}
	fastShutdown(&cfg)
	cfg.WorkDir = t.TempDir()
	rec := recordProgress(&cfg)
	var stepTook [3]time.Duration // by index, as onStep sees them (around the tracker's)
	var stepStart time.Time
	cfg.onStep = func(st *Step, done bool) {
		if !done {
			stepStart = time.Now()
		} else {
			stepTook[st.Index] = time.Since(stepStart)
		}
	}
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	end := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	calls := rec.calls(t)
	if rep.Failed != 0 || len(rep.Steps) != 2 {
		t.Fatalf("failed %d of %d steps", rep.Failed, len(rep.Steps))
	}
	fixed := cfg.Idle + cfg.Warmup + cfg.Duration
	var last Progress
	var phases [3][]string
	var live [3]bool
	for i, c := range calls {
		p := c.p
		if p.Steps != 2 || p.AtMost || p.Slices || p.Build != "standin" || p.Step < 1 || p.Step > 2 {
			t.Fatalf("call %d: %+v", i, p)
		}
		if p.Rate != cfg.Rates[p.Step-1] {
			t.Errorf("call %d: step %d at %v", i, p.Step, p.Rate)
		}
		// Elapsed is the time since Run began, by the clock.
		if p.Elapsed < 0 || p.Elapsed > c.at.Sub(start) || p.Elapsed < last.Elapsed {
			t.Errorf("call %d: elapsed %v (%v since Run began, %v before)", i, p.Elapsed, c.at.Sub(start), last.Elapsed)
		}
		if p.Remaining < 0 || (p.Step == 1 && p.Remaining < fixed) {
			t.Errorf("call %d (step %d): %v left", i, p.Step, p.Remaining)
		}
		if i > 0 && p.Step < last.Step {
			t.Errorf("call %d: step %d after step %d", i, p.Step, last.Step)
		}
		if p.Step != last.Step {
			// A step's first call, as it begins. From step 2 on the
			// estimate is what the steps so far took.
			if p.Phase != "" {
				t.Errorf("step %d's first call is in phase %q", p.Step, p.Phase)
			}
			if p.Step == 2 && (p.Remaining > stepTook[1] || p.Remaining < fixed) {
				t.Errorf("step 2 begins with %v left; step 1 took %v", p.Remaining, stepTook[1])
			}
		}
		if ph := phases[p.Step]; p.Phase != "" && (len(ph) == 0 || ph[len(ph)-1] != p.Phase) {
			phases[p.Step] = append(ph, p.Phase)
		}
		if p.SendingKnown {
			if p.Phase != "measured window" || p.Sending < 0 || p.Sending > 10*p.Rate {
				t.Errorf("call %d: sending %.1f/s in phase %q at %v", i, p.Sending, p.Phase, p.Rate)
			}
			live[p.Step] = live[p.Step] || p.Sending > 0
		}
		if p.CoresKnown && (p.Cores < 0 || p.Cores > 64) {
			t.Errorf("call %d: %.3f cores", i, p.Cores)
		}
		last = p
	}
	if last.Step != 2 || last.Elapsed > end.Sub(start) {
		t.Errorf("last call: %+v", last)
	}
	want := []string{"work dir", "fake upstream", "relay start", "sampler", "warm-up", "idle", "measured window", "drain", "shutdown"}
	for st := 1; st <= 2; st++ {
		if !equalStrings(phases[st], want) {
			t.Errorf("step %d's phases %q, want %q", st, phases[st], want)
		}
	}
	if !live[1] && !live[2] {
		t.Error("no call said what blast was sending")
	}
	// Nothing is reported after Run returned (the ticker reports once a
	// second).
	time.Sleep(1200 * time.Millisecond)
	if n := rec.late.Load(); n != 0 {
		t.Errorf("%d calls after Run returned", n)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkSlicesProgress checks the calls of a comparison in slices: blocks
// and pairs in order up to the run's, each block announced as it starts,
// the budget's time left shrinking, and the last pair's change in CPU per
// envelope the run's own.
func checkSlicesProgress(t *testing.T, calls []progressCall, run *SliceRun, budget time.Duration) {
	t.Helper()
	var last Progress
	starting := map[int]bool{}
	for i, c := range calls {
		p := c.p
		if !p.Slices || p.Build != run.Build || p.Baseline != run.Baseline || p.Rate != run.Rate || !p.AtMost {
			t.Fatalf("call %d: %+v", i, p)
		}
		if p.Block < last.Block || p.Pair < last.Pair || p.Block < 1 || p.Block > run.Blocks {
			t.Errorf("call %d: block %d pair %d after block %d pair %d (%d blocks)", i, p.Block, p.Pair, last.Block, last.Pair, run.Blocks)
		}
		if p.Remaining < 0 || p.Remaining > budget || (i > 0 && p.Remaining > last.Remaining) {
			t.Errorf("call %d: %v left of %v, %v before", i, p.Remaining, budget, last.Remaining)
		}
		switch p.Phase {
		case PhaseStarting:
			starting[p.Block] = true
		case PhasePairs:
			if p.ChangePairs > p.Pair || (p.Pair > 1 && p.ChangePairs < 1) {
				t.Errorf("call %d: pair %d, a change over %d pairs", i, p.Pair, p.ChangePairs)
			}
		default:
			t.Errorf("call %d: phase %q", i, p.Phase)
		}
		last = p
	}
	if len(starting) != run.Blocks {
		t.Errorf("blocks announced %v, want %d", starting, run.Blocks)
	}
	if last.Pair != run.Pairs() || last.Change != run.Changes[0].Pct || last.HalfWidth != run.Changes[0].HalfWidth {
		t.Errorf("last call: pair %d, change %+.2f%% ±%.2f%%; the run: %d pairs, %+.2f%% ±%.2f%%",
			last.Pair, last.Change, last.HalfWidth, run.Pairs(), run.Changes[0].Pct, run.Changes[0].HalfWidth)
	}
}
