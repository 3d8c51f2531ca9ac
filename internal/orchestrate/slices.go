package orchestrate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/compare"
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
	// Block counts the builds' processes: the slices of one block ran on
	// the same two Relays (1-based; 0 in recordings from before blocks).
	Block int `json:"block,omitempty"`
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
	// Block is how long each block's processes lived (Config.Block);
	// Blocks how many blocks the run started.
	Block  time.Duration `json:"block_ns"`
	Blocks int           `json:"blocks"`
	// Precision is the half-width that may end the run (0: none); with it,
	// the intervals are the two-stage ones a stopping rule needs.
	Precision float64 `json:"precision,omitempty"`
	// Prior is the spread between two processes of one binary that the
	// intervals of the CPU metrics (CPU per envelope, cores, instructions)
	// start from, before the run's own blocks weigh in (Config.Prior); the
	// other metrics have none and rest on the blocks alone.
	Prior compare.Prior `json:"prior"`
	// First names, block by block, the build that took the first slice
	// (and started first): drawn at random for each block.
	First  []string `json:"first,omitempty"`
	Slices []Slice  `json:"slices"`
	// Ended says what ended the comparison: "precision" (the interval on
	// CPU per envelope reached Config.Precision), "budget", "interrupted",
	// or "failed: …".
	Ended string        `json:"ended"`
	Took  time.Duration `json:"took_ns"`
	// Changes are the paired changes of the compared build against the
	// baseline, one per metric, CPU per envelope (the primary) first, with
	// their verdicts (compare.Judge).
	Changes []compare.Change `json:"changes"`
	// Idle is each build's idle cores measured before the last block's
	// first slice.
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

// minBlockPairs is the fewest pairs a budget must still have room for
// before a new block is started.
const minBlockPairs = 4

// compareSlices compares the two builds at rate in slices, block after
// block, each block on fresh processes of both builds.
func (r *runner) compareSlices(ctx context.Context, rep *Report, rate float64, budget time.Duration) *SliceRun {
	cfg := r.cfg
	start := time.Now()
	c := &SliceRun{Rate: rate, Baseline: cfg.Builds[0].Name, Build: cfg.Builds[1].Name, Slice: cfg.Slice, Block: cfg.Block,
		Precision: cfg.Precision, Prior: cfg.prior(), Idle: map[string]float64{}}
	rep.SliceRuns = append(rep.SliceRuns, c)
	defer func() {
		c.Took = time.Since(start)
		c.Changes = c.PairedChanges()
	}()
	// A pair takes two slices: estimated until the first pair is
	// measured, then the last pair's length; a block's start likewise.
	pairTook, startTook := 2*cfg.Slice+time.Second, 30*time.Second
	pair := 0
	// pairs runs pairs on a block's builds until the block's time is up
	// (""), or what ends the comparison.
	pairs := func(bs [2]*sliceBuild, block, first int, blockStart time.Time) string {
		for n := 0; ; n++ {
			switch {
			case ctx.Err() != nil:
				return "interrupted"
			case time.Since(start)+pairTook > budget:
				return "budget"
			case n > 0 && time.Since(blockStart)+pairTook > cfg.Block:
				return ""
			}
			pair++
			t0 := time.Now()
			// ABBA from the block's first build on.
			order := []int{first, 1 - first}
			if n%2 == 1 {
				order = []int{1 - first, first}
			}
			sls, err := r.runPair(bs, order, rate, pair)
			if err != nil {
				return r.sliceEnd(ctx, fmt.Sprintf("failed: %s in pair %d", err, pair))
			}
			for _, i := range order {
				sls[i].Block = block
				c.Slices = append(c.Slices, sls[i])
			}
			r.prog.slices(c, block, pair, PhasePairs)
			pairTook = time.Since(t0)
			if cfg.Precision > 0 {
				if ch := c.PairedChanges(); ch[0].Pairs >= compare.MinPairs && ch[0].HalfWidth <= cfg.Precision*100 {
					return "precision"
				}
			}
		}
	}
	for block := 1; c.Ended == ""; block++ {
		if block > 1 && time.Since(start)+startTook+minBlockPairs*pairTook > budget {
			c.Ended = "budget"
			break
		}
		t0 := time.Now()
		// Which build goes first in a block is drawn at random, so that
		// neither is always first at a block's edges (or in its start).
		first := rand.IntN(2)
		c.First = append(c.First, cfg.Builds[first].Name)
		r.prog.slices(c, block, pair, PhaseStarting)
		bs, stop, err := r.startSliceBlock(ctx, c, rate, block, first)
		if err != nil {
			c.Ended = r.sliceEnd(ctx, "failed: "+err.Error())
		} else {
			startTook, c.Blocks = time.Since(t0), block
			c.Ended = pairs(bs, block, first, t0)
		}
		stop()
	}
	return c
}

