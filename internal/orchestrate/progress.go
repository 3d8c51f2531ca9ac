package orchestrate

import (
	"sync"
	"time"
)

// Progress is where a run stands: what Config.Progress is called with as
// each step, phase or pair of slices begins, and about once a second
// between. Package progress turns it into a status line.
type Progress struct {
	// Elapsed is the time since Run began. Remaining is what is left by
	// estimate (negative: unknown): for a sweep, the rest of this step and
	// the steps to come, each its warm-up, idle and measured window plus
	// what the steps so far took beyond those (start, warm-up envelopes,
	// drain, shutdown); for a comparison in slices, the budget left.
	Elapsed, Remaining time.Duration
	// AtMost marks Remaining as an upper bound: a comparison ends early on
	// Precision, a FindMax search may take fewer steps.
	AtMost bool
	// Build and Rate are what runs now (Rate RateMax: as fast as
	// possible). Harness says the build is the harness alone (its Cores
	// are orchestrate's own).
	Build   string
	Rate    float64
	Harness bool
	// Phase is the step's phase ("relay start", "warm-up", "idle",
	// "measured window", "drain", "shutdown", …) or the comparison's
	// (PhaseStarting, PhasePairs).
	Phase string

	// A sweep: Step of Steps, 1-based (with FindMax, Steps is the most the
	// search may take).
	Step, Steps int
	// Sending is what blast sent over the last second (SendingKnown:
	// during the measured window); Cores the CPU of Relay (or of the
	// harness) over its last second of sampling (CoresKnown: from blast's
	// start to the drain's end).
	Sending, Cores           float64
	SendingKnown, CoresKnown bool

	// A comparison in slices (Slices set): Baseline is the first build,
	// Build the compared one; Block is the block running and Pair the last
	// pair measured (0 before the first). Change and HalfWidth are the
	// change in CPU per envelope so far and its 95% interval's half-width,
	// in percent, over ChangePairs whole pairs (0: none yet).
	Slices            bool
	Baseline          string
	Block, Pair       int
	Change, HalfWidth float64
	ChangePairs       int
}

// Phases of a comparison in slices in Progress.Phase.
const (
	PhaseStarting = "starting both builds" // a block's Relays start, warm up and idle
	PhasePairs    = "pairs"
)

// stepOverheadGuess is what a step takes beyond its warm-up, idle and
// measured window (Relay's start, the warm-up envelopes, the drain, the
// shutdown) until a step has shown it.
const stepOverheadGuess = 5 * time.Second

// tracker keeps a run's Progress and reports it to Config.Progress. Its
// methods do nothing on a nil tracker (no Config.Progress).
type tracker struct {
	fn    func(Progress)
	start time.Time
	// callMu keeps the calls of fn in order and never overlapping.
	callMu     sync.Mutex
	stop, done chan struct{}

	mu sync.Mutex
	p  Progress
	// begun: a step or a comparison has begun; nothing is reported before.
	begun bool
	// A sweep: a step's fixed phases (Idle + Warmup + Duration), what the
	// steps done took beyond them, and the running step.
	fixed     time.Duration
	overhead  time.Duration
	stepsDone int
	stepStart time.Time
	live      *step
	lastSent  int64
	lastAt    time.Time
	// A comparison in slices: when this rate's began, its budget, and the
	// budgets of the rates still to come.
	rateStart     time.Time
	budget, later time.Duration
}

func newTracker(cfg Config, start time.Time) *tracker {
	if cfg.Progress == nil {
		return nil
	}
	return &tracker{fn: cfg.Progress, start: start, fixed: cfg.Idle + cfg.Warmup + cfg.Duration,
		p: Progress{Remaining: -1}}
}

// run reports about once a second until the returned stop, which waits
// for the last call to return: nothing is reported after it.
func (t *tracker) run() (stop func()) {
	if t == nil {
		return func() {}
	}
	t.stop, t.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(t.done)
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tk.C:
				t.emit()
			}
		}
	}()
	return func() {
		close(t.stop)
		<-t.done
	}
}

