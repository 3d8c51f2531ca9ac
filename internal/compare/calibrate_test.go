package compare

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// processes are the recorded A/A pairs of Relay processes
// (testdata/processes-*.json): each one pair of processes, each of its
// pairs [a, b] the two builds' CPU per envelope.
type processes []struct {
	Run   string       `json:"run"`
	Pairs [][2]float64 `json:"pairs"`
}

func readProcesses(tb testing.TB) processes {
	raw, err := os.ReadFile("testdata/processes-relay-26.4.0-300.json")
	if err != nil {
		tb.Fatal(err)
	}
	var f struct {
		Processes processes `json:"processes"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		tb.Fatal(err)
	}
	if len(f.Processes) < 20 {
		tb.Fatalf("%d pairs of processes recorded, want at least 20", len(f.Processes))
	}
	return f.Processes
}

// heldOut says whether a recorded pair of processes was kept out of the
// choice of DefaultPrior, to validate it on.
func heldOut(run string) bool {
	for _, p := range heldOutRuns {
		if strings.HasPrefix(run, p) {
			return true
		}
	}
	return false
}

// heldOutRuns are the recorded runs the prior never saw: the newest two
// A/A runs in blocks.
var heldOutRuns = []string{"aa-final3/", "aa-final4/"}

// split is the recorded pairs of processes the prior is estimated on and
// those kept out.
func split(ps processes) (train, held processes) {
	for _, p := range ps {
		if heldOut(p.Run) {
			held = append(held, p)
		} else {
			train = append(train, p)
		}
	}
	return train, held
}

// pairsOf are the pairs of the given processes, each its own block.
func pairsOf(ps processes) Pairs {
	var p Pairs
	for i, pr := range ps {
		for _, ab := range pr.Pairs {
			p.Base, p.Build, p.Blocks = append(p.Base, ab[0]), append(p.Build, ab[1]), append(p.Blocks, i)
		}
	}
	return p
}

// tau2 is the method-of-moments variance component between the blocks,
// not truncated at 0.
func tau2(p Pairs) float64 {
	logs, blk := logRatios(p)
	g := groupBlocks(logs, blk)
	k, n := float64(len(g.means)), float64(len(logs))
	var msb, sumN2 float64
	for i, m := range g.means {
		msb += g.ns[i] * (m - g.grand) * (m - g.grand)
		sumN2 += g.ns[i] * g.ns[i]
	}
	msb /= k - 1
	return (msb - g.ssw/g.dfw) / ((n - sumN2/n) / (k - 1))
}

// priorOf is the prior the pairs of processes ps give: the spread between
// them, and as its degrees of freedom 2·τ⁴/Var(τ²) with the variance from
// resampling the processes (a bootstrap), which is what a χ²-distributed
// estimate on that many degrees of freedom would show.
func priorOf(ps processes) Prior {
	t := max(tau2(pairsOf(ps)), 0)
	rng := rand.New(rand.NewPCG(3, 4))
	const draws = 4000
	var sum, sum2 float64
	re := make(processes, len(ps))
	for range draws {
		for i := range re {
			re[i] = ps[rng.IntN(len(ps))]
		}
		x := tau2(pairsOf(re))
		sum, sum2 = sum+x, sum2+x*x
	}
	v := (sum2 - sum*sum/draws) / (draws - 1)
	return Prior{Spread: math.Sqrt(t), DF: 2 * t * t / v}
}

// TestDefaultPrior: DefaultPrior is what the recorded pairs of processes
// it was chosen on give (priorOf), and testdata/priors.json records it for
// its kind of machine.
func TestDefaultPrior(t *testing.T) {
	train, held := split(readProcesses(t))
	if len(held) < 10 {
		t.Fatalf("%d pairs of processes held out, want at least 10", len(held))
	}
	got := priorOf(train)
	t.Logf("prior from %d pairs of processes: spread %.4f on %.2f df (held out: %d)", len(train), got.Spread, got.DF, len(held))
	if math.Abs(got.Spread-DefaultPrior().Spread) > 0.0005 || math.Abs(got.DF-DefaultPrior().DF) > 0.05 {
		t.Errorf("the recordings give %+v, DefaultPrior() is %+v", got, DefaultPrior())
	}
	raw, err := os.ReadFile("testdata/priors.json")
	if err != nil {
		t.Fatal(err)
	}
	var recorded []struct {
		Machine string `json:"machine"`
		Prior   Prior  `json:"prior"`
	}
	if err := json.Unmarshal(raw, &recorded); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recorded {
		found = found || r.Prior == DefaultPrior()
	}
	if !found {
		t.Errorf("testdata/priors.json does not record DefaultPrior() %+v", DefaultPrior())
	}
}

// design is a comparison of k blocks of m pairs.
type design struct{ k, m int }

var designs = []design{{1, 8}, {1, 17}, {3, 8}, {3, 17}, {5, 8}, {5, 17}, {10, 5}, {10, 8}}

// falseCalls is the share of runs of design d, drawn from the pairs of
// processes ps (k different ones, a random stretch of m pairs from each),
// whose CPU-per-envelope verdict calls a change, and the median half-width
// they reached.
func falseCalls(ps processes, d design, prior Prior, runs int, seed uint64) (fp, median float64) {
	var eligible []int
	for i, p := range ps {
		if len(p.Pairs) >= d.m {
			eligible = append(eligible, i)
		}
	}
	// A design that takes every recorded pair of processes draws the same
	// processes in every run: its runs differ by stretches, not by the
	// processes, and say nothing of the spread between them.
	if d.k >= len(eligible) {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(seed, uint64(d.k*100+d.m)))
	hits := 0
	widths := make([]float64, 0, runs)
	for range runs {
		var p Pairs
		for b, e := range rng.Perm(len(eligible))[:d.k] {
			prs := ps[eligible[e]].Pairs
			start := rng.IntN(len(prs) - d.m + 1)
			for _, ab := range prs[start : start+d.m] {
				p.Base, p.Build, p.Blocks = append(p.Base, ab[0]), append(p.Build, ab[1]), append(p.Blocks, b)
			}
		}
		c := Estimate("ms_per_envelope", p, Options{Prior: prior})
		if c.Changed() {
			hits++
		}
		widths = append(widths, c.HalfWidth)
	}
	return float64(hits) / float64(runs), medianOf(widths)
}

func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

// userPriors are what a user may set with --process-noise: lower and
// higher than the recordings show, at DefaultPrior's weight.
func userPriors() map[string]Prior {
	return map[string]Prior{
		"default":            DefaultPrior(),
		"process-noise-0.5%": {Spread: 0.005, DF: DefaultPrior().DF},
		"process-noise-3%":   {Spread: 0.03, DF: DefaultPrior().DF},
	}
}

// BenchmarkHeldOut holds the verdict to the recorded pairs of processes
// that DefaultPrior never saw: comparisons of k blocks of m pairs drawn
// from them call a change in CPU per envelope in at most 5% of runs (a
// coverage of 95%), with the default prior and with --process-noise set
// lower or higher. It reports that rate and the median resolution per
// design; run it with
// go test -run '^$' -bench HeldOut ./internal/compare/.
func BenchmarkHeldOut(b *testing.B) {
	_, held := split(readProcesses(b))
	for name, prior := range userPriors() {
		for _, d := range designs {
			var fp, w float64
			for range b.N {
				fp, w = falseCalls(held, d, prior, 4000, 9)
			}
			if math.IsNaN(fp) {
				continue
			}
			id := name + "/" + strconv.Itoa(d.k) + "x" + strconv.Itoa(d.m)
			b.ReportMetric(100*fp, "fp%/"+id)
			b.ReportMetric(w, "±%/"+id)
			if fp > Alpha {
				b.Errorf("held out, %s, %d blocks of %d pairs: false-positive rate %.1f%% > 5%%", name, d.k, d.m, 100*fp)
			}
		}
	}
}

// simulate is the share of runs of design d whose verdict calls a change
// when there is none: pairs with log-normal noise sd within a block, and
// each block's processes off by a normal draw of spread tau.
func simulate(d design, sd, tau float64, prior Prior, runs int, seed uint64) (fp, median float64) {
	rng := rand.New(rand.NewPCG(seed, uint64(d.k*100+d.m)))
	hits := 0
	widths := make([]float64, 0, runs)
	p := Pairs{Base: make([]float64, d.k*d.m), Build: make([]float64, d.k*d.m), Blocks: make([]int, d.k*d.m)}
	for range runs {
		for b := range d.k {
			off := tau * rng.NormFloat64()
			drift := 3 + 2*rng.Float64()
			for j := range d.m {
				i := b*d.m + j
				p.Base[i] = drift * math.Exp(sd*rng.NormFloat64()/math.Sqrt2)
				p.Build[i] = drift * math.Exp(off+sd*rng.NormFloat64()/math.Sqrt2)
				p.Blocks[i] = b
			}
		}
		c := Estimate("x", p, Options{Prior: prior})
		if c.Changed() {
			hits++
		}
		widths = append(widths, c.HalfWidth)
	}
	return float64(hits) / float64(runs), medianOf(widths)
}

// BenchmarkSimulatedCoverage: with the spread between processes as the
// prior says (and, for --process-noise, as the user set it), comparisons
// of 1, 3, 5 and 10 blocks call a change in at most 5% of runs, and the
// 10-minute design (10 blocks of 8 pairs at the recorded within-block
// noise) resolves ±2.4% or better. Run it with
// go test -run '^$' -bench SimulatedCoverage ./internal/compare/.
func BenchmarkSimulatedCoverage(b *testing.B) {
	const sd = 0.09 // the recorded pairs' spread of log ratios within a block
	for name, prior := range userPriors() {
		for _, d := range append(designs, design{10, 17}) {
			var fp, w float64
			for range b.N {
				fp, w = simulate(d, sd, prior.Spread, prior, 20000, 5)
			}
			id := name + "/" + strconv.Itoa(d.k) + "x" + strconv.Itoa(d.m)
			b.ReportMetric(100*fp, "fp%/"+id)
			b.ReportMetric(w, "±%/"+id)
			// Three standard errors of a rate of 5% over 20,000 runs.
			if fp > Alpha+0.0046 {
				b.Errorf("simulated, %s, %d blocks of %d pairs: false-positive rate %.2f%% > 5%%", name, d.k, d.m, 100*fp)
			}
			if name == "default" && d == (design{10, 8}) && w > 2.4 {
				b.Errorf("simulated 10 blocks of 8 pairs: median resolution ±%.2f%%, want ±2.4%% or better", w)
			}
		}
	}
}

// TestSimulatedCoverage is a quick BenchmarkSimulatedCoverage: a few
// designs, fewer runs, the bound three standard errors above 5%.
func TestSimulatedCoverage(t *testing.T) {
	for _, d := range []design{{1, 17}, {3, 17}, {10, 8}} {
		fp, w := simulate(d, 0.09, DefaultPrior().Spread, DefaultPrior(), 4000, 1)
		t.Logf("%d blocks of %d pairs: %.2f%% false positives, median ±%.2f%%", d.k, d.m, 100*fp, w)
		if fp > Alpha+0.0104 {
			t.Errorf("%d blocks of %d pairs: false-positive rate %.2f%% > 5%%", d.k, d.m, 100*fp)
		}
	}
}

// TestSyntheticDrift: two identical builds measured in pairs on a machine
// whose speed drifts (both slices of a pair alike) and whose slices are
// noisy on their own: on one pair of processes and no prior (the spread
// between processes is 0 here), the interval calls a change in about 5% of
// runs, as a 95% interval should, whatever the drift.
func TestSyntheticDrift(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{5, 10, 30} {
		const runs = 4000
		hits := 0
		for range runs {
			base, build := make([]float64, k), make([]float64, k)
			drift := 2 + 2.5*rng.Float64()
			for i := range base {
				drift = math.Max(2, math.Min(4.5, drift+rng.NormFloat64()*0.2))
				base[i] = drift * math.Exp(rng.NormFloat64()*0.04)
				build[i] = drift * math.Exp(rng.NormFloat64()*0.04)
			}
			if Estimate("x", Pairs{Base: base, Build: build}, Options{Prior: Prior{DF: math.Inf(1)}}).Changed() {
				hits++
			}
		}
		if fp := float64(hits) / runs; fp > 0.065 || fp < 0.035 {
			t.Errorf("%d pairs: false-positive rate %.3f, want about 0.05", k, fp)
		}
	}
}

// TestPrecisionStop: an A/A comparison that adds pairs until the interval
// is within ±P% (or 60 pairs) and is then judged. Judged on the plain
// interval, stopping when it happens to be narrow calls a change more
// often than 5%; the two-stage interval (Options.Stage1) keeps it within.
func TestPrecisionStop(t *testing.T) {
	const runs, maxPairs, precision = 3000, 60, 4.0
	known := Prior{DF: math.Inf(1)}
	rate := func(o Options) float64 {
		rng := rand.New(rand.NewPCG(11, 12))
		hits := 0
		for range runs {
			var p Pairs
			var c Change
			for range maxPairs {
				p.Base = append(p.Base, math.Exp(rng.NormFloat64()*0.1))
				p.Build = append(p.Build, math.Exp(rng.NormFloat64()*0.1))
				if c = Estimate("x", p, o); len(p.Base) >= MinPairs && c.Pairs > 0 && c.HalfWidth <= precision {
					break
				}
			}
			if c.Changed() {
				hits++
			}
		}
		return float64(hits) / runs
	}
	plain, stopped := rate(Options{Prior: known}), rate(Options{Prior: known, Stage1: MinPairs})
	t.Logf("false positives under the precision rule: plain interval %.1f%%, two-stage %.1f%%", 100*plain, 100*stopped)
	if stopped > Alpha {
		t.Errorf("two-stage interval under the precision rule: false-positive rate %.3f > 0.05", stopped)
	}
}
