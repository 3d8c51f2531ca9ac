package orchestrate

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compare"
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
	prog := recordProgress(&cfg)
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
	// The build drawn first in a block warms first and takes the block's
	// first slice, and the pairs alternate from it.
	warm := regexp.MustCompile(`(?m)^  (\w+): a slice of traffic, not measured$`).FindAllStringSubmatch(log.String(), -1)
	if len(run.First) != run.Blocks || len(warm) < 2*run.Blocks {
		t.Fatalf("first builds %v, warm slices %v over %d blocks", run.First, warm, run.Blocks)
	}
	for b, first := range run.First {
		if warm[2*b][1] != first || warm[2*b+1][1] == first {
			t.Errorf("block %d: warm slices %v, want %s first", b+1, warm[2*b:2*b+2], first)
		}
	}
	checkSlicesProgress(t, prog.calls(t), run, cfg.Budget)
	ok, forwarded := map[string]int64{}, map[string]int64{}
	pairsIn := map[int]int{}
	other := map[string]string{"a": "b", "b": "a"}
	inBlock := 0 // slices so far in this slice's block
	for i, sl := range run.Slices {
		pairsIn[sl.Block]++
		if i > 0 && sl.Block != run.Slices[i-1].Block {
			if sl.Block != run.Slices[i-1].Block+1 || i%2 != 0 {
				t.Errorf("slice %d: block %d after block %d", i, sl.Block, run.Slices[i-1].Block)
			}
			inBlock = 0
		}
		// ABBA within a block from its first build: F S, S F, F S, …
		want := run.First[sl.Block-1]
		if (inBlock%2 == 1) != (inBlock/2%2 == 1) {
			want = other[want]
		}
		inBlock++
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

// TestIntervalGate: a threshold is crossed only when the whole interval is
// beyond it, passed when it is all within, inconclusive when it straddles.
func TestIntervalGate(t *testing.T) {
	run := func(low, pct, high float64) *Report {
		return &Report{SliceRuns: []*SliceRun{{Rate: 300, Build: "b", Changes: []compare.Change{
			changeWithin("ms_per_envelope", 20, low, high),
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
		{6, 8, 10, 1, 0},     // all above +5%
		{-2, 0, 2, 0, 0},     // all within
		{3, 6, 9, 0, 1},      // straddles +5%
		{-1, 2, 4.999, 0, 0}, // just within
		{-12, -9, -6, 0, 0},  // faster
	} {
		g, err := IntervalGate(run(tc.low, tc.pct, tc.high), ths)
		if err != nil || len(g.Breaches) != tc.breaches || len(g.Inconclusive) != tc.inconclusive || g.Compared != 1 {
			t.Errorf("%+v: %+v %v", tc, g, err)
		}
	}
	shrink, _ := ParseThresholds("forwarded_rate<-5%")
	rep := &Report{SliceRuns: []*SliceRun{{Changes: []compare.Change{changeWithin("forwarded_per_s", 12, -9, -6)}}}}
	if g, _ := IntervalGate(rep, shrink); len(g.Breaches) != 1 {
		t.Errorf("forwarded/s down 6–9%% with a −5%% threshold: %+v", g)
	}
	// Nothing unmeasured passes: a failed comparison fails the gate; too
	// few pairs, a metric not measured, or no comparison at all is
	// inconclusive with the reason.
	cpu, _ := ParseThresholds("cpu_ms_per_envelope>+5%,instructions_per_envelope>+5%")
	for _, tc := range []struct {
		name   string
		rep    *Report
		failed int
		why    []string
	}{
		{"failed", &Report{SliceRuns: []*SliceRun{{Build: "broken", Baseline: "main", Rate: 300, Ended: "failed: exit status 1 during broken's relay start"}}}, 1, nil},
		{"nothing ran", &Report{}, 0, []string{"no comparison ran", "no comparison ran"}},
		{"too few pairs, no counters", &Report{SliceRuns: []*SliceRun{{Build: "b", Rate: 300, Ended: "budget", Counters: "CPU time only: no PMU",
			Changes: []compare.Change{changeWithin("ms_per_envelope", 6, 40, 120)}}}}, 0,
			[]string{"6 pairs measured, fewer than the 10", "not measured: CPU time only: no PMU"}},
	} {
		g, err := IntervalGate(tc.rep, cpu)
		if err != nil || len(g.Failed) != tc.failed || len(g.Inconclusive) != len(tc.why) || len(g.Breaches) != 0 {
			t.Errorf("%s: %+v %v", tc.name, g, err)
			continue
		}
		for i, why := range tc.why {
			if !strings.Contains(g.Inconclusive[i].String(), why) {
				t.Errorf("%s: %q lacks %q", tc.name, g.Inconclusive[i], why)
			}
		}
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
	if c := run.Changes[0]; c.Verdict != compare.VerdictTooFewPairs {
		t.Errorf("verdict %q", c.Verdict)
	}
	if len(processesMentioning(bin)) != 0 {
		t.Errorf("a Relay outlived the run: %v", processesMentioning(bin))
	}
}

// changeWithin is a change over pairs whose 95% interval (on many
// degrees of freedom) runs from low to high percent.
func changeWithin(metric string, pairs int, low, high float64) compare.Change {
	l, h := math.Log1p(low/100), math.Log1p(high/100)
	c := compare.Change{Metric: metric, Pairs: pairs, MeanLog: (l + h) / 2, SELog: (h - l) / 2 / 1.959963984540054, DF: 1e6}
	c.Low, c.High, _ = c.Interval(compare.Level)
	c.Pct = 100 * math.Expm1(c.MeanLog)
	return c
}