// startSliceBlock starts both builds' Relays and upstreams for a block at
// once, each measuring its idle CPU, opens their instruction counters and
// sends each a slice of traffic that is not measured: a Relay's first
// seconds under load cost more than the rest. Build first starts and warms
// first. stop ends them all, also after an error.
func (r *runner) startSliceBlock(ctx context.Context, c *SliceRun, rate float64, block, first int) (bs [2]*sliceBuild, stop func(), err error) {
	var steps [2]*step
	stop = func() {
		for _, b := range bs {
			if b != nil && b.instr != nil {
				b.instr.Close()
			}
		}
		for _, s := range steps {
			if s != nil {
				s.close()
			}
		}
	}
	order := []int{first, 1 - first}
	var errs [2]error
	var wg sync.WaitGroup
	for k, i := range order {
		b := r.cfg.Builds[i]
		st := &Step{Index: 2*block - 1 + k, Build: b.Name, Rate: rate, Round: block}
		steps[i] = newStep(ctx, r, st, b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.logf("comparison at %s, block %d: starting %s", rateLabel(rate), block, b.Name)
			for _, ph := range steps[i].startPhases() {
				if err := ph.run(); err != nil {
					errs[i] = fmt.Errorf("%s during %s's %s", err, b.Name, ph.name)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := firstErr(errs[order[0]], errs[order[1]]); err != nil {
		return bs, stop, err
	}
	for _, i := range order {
		s := steps[i]
		bs[i] = &sliceBuild{s: s, idle: s.st.CPU.IdleCores}
		c.Idle[s.build.Name] = s.st.CPU.IdleCores
		instr, err := perfcount.Open(s.sampler.PIDs())
		if err != nil {
			c.Counters = "CPU time only: " + err.Error()
			continue
		}
		bs[i].instr = instr
	}
	if bs[0].instr == nil || bs[1].instr == nil {
		for _, b := range bs {
			if b.instr != nil {
				b.instr.Close()
				b.instr = nil
			}
		}
	} else if block == 1 {
		c.Counters = "instructions"
	}
	for _, i := range order {
		r.logf("  %s: a slice of traffic, not measured", bs[i].s.build.Name)
		if _, err := r.sliceTraffic(bs[i].s, rate); err != nil {
			return bs, stop, fmt.Errorf("warm-up of %s: %w", bs[i].s.build.Name, err)
		}
	}
	return bs, stop, nil
}

// firstErr is the first of errs that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
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

// PairedChanges are the run's changes of the build against the baseline,
// one per metric, CPU per envelope first, over its whole pairs, with their
// verdicts: the CPU metrics' intervals start from the run's Prior, the
// others' from its blocks alone.
func (c *SliceRun) PairedChanges() []compare.Change {
	type metric struct {
		name  string
		of    func(Slice) float64
		prior compare.Prior
	}
	metrics := []metric{
		{"ms_per_envelope", func(s Slice) float64 { return s.MsPerEnv }, c.Prior},
		{"cores", func(s Slice) float64 { return s.Cores }, c.Prior},
		{"p99_ms", func(s Slice) float64 { return s.P99 }, compare.Prior{}},
		{"peak_rss", func(s Slice) float64 { return float64(s.PeakRSS) }, compare.Prior{}},
		{"forwarded_per_s", func(s Slice) float64 { return s.ForwardedRate }, compare.Prior{}},
	}
	if c.Counters == "instructions" {
		metrics = append(metrics, metric{"instructions_per_envelope", func(s Slice) float64 { return s.InstrPerEnv }, c.Prior})
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
	stage1 := 0
	if c.Precision > 0 {
		stage1 = compare.MinPairs
	}
	out := make([]compare.Change, len(metrics))
	for i, m := range metrics {
		var p compare.Pairs
		for pair := 1; pair <= len(byPair); pair++ {
			if s := byPair[pair]; s[0] != nil && s[1] != nil {
				p.Base, p.Build = append(p.Base, m.of(*s[0])), append(p.Build, m.of(*s[1]))
				p.Blocks = append(p.Blocks, s[0].Block)
			}
		}
		out[i] = compare.Estimate(m.name, p, compare.Options{Prior: m.prior, Stage1: stage1})
	}
	compare.Judge(out)
	return out
}
