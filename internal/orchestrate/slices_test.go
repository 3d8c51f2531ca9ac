package orchestrate

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
)

// TestStandinSlices compares two copies of the stand-in relay in slices:
// both Relays start afresh for each block, the traffic alternates ABBA
// across the blocks, every slice's envelopes reach its own upstream, and
// the budget ends the run with every metric's paired change stated.
func TestStandinSlices(t *testing.T) {
	bin := standin(t)
	copyBin := filepath.Join(t.TempDir(), "standin-copy")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyBin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := quick(100)
	cfg.Builds = []Build{{Name: "a", Bin: bin}, {Name: "b", Bin: copyBin}}
	cfg.Slices, cfg.Slice, cfg.Block, cfg.Budget = true, time.Second, 10*time.Second, 30*time.Second
	// The stand-in idles on a few clock ticks: over quick()'s 200 ms one
	// tick on a loaded machine reads as a twentieth of a core, more than
	// its cost per pair, so each block measures idle for a whole second.
	cfg.Idle = time.Second
	fastShutdown(&cfg)
	cfg.WorkDir = t.TempDir()
	log := &stampedLog{}
	cfg.Log = log
	stalls := testutil.StartStalls()
	rep, err := Run(context.Background(), cfg)
	lost := stalls.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Steps) != 0 || len(rep.SliceRuns) != 1 {
		t.Fatalf("steps %d, slice runs %d", len(rep.Steps), len(rep.SliceRuns))
	}
	run := rep.SliceRuns[0]
	if run.Ended != "budget" || run.Pairs() < 1 || run.Blocks < 1 || run.Took > 60*time.Second+lost {
		t.Fatalf("ended %q after %d pairs in %d blocks in %s (%s lost to the machine)", run.Ended, run.Pairs(), run.Blocks, run.Took, lost)
	}
	// How many pairs and blocks fit the budget depends on how long the
	// machine took for them: the budget ended the run only when the time
	// taken and what another block needs (its start and minBlockPairs
	// pairs, at the longest seen) passed it. On a quiet machine that takes
	// a second block and several pairs.
	start, pair := log.longest(run)
	if need := run.Took + start + minBlockPairs*pair + time.Second; need < cfg.Budget {
		t.Fatalf("ended %q after %d pairs in %d blocks in %s, with room for another block (starts took up to %s, pairs %s)",
			run.Ended, run.Pairs(), run.Blocks, run.Took, start, pair)
	}
	t.Logf("%d pairs in %d blocks in %s; block starts took up to %s, pairs up to %s", run.Pairs(), run.Blocks, run.Took, start, pair)
	// Which build warms (and starts) first alternates from block to block.
	warm := regexp.MustCompile(`(?m)^  (\w+): a slice of traffic, not measured$`).FindAllStringSubmatch(log.String(), -1)
	wantWarm := []string{"a", "b", "b", "a"}[:min(run.Blocks, 2)*2]
	if len(warm) < len(wantWarm) {
		t.Errorf("warm slices %v, want %v", warm, wantWarm)
	}
	for i, w := range wantWarm {
		if i < len(warm) && warm[i][1] != w {
			t.Errorf("warm slices %v, want %v", warm, wantWarm)
			break
		}
	}
	ok, forwarded := map[string]int64{}, map[string]int64{}
	pairsIn := map[int]int{}
	for i, sl := range run.Slices {
		pairsIn[sl.Block]++
		if i > 0 && sl.Block != run.Slices[i-1].Block && (sl.Block != run.Slices[i-1].Block+1 || i%2 != 0) {
			t.Errorf("slice %d: block %d after block %d", i, sl.Block, run.Slices[i-1].Block)
		}
		// ABBA: pair 1 a then b, pair 2 b then a, …
		want := "a"
		if (i%2 == 1) != (sl.Pair%2 == 0) {
			want = "b"
		}
		if sl.Build != want || sl.Pair != i/2+1 {
			t.Errorf("slice %d: build %s pair %d, want %s pair %d", i, sl.Build, sl.Pair, want, i/2+1)
		}
		if sl.Sent != 100 || sl.OK != sl.Sent {
			t.Errorf("slice %d: sent %d ok %d", i, sl.Sent, sl.OK)
		}
		ok[sl.Build] += sl.OK
		forwarded[sl.Build] += sl.Forwarded
		// A pair spans both slices: a build is measured over the other's too.
		if sl.Elapsed < 2*cfg.Slice*9/10 {
			t.Errorf("slice %d: measured over %s, want at least the pair's two slices", i, sl.Elapsed)
		}
		if sl.MsPerEnv <= 0 || sl.CPUSecs <= 0 || sl.PeakRSS == 0 || math.Abs(sl.ForwardedRate-100) > 10 {
			t.Errorf("slice %d: %+v", i, sl)
		}
		// Cores are over the slice alone, CPUSecs over the whole pair: the
		// one cannot exceed the other.
		if sl.IdleCores < 0 || sl.Cores*cfg.Slice.Seconds() > sl.CPUSecs*1.1+0.01 {
			t.Errorf("slice %d: idle %.4f, cores %.4f from %.3f s of CPU over %s", i, sl.IdleCores, sl.Cores, sl.CPUSecs, sl.Elapsed)
		}
	}
	// Each block's processes ran pairs of their own.
	for blk := 1; blk <= run.Blocks; blk++ {
		if pairsIn[blk] < 2 {
			t.Errorf("block %d: %d slices, want a pair at least", blk, pairsIn[blk])
		}
	}
	if run.Slices[0].Block != 1 || len(pairsIn) != run.Blocks {
		t.Errorf("blocks %v, want 1..%d", pairsIn, run.Blocks)
	}
	// Forwards that land after their pair count in the next one: each
	// block's unmeasured first slice's may come in, its last pair's may be
	// missing.
	for b, n := range ok {
		if slack := int64(100 * run.Blocks); forwarded[b] > n+slack || forwarded[b] < n-slack {
			t.Errorf("%s: forwarded %d of %d accepted", b, forwarded[b], n)
		}
	}
	// Instructions are counted where the machine has a PMU; elsewhere the
	// run says why not and pairs CPU time alone.
	wantChanges := 6
	if run.Counters != "instructions" {
		wantChanges = 5
		if !strings.HasPrefix(run.Counters, "CPU time only: ") {
			t.Errorf("counters %q", run.Counters)
		}
	}
	if len(run.Changes) != wantChanges || run.Changes[0].Metric != "ms_per_envelope" {
		t.Fatalf("changes %+v", run.Changes)
	}
	for _, c := range run.Changes {
		if c.Pairs != run.Pairs() || c.Low > c.Pct || c.High < c.Pct || c.Verdict == "" {
			t.Errorf("change %+v over %d pairs", c, run.Pairs())
		}
	}
	if len(processesMentioning(copyBin)) != 0 {
		t.Errorf("a Relay outlived the run: %v", processesMentioning(copyBin))
	}
}

