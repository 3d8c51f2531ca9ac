package orchestrate

import (
	"context"
	"fmt"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/internal/perfcount"
)

// A comparison in slices (Config.Slices) starts each build's Relay and fake
// upstream once per rate, warms both and measures each one's idle CPU,
// then sends the traffic to one build at a time in short slices, in pairs
// whose order alternates (ABBA), so that the machine's drift falls on both
// builds alike and each pair's ratio cancels it. The slices of a pair run
// back to back, without waiting for either Relay to catch up: each build is
// measured from its Relay's process over the whole pair (see runPair), so
// a pair spans a few seconds and a budget holds many of them. Pairs are
// added until the change in CPU per envelope is known to within
// Config.Precision, or Config.Budget is spent.

// Slice is one build driven for one slice of a comparison.
type Slice struct {
	Build string `json:"build"`
	Pair  int    `json:"pair"` // 1-based
	// Sent and OK are blast's requests sent and accepted (2xx) in the
	// slice; Forwarded the data envelopes the build's upstream received
	// over the pair.
	Sent      int64 `json:"sent"`
	OK        int64 `json:"ok"`
	Forwarded int64 `json:"forwarded"`
	// Elapsed is the pair: this slice and the other build's.
	Elapsed time.Duration `json:"elapsed_ns"`
	// CPUSecs is Relay's CPU over Elapsed; IdleCores the idle CPU taken off
	// it (measured before the first slice).
	CPUSecs   float64 `json:"cpu_s"`
	IdleCores float64 `json:"idle_cores"`
	// The slice's figures, each a metric of the comparison; Cores is over
	// the slice alone (blast's sending), net of idle.
	MsPerEnv      float64 `json:"ms_per_envelope"`
	Cores         float64 `json:"cores"`
	P99           float64 `json:"p99_ms"`
	PeakRSS       uint64  `json:"peak_rss_bytes"`
	ForwardedRate float64 `json:"forwarded_per_s"`
	// InstrPerEnv is Relay's user-space instructions retired per envelope
	// forwarded, over the same span as CPUSecs (0: no counter).
	InstrPerEnv float64 `json:"instructions_per_envelope,omitempty"`
}

// SliceRun is two builds compared in slices at one rate.
type SliceRun struct {
	Rate     float64       `json:"rate"`
	Baseline string        `json:"baseline"`
	Build    string        `json:"build"`
	Slice    time.Duration `json:"slice_ns"`
	// Precision is the half-width that may end the run (0: none); with it,
	// the intervals are the two-stage ones a stopping rule needs.
	Precision float64 `json:"precision,omitempty"`
	// ProcessNoise is what the intervals of CPU per envelope, cores and
	// instructions add for the two builds' processes (Config.ProcessNoise).
	ProcessNoise float64 `json:"process_noise"`
	Slices       []Slice `json:"slices"`
	// Ended says what ended the comparison: "precision" (the interval on
	// CPU per envelope reached Config.Precision), "budget", "interrupted",
	// or "failed: …".
	Ended string        `json:"ended"`
	Took  time.Duration `json:"took_ns"`
	// Changes are the paired changes of the compared build against the
	// baseline, one per metric, CPU per envelope first.
	Changes []Change `json:"changes"`
	// Idle is each build's idle cores measured before the first slice.
	Idle map[string]float64 `json:"idle_cores"`
	// Counters says whether the slices count retired instructions
	// ("instructions") or why not (CPU time only).
	Counters string `json:"counters"`
}

// Pairs is how many whole pairs (a slice of each build) the run holds.
func (c *SliceRun) Pairs() int {
	n := map[int]int{}
	for _, s := range c.Slices {
		n[s.Pair]++
	}
	whole := 0
	for _, k := range n {
		if k == 2 {
			whole++
		}
	}
	return whole
}

// sliceBuild is one build's long-lived Relay and upstream in a comparison.
type sliceBuild struct {
	s     *step
	idle  float64            // its Relay's idle cores, measured last
	instr *perfcount.Counter // nil: no counter
}