// emit calls fn with the progress as of now.
func (t *tracker) emit() {
	t.callMu.Lock()
	defer t.callMu.Unlock()
	t.mu.Lock()
	p, begun := t.now(time.Now()), t.begun
	t.mu.Unlock()
	if begun {
		t.fn(p)
	}
}

// now is the progress at now with the clock and the live figures filled
// in (t.mu held).
func (t *tracker) now(now time.Time) Progress {
	p := t.p
	p.Elapsed = now.Sub(t.start)
	switch {
	case p.Slices:
		p.Remaining = max(t.budget-now.Sub(t.rateStart), 0) + t.later
		p.AtMost = true
	case p.Steps > 0:
		step := t.fixed + stepOverheadGuess
		if t.stepsDone > 0 {
			step = t.fixed + t.overhead/time.Duration(t.stepsDone)
		}
		p.Remaining = max(step-now.Sub(t.stepStart), 0) + step*time.Duration(max(p.Steps-p.Step, 0))
	}
	if s := t.live; s != nil {
		if p.Phase == "measured window" {
			sent := s.sent.Load()
			if dt := now.Sub(t.lastAt); dt >= 100*time.Millisecond {
				p.Sending, p.SendingKnown = float64(sent-t.lastSent)/dt.Seconds(), true
				t.lastSent, t.lastAt = sent, now
				t.p.Sending, t.p.SendingKnown = p.Sending, true
			}
		}
		p.Cores, p.CoresKnown = s.watch.cores()
	}
	return p
}

// plan says how many steps the sweep has (atMost: at most that many).
func (t *tracker) plan(steps int, atMost bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.p.Steps, t.p.AtMost = steps, atMost
	t.mu.Unlock()
}

// beginStep reports that s begins.
func (t *tracker) beginStep(s *step) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.live, t.stepStart, t.begun = s, time.Now(), true
	t.p.Step, t.p.Build, t.p.Rate, t.p.Harness, t.p.Phase = s.st.Index, s.build.Name, s.st.Rate, s.harness, ""
	t.p.Sending, t.p.SendingKnown = 0, false
	t.mu.Unlock()
	t.emit()
}

// phase reports that s's phase name begins.
func (t *tracker) phase(s *step, name string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.p.Phase = name
	if name == "measured window" {
		t.lastSent, t.lastAt = s.sent.Load(), time.Now()
	}
	t.p.Sending, t.p.SendingKnown = 0, false
	t.mu.Unlock()
	t.emit()
}

// endStep counts what s took beyond its fixed phases for the steps to come.
func (t *tracker) endStep(s *step) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.overhead += max(time.Since(t.stepStart)-t.fixed, 0)
	t.stepsDone++
	if t.live == s {
		t.live = nil
	}
}

// beginRate says a comparison in slices begins at the next rate with
// budget, and later is the budget of the rates after it.
func (t *tracker) beginRate(budget, later time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.rateStart, t.budget, t.later = time.Now(), budget, later
	t.mu.Unlock()
}

// slices reports a comparison's block and last pair, and the change in CPU
// per envelope over its pairs so far.
func (t *tracker) slices(c *SliceRun, block, pair int, phase string) {
	if t == nil {
		return
	}
	p := Progress{Slices: true, Baseline: c.Baseline, Build: c.Build, Rate: c.Rate, Block: block, Pair: pair, Phase: phase}
	if pair > 0 {
		if ch := c.PairedChanges(); len(ch) > 0 {
			p.Change, p.HalfWidth, p.ChangePairs = ch[0].Pct, ch[0].HalfWidth, ch[0].Pairs
		}
	}
	t.mu.Lock()
	t.p, t.begun = p, true
	t.mu.Unlock()
	t.emit()
}