// stampedLog is a progress log that keeps when each line was written.
type stampedLog struct {
	mu    sync.Mutex
	lines []string
	at    []time.Time
}

func (l *stampedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	l.at = append(l.at, time.Now())
	return len(p), nil
}

func (l *stampedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "")
}

// longest is how long a comparison's blocks took to start, from the
// block's first line to the start of its first pair, and its pairs took,
// at the longest. A pair's lines are written at its end, and its slices'
// Elapsed is the pair.
func (l *stampedLog) longest(run *SliceRun) (start, pair time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	blockLine := regexp.MustCompile(`^comparison at .*, block (\d+): starting`)
	pairLine := regexp.MustCompile(`^  pair (\d+), `)
	began := map[int]time.Time{}
	for i, line := range l.lines {
		if m := blockLine.FindStringSubmatch(line); m != nil {
			b, _ := strconv.Atoi(m[1])
			if _, ok := began[b]; !ok {
				began[b] = l.at[i]
			}
		}
		m := pairLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if k := 2 * (n - 1); k < len(run.Slices) {
			sl := run.Slices[k]
			pair = max(pair, sl.Elapsed)
			if t0, ok := began[sl.Block]; ok {
				start = max(start, l.at[i].Add(-sl.Elapsed).Sub(t0))
				delete(began, sl.Block) // only the block's first pair
			}
		}
	}
	return start, pair
}