// compareSlices compares the two builds at rate in slices.
func (r *runner) compareSlices(ctx context.Context, rep *Report, rate float64, budget time.Duration) *SliceRun {
	cfg := r.cfg
	start := time.Now()
	c := &SliceRun{Rate: rate, Baseline: cfg.Builds[0].Name, Build: cfg.Builds[1].Name, Slice: cfg.Slice, Precision: cfg.Precision,
		ProcessNoise: cfg.ProcessNoise, Idle: map[string]float64{}}
	rep.SliceRuns = append(rep.SliceRuns, c)
	defer func() {
		c.Took = time.Since(start)
		c.Changes = c.pairedChanges()
	}()
	var bs [2]*sliceBuild
	for i, b := range cfg.Builds[:2] {
		st := &Step{Index: i + 1, Build: b.Name, Rate: rate}
		s := newStep(ctx, r, st, b)
		defer s.close()
		r.logf("comparison at %s: starting %s", rateLabel(rate), b.Name)
		for _, ph := range s.startPhases() {
			if err := ph.run(); err != nil {
				c.Ended = r.sliceEnd(ctx, fmt.Sprintf("failed: %s during %s's %s", err, b.Name, ph.name))
				return c
			}
		}
		bs[i] = &sliceBuild{s: s, idle: st.CPU.IdleCores}
		c.Idle[b.Name] = st.CPU.IdleCores
		instr, err := perfcount.Open(s.sampler.PIDs())
		if err != nil {
			c.Counters = "CPU time only: " + err.Error()
			continue
		}
		defer instr.Close()
		bs[i].instr = instr
	}
	if bs[0].instr == nil || bs[1].instr == nil {
		bs[0].instr, bs[1].instr = nil, nil
	} else {
		c.Counters = "instructions"
	}
	// One slice of traffic to each build first, not measured: a Relay's
	// first seconds under load cost more than the rest.
	for _, b := range bs {
		r.logf("  %s: a slice of traffic, not measured", b.s.build.Name)
		if _, err := r.sliceTraffic(b.s, rate); err != nil {
			c.Ended = r.sliceEnd(ctx, fmt.Sprintf("failed: warm-up of %s: %v", b.s.build.Name, err))
			return c
		}
	}
	// A pair takes two slices and their catch-ups: estimated until the
	// first pair is measured, then the last pair's length.
	pairTook := 2*cfg.Slice + time.Second
	for pair := 1; ; pair++ {
		if err := ctx.Err(); err != nil {
			c.Ended = "interrupted"
			return c
		}
		if time.Since(start)+pairTook > budget {
			c.Ended = "budget"
			return c
		}
		t0 := time.Now()
		order := []int{0, 1}
		if pair%2 == 0 {
			order = []int{1, 0}
		}
		sls, err := r.runPair(bs, order, rate, pair)
		if err != nil {
			c.Ended = r.sliceEnd(ctx, fmt.Sprintf("failed: %s in pair %d", err, pair))
			return c
		}
		c.Slices = append(c.Slices, sls[order[0]], sls[order[1]])
		pairTook = time.Since(t0)
		if cfg.Precision > 0 {
			if ch := c.pairedChanges(); ch[0].Pairs >= MinPairs && ch[0].HalfWidth <= cfg.Precision*100 {
				c.Ended = "precision"
				return c
			}
		}
	}
}

// sliceEnd is why a comparison ended after err: an interrupt, or err.
func (r *runner) sliceEnd(ctx context.Context, failed string) string {
	if ctx.Err() != nil {
		return "interrupted"
	}
	r.logf("  %s", failed)
	return failed
}