func TestSlicesConfig(t *testing.T) {
	two := []Build{{Name: "a", Bin: "/x"}, {Name: "b", Bin: "/y"}}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"one build", func(c *Config) { c.Builds = two[:1] }, "Slices: compares two builds"},
		{"rounds", func(c *Config) { c.Rounds = 3 }, "does not go with FindMax, Rounds or Fault"},
		{"max", func(c *Config) { c.Rates = []float64{RateMax} }, "max is not one"},
		{"short slice", func(c *Config) { c.Slice = time.Millisecond }, "Slice: 1ms: want 1s..10m"},
		{"precision", func(c *Config) { c.Precision = 3 }, "Precision: 3: want a fraction"},
		{"budget", func(c *Config) { c.Budget = 5 * time.Second }, "Budget: 5s: want at least two slices"},
		{"short block", func(c *Config) { c.Block = 20 * time.Second }, "Block: 20s: want at least ten slices (30s)"},
	} {
		cfg := Config{Builds: two, Rates: []float64{100}, Slices: true}
		tc.mod(&cfg)
		if _, err := cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	cfg, err := Config{Builds: two, Rates: []float64{100}, Slices: true}.withDefaults()
	if err != nil || cfg.Slice != DefaultSlice || cfg.Block != DefaultBlock || cfg.Budget != DefaultBudget {
		t.Errorf("defaults: slice %s block %s budget %s, %v", cfg.Slice, cfg.Block, cfg.Budget, err)
	}
}

// TestPairedChange checks the interval against hand-computed cases.
func TestPairedChange(t *testing.T) {
	// Ratios 1.1, 1.1, 1.1: no spread, a 10% change with a zero-width interval.
	c := pairedChange("x", []float64{1, 2, 3}, []float64{1.1, 2.2, 3.3})
	if c.Pairs != 3 || !near(c.Pct, 10, 1e-9) || !near(c.HalfWidth, 0, 1e-9) || c.Verdict != VerdictHigher {
		t.Errorf("constant ratio: %+v", c)
	}
	// Log ratios ±d: mean 0, sd = d·√2 over two pairs, t(0.975, 1) = 12.706.
	d := 0.01
	c = pairedChange("x", []float64{1, 1}, []float64{1 + 0.0, 1 + 0.0})
	if c.Verdict != "no change beyond ±0.0%" {
		t.Errorf("identical: %+v", c)
	}
	c = pairedChange("x", []float64{1, 1}, []float64{expf(d), expf(-d)})
	wantH := 12.706204736 * d * 1.4142135623730951 / 1.4142135623730951
	if !near(c.High, 100*(expf(wantH)-1), 1e-3) || !near(c.Low, 100*(expf(-wantH)-1), 1e-3) || !strings.HasPrefix(c.Verdict, "no change beyond ±") {
		t.Errorf("±1%%: %+v, want high %.4f", c, 100*(expf(wantH)-1))
	}
	// A 5% drop in every pair with 1% noise: lower.
	base := []float64{10, 10, 10, 10, 10, 10}
	build := []float64{9.4, 9.5, 9.6, 9.45, 9.55, 9.5}
	if c := pairedChange("x", base, build); c.Verdict != VerdictLower || c.High >= 0 {
		t.Errorf("5%% drop: %+v", c)
	}
	// The processes' own spread adds to the interval's variance: a constant
	// 1% ratio over 100 pairs is a change alone, within ±1.96·1.4% once
	// the processes may differ by 1.4%.
	b100, c100 := make([]float64, 100), make([]float64, 100)
	for i := range b100 {
		b100[i], c100[i] = 1, 1.01
	}
	c = pairedChangeFrom("x", b100, c100, nil, 0, 0.014)
	wantH = 1.9842169515 * 0.014
	if !strings.HasPrefix(c.Verdict, "no change beyond ±") || !near(c.High, 100*(1.01*expf(wantH)-1), 1e-3) {
		t.Errorf("process noise: %+v, want high %.4f", c, 100*(1.01*expf(wantH)-1))
	}
	// Four blocks of 25 pairs: each block's processes are a fresh draw, so
	// the processes' variance is shared out as Σ(¼)² = ¼ of it.
	blocks := make([]int, 100)
	for i := range blocks {
		blocks[i] = i / 25
	}
	c = pairedChangeFrom("x", b100, c100, blocks, 0, 0.014)
	if wantH = 1.9842169515 * 0.014 / 2; !near(c.High, 100*(1.01*expf(wantH)-1), 1e-3) {
		t.Errorf("four blocks: %+v, want high %.4f", c, 100*(1.01*expf(wantH)-1))
	}
	// Blocks of 90 and 10 pairs: 0.9² + 0.1² = 0.82 of it.
	for i := range blocks {
		blocks[i] = i / 90
	}
	c = pairedChangeFrom("x", b100, c100, blocks, 0, 0.014)
	if wantH = 1.9842169515 * 0.014 * math.Sqrt(0.82); !near(c.High, 100*(1.01*expf(wantH)-1), 1e-3) {
		t.Errorf("uneven blocks: %+v, want high %.4f", c, 100*(1.01*expf(wantH)-1))
	}
	// Fewer than two usable pairs.
	if c := pairedChange("x", []float64{1, 0}, []float64{1, 2}); c.Verdict != VerdictTooFewPairs || c.Pairs != 1 {
		t.Errorf("one pair: %+v", c)
	}
}

// TestBlockSpread: the blocks' own estimate of the processes' spread is
// none when the blocks agree, recovers a known spread from many blocks,
// and needs three blocks.
func TestBlockSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	synth := func(blocks, per int, tau, sigma float64) (base, build []float64, blk []int) {
		for b := range blocks {
			eff := rng.NormFloat64() * tau
			for range per {
				base = append(base, 1)
				build = append(build, math.Exp(eff+rng.NormFloat64()*sigma))
				blk = append(blk, b+1)
			}
		}
		return
	}
	if s := blockSpread(synth(40, 20, 0, 0.1)); s > 0.01 {
		t.Errorf("no process effect: spread %.4f", s)
	}
	if s := blockSpread(synth(200, 20, 0.03, 0.1)); math.Abs(s-0.03) > 0.006 {
		t.Errorf("process effect 3%%: spread %.4f", s)
	}
	base, build, blk := synth(2, 20, 0.5, 0.1)
	if s := blockSpread(base, build, blk); s != 0 {
		t.Errorf("two blocks: spread %.4f, want none", s)
	}
	// Blocks that differ by more than the configured spread widen the
	// interval to what they show; blocks that agree leave it as set.
	base, build, blk = synth(10, 10, 0.08, 0.02)
	own := blockSpread(base, build, blk)
	got := pairedChangeFrom("x", base, build, blk, 0, 0.03)
	want := pairedChangeFrom("x", base, build, blk, 0, own)
	if own < 0.04 || got.HalfWidth != want.HalfWidth {
		t.Errorf("own spread %.4f: half-width %.3f, want %.3f", own, got.HalfWidth, want.HalfWidth)
	}
	// A metric with no spread set (p99, peak RSS) takes what the blocks show.
	if got := pairedChangeFrom("x", base, build, blk, 0, 0); got.HalfWidth != want.HalfWidth {
		t.Errorf("no spread set: half-width %.3f, want %.3f", got.HalfWidth, want.HalfWidth)
	}
	base, build, blk = synth(10, 10, 0, 0.02)
	got = pairedChangeFrom("x", base, build, blk, 0, 0.03)
	want = pairedChangeFrom("x", base, build, nil, 0, 0.03*math.Sqrt(0.1))
	if own := blockSpread(base, build, blk); own >= 0.03 || !near(got.HalfWidth, want.HalfWidth, 1e-9) {
		t.Errorf("agreeing blocks (own spread %.4f): half-width %.4f, want %.4f", own, got.HalfWidth, want.HalfWidth)
	}
}