// runPair drives the two builds one slice each, in order, back to back,
// and measures each build over the whole pair: its own slice, its catch-up
// during the other's slice and its idle. Work that spills past the pair's
// end is counted in the next pair, whose order alternates, so nothing is
// lost and neither build gains; a pair spans one short stretch of time, so
// the machine's state changes little between the two builds.
func (r *runner) runPair(bs [2]*sliceBuild, order []int, rate float64, pair int) ([2]Slice, error) {
	var sl [2]Slice
	var at [3][2]relayproc.Sample
	var fwd [3][2]int64
	var instr [3][2]uint64
	read := func(k int) error {
		for i, b := range bs {
			if err := b.s.check(); err != nil {
				return err
			}
			if b.instr != nil {
				instr[k][i], _ = b.instr.Read()
			}
			smp, err := b.s.sampler.Read()
			if err != nil {
				return fmt.Errorf("reading Relay's CPU: %w", err)
			}
			at[k][i], fwd[k][i] = smp, b.s.up.DataEnvelopes()
		}
		return nil
	}
	if err := read(0); err != nil {
		return sl, err
	}
	for k, i := range order {
		s := bs[i].s
		sl[i] = Slice{Build: s.build.Name, Pair: pair}
		if err := s.sampler.ResetPeakRSS(); err != nil {
			r.note("a slice's peak RSS covers the whole comparison: " + err.Error())
		}
		res, err := r.sliceTraffic(s, rate)
		if err != nil {
			return sl, fmt.Errorf("blast (%s): %w", s.build.Name, err)
		}
		if err := read(k + 1); err != nil {
			return sl, err
		}
		sl[i].Sent, sl[i].OK = res.Sent, res.OK
		sl[i].Cores = relayproc.Cores(at[k][i], at[k+1][i]) - bs[i].idle
		if res.Latency.Count() > 0 {
			sl[i].P99 = res.Latency.QuantileMillis(0.99)
		}
		if peak, err := s.sampler.PeakRSS(); err == nil {
			sl[i].PeakRSS = peak
		}
	}
	for _, i := range order {
		x, b := &sl[i], bs[i]
		x.Elapsed = time.Duration(at[2][i].At - at[0][i].At)
		x.CPUSecs = at[2][i].CPU - at[0][i].CPU
		x.IdleCores = b.idle
		x.Forwarded = fwd[2][i] - fwd[0][i]
		if x.Forwarded > 0 {
			x.MsPerEnv = (x.CPUSecs - b.idle*x.Elapsed.Seconds()) * 1000 / float64(x.Forwarded)
		}
		x.ForwardedRate = float64(x.Forwarded) / r.cfg.Slice.Seconds()
		x.InstrPerEnv = perfcount.PerEnvelope(instr[0][i], instr[2][i], x.Forwarded)
		r.logf("  pair %d, %s: %.3f ms/envelope, %.3f cores, forwarded %d of %d sent, p99 %.1f ms",
			pair, x.Build, x.MsPerEnv, x.Cores, x.Forwarded, x.Sent, x.P99)
	}
	return sl, nil
}

// sliceTraffic sends one slice of traffic at rate to s's Relay.
func (r *runner) sliceTraffic(s *step, rate float64) (*blast.Result, error) {
	return blast.Run(s.ctx, blast.Config{
		Target: s.target, Pool: r.pool, Rate: rate, Duration: r.cfg.Slice,
		MaxInflight: r.cfg.MaxInflight, Timeout: r.cfg.Timeout, Grace: blastGrace,
	})
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// pairedChanges are the run's changes of the build against the baseline,
// one per metric (CPU per envelope first), over its whole pairs.
func (c *SliceRun) pairedChanges() []Change {
	// The CPU metrics carry the processes' own difference; peak RSS's is
	// larger and unknown, and its verdict says so instead.
	type metric struct {
		name    string
		of      func(Slice) float64
		process float64
	}
	metrics := []metric{
		{"ms_per_envelope", func(s Slice) float64 { return s.MsPerEnv }, c.ProcessNoise},
		{"cores", func(s Slice) float64 { return s.Cores }, c.ProcessNoise},
		{"p99_ms", func(s Slice) float64 { return s.P99 }, 0},
		{"peak_rss", func(s Slice) float64 { return float64(s.PeakRSS) }, 0},
		{"forwarded_per_s", func(s Slice) float64 { return s.ForwardedRate }, 0},
	}
	if c.Counters == "instructions" {
		metrics = append(metrics, metric{"instructions_per_envelope", func(s Slice) float64 { return s.InstrPerEnv }, c.ProcessNoise})
	}
	byPair := map[int][2]*Slice{}
	for i := range c.Slices {
		s := &c.Slices[i]
		p := byPair[s.Pair]
		if s.Build == c.Baseline {
			p[0] = s
		} else {
			p[1] = s
		}
		byPair[s.Pair] = p
	}
	out := make([]Change, len(metrics))
	for i, m := range metrics {
		var base, build []float64
		for pair := 1; pair <= len(byPair); pair++ {
			if p := byPair[pair]; p[0] != nil && p[1] != nil {
				base, build = append(base, m.of(*p[0])), append(build, m.of(*p[1]))
			}
		}
		n0 := 0
		if c.Precision > 0 {
			n0 = MinPairs
		}
		out[i] = pairedChangeFrom(m.name, base, build, n0, m.process)
		if m.name == "peak_rss" && (out[i].Verdict == VerdictLower || out[i].Verdict == VerdictHigher) {
			// Each build has one Relay process for the whole run, so
			// pairing cannot tell the build's memory from the process's
			// (the A/A runs in docs/measurements.md show it).
			out[i].Verdict += " (one process per build: may be the process, not the build)"
		}
	}
	return out
}