// TestBlocksFalsePositives: A/A runs whose every block has processes that
// differ by a draw of the known spread (and pairs noisy on their own):
// with the spread shared out over the blocks, the verdict calls a change
// real in at most about 5% of runs, and in far more without the term.
func TestBlocksFalsePositives(t *testing.T) {
	const runs, tau, sigma = 3000, 0.014, 0.1
	rng := rand.New(rand.NewPCG(5, 6))
	for _, k := range []int{1, 3, 5} {
		with, without := 0, 0
		for range runs {
			var base, build []float64
			var blk []int
			for b := range k {
				eff := rng.NormFloat64() * tau
				for range 80 / k {
					base = append(base, 1)
					build = append(build, math.Exp(eff+rng.NormFloat64()*sigma))
					blk = append(blk, b)
				}
			}
			if v := pairedChangeFrom("x", base, build, blk, 0, tau).Verdict; v == VerdictLower || v == VerdictHigher {
				with++
			}
			if v := pairedChangeFrom("x", base, build, blk, 0, 0).Verdict; v == VerdictLower || v == VerdictHigher {
				without++
			}
		}
		fp, fp0 := float64(with)/runs, float64(without)/runs
		// About three standard errors of a 5% rate over 3000 runs.
		if fp > 0.062 || fp0 <= fp {
			t.Errorf("%d blocks: false positives %.3f with the processes' spread, %.3f without", k, fp, fp0)
		}
	}
}

func near(a, b, tol float64) bool { return a-b <= tol && b-a <= tol }

func expf(x float64) float64 { return math.Exp(x) }

// TestIntervalGate: a threshold is crossed only when the whole interval is
// beyond it, passed when it is all within, inconclusive when it straddles.
func TestIntervalGate(t *testing.T) {
	run := func(low, pct, high float64) *Report {
		return &Report{SliceRuns: []*SliceRun{{Rate: 300, Build: "b", Changes: []Change{
			{Metric: "ms_per_envelope", Pairs: 20, Low: low, Pct: pct, High: high},
		}}}}
	}
	ths, err := ParseThresholds("cpu_ms_per_envelope>+5%")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		low, pct, high         float64
		breaches, inconclusive int
	}{
		{6, 8, 10, 1, 0},    // all above +5%
		{-2, 0, 2, 0, 0},    // all within
		{3, 6, 9, 0, 1},     // straddles +5%
		{-1, 2, 5, 0, 0},    // touches it from within
		{-12, -9, -6, 0, 0}, // faster
	} {
		g, err := IntervalGate(run(tc.low, tc.pct, tc.high), ths)
		if err != nil || len(g.Breaches) != tc.breaches || len(g.Inconclusive) != tc.inconclusive || g.Compared != 1 {
			t.Errorf("%+v: %+v %v", tc, g, err)
		}
	}
	shrink, _ := ParseThresholds("forwarded_rate<-5%")
	rep := &Report{SliceRuns: []*SliceRun{{Changes: []Change{{Metric: "forwarded_per_s", Pairs: 9, Low: -9, Pct: -7, High: -6}}}}}
	if g, _ := IntervalGate(rep, shrink); len(g.Breaches) != 1 {
		t.Errorf("forwarded/s down 6–9%% with a −5%% threshold: %+v", g)
	}
	max, _ := ParseThresholds("max>+5%")
	if _, err := IntervalGate(rep, max); err == nil || !strings.Contains(err.Error(), "FailOn") {
		t.Errorf("a metric slices do not pair: %v", err)
	}
}

// TestSlicesRelayFails: a build whose Relay does not start ends the
// comparison as failed, naming the build and the phase, with no verdict
// and no process left behind.
func TestSlicesRelayFails(t *testing.T) {
	bin := standin(t)
	cfg := quick(100)
	cfg.Builds = []Build{{Name: "a", Bin: bin}, {Name: "broken", Bin: "/bin/false"}}
	cfg.Slices, cfg.Slice, cfg.Block, cfg.Budget = true, time.Second, 10*time.Second, 30*time.Second
	fastShutdown(&cfg)
	cfg.WorkDir = t.TempDir()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	run := rep.SliceRuns[0]
	if !strings.HasPrefix(run.Ended, "failed: ") || !strings.Contains(run.Ended, "broken's relay start") || run.Pairs() != 0 {
		t.Errorf("ended %q after %d pairs", run.Ended, run.Pairs())
	}
	if c := run.Changes[0]; c.Verdict != VerdictTooFewPairs {
		t.Errorf("verdict %q", c.Verdict)
	}
	if len(processesMentioning(bin)) != 0 {
		t.Errorf("a Relay outlived the run: %v", processesMentioning(bin))
	}
}
