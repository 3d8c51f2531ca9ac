package compare

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// TestJudge: the secondary metrics are descriptive while the primary did
// not change; once it did, Holm's step-down decides which of them did.
func TestJudge(t *testing.T) {
	mk := func(metric string, p, mean float64, verdict string) Change {
		return Change{Metric: metric, Pairs: 30, P: p, MeanLog: mean, Verdict: verdict}
	}
	for _, tc := range []struct {
		name string
		in   []Change
		want []string
	}{
		{"primary unchanged", []Change{
			mk("cpu", 0.3, 0.01, "no change beyond ±2.0%"), mk("p99", 0.001, 0.1, VerdictHigher), mk("rss", 0.5, 0, "no change beyond ±1.0%"),
		}, []string{"no change beyond ±2.0%", VerdictDescriptive, VerdictDescriptive}},
		{"Holm rejects in order", []Change{
			mk("cpu", 0.001, 0.08, VerdictHigher), mk("cores", 0.02, 0.05, VerdictHigher), mk("p99", 0.012, -0.04, VerdictLower),
			mk("rss", 0.6, 0, "no change beyond ±1.0%"),
		}, // sorted: p99 0.012 ≤ 0.05/3, cores 0.02 ≤ 0.05/2, rss 0.6 > 0.05
			[]string{VerdictHigher, VerdictHigher, VerdictLower, "no change beyond ±1.0%"}},
		{"Holm stops at the first it keeps", []Change{
			mk("cpu", 0.001, -0.08, VerdictLower), mk("cores", 0.03, 0.05, VerdictHigher), mk("p99", 0.04, 0.04, VerdictHigher),
		}, // 0.03 > 0.05/2: neither
			[]string{VerdictLower, VerdictNotSignificant, VerdictNotSignificant}},
		{"too few pairs stays", []Change{
			mk("cpu", 0.001, 0.08, VerdictHigher), {Metric: "p99", Pairs: 1, Verdict: VerdictTooFewPairs},
		}, []string{VerdictHigher, VerdictTooFewPairs}},
		{"unknown spread is descriptive", []Change{
			mk("cpu", 0.001, 0.08, VerdictHigher), {Metric: "rss", Pairs: 30, P: 0.0001, MeanLog: 0.1, Verdict: VerdictHigher, SpreadUnknown: true},
		}, []string{VerdictHigher, VerdictDescriptive}},
	} {
		Judge(tc.in)
		for i, c := range tc.in {
			if c.Verdict != tc.want[i] {
				t.Errorf("%s: %s is %q, want %q", tc.name, c.Metric, c.Verdict, tc.want[i])
			}
		}
	}
}

// recorded is a recorded A/A comparison in slices (testdata/aa-*.json):
// the same Relay twice.
type recorded struct {
	Slices []struct {
		Build         string  `json:"build"`
		Pair          int     `json:"pair"`
		Block         int     `json:"block"`
		MsPerEnv      float64 `json:"ms_per_envelope"`
		Cores         float64 `json:"cores"`
		P99           float64 `json:"p99_ms"`
		PeakRSS       float64 `json:"peak_rss_bytes"`
		ForwardedRate float64 `json:"forwarded_per_s"`
	} `json:"slices"`
}

// metricsOf are a recording's pairs per metric (CPU per envelope first)
// and the blocks.
func metricsOf(tb testing.TB, path string) (names []string, pairs [][2][]float64, blocks []int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var r recorded
	if err := json.Unmarshal(raw, &r); err != nil {
		tb.Fatal(err)
	}
	names = []string{"ms_per_envelope", "cores", "p99_ms", "peak_rss", "forwarded_per_s"}
	pairs = make([][2][]float64, len(names))
	type pr struct{ a, b int }
	idx := map[int]*pr{}
	var order []int
	for i, s := range r.Slices {
		p := idx[s.Pair]
		if p == nil {
			p = &pr{-1, -1}
			idx[s.Pair] = p
			order = append(order, s.Pair)
		}
		if s.Build == r.Slices[0].Build {
			p.a = i
		} else {
			p.b = i
		}
	}
	for _, n := range order {
		p := idx[n]
		if p.a < 0 || p.b < 0 {
			continue
		}
		a, b := r.Slices[p.a], r.Slices[p.b]
		for m, v := range [][2]float64{{a.MsPerEnv, b.MsPerEnv}, {a.Cores, b.Cores}, {a.P99, b.P99}, {a.PeakRSS, b.PeakRSS}, {a.ForwardedRate, b.ForwardedRate}} {
			pairs[m][0], pairs[m][1] = append(pairs[m][0], v[0]), append(pairs[m][1], v[1])
		}
		blocks = append(blocks, a.Block)
	}
	return names, pairs, blocks
}

// judged are the verdicts of a recording's metrics, as a comparison in
// slices gives them: the CPU metrics from prior, the others from the
// blocks alone, with swap[b] exchanging the two builds' labels in block b.
func judged(names []string, pairs [][2][]float64, blocks []int, prior Prior, swap map[int]bool) []Change {
	out := make([]Change, len(names))
	for m, name := range names {
		var p Pairs
		for i := range pairs[m][0] {
			a, b := pairs[m][0][i], pairs[m][1][i]
			if swap[blocks[i]] {
				a, b = b, a
			}
			p.Base, p.Build, p.Blocks = append(p.Base, a), append(p.Build, b), append(p.Blocks, blocks[i])
		}
		o := Options{}
		if name == "ms_per_envelope" || name == "cores" {
			o.Prior = prior
		}
		out[m] = Estimate(name, p, o)
	}
	Judge(out)
	return out
}

// TestRecordedAALabelSwaps: the recorded A/A runs in 1-minute blocks (one
// the prior was chosen on, one it never saw), their two builds' labels
// exchanged within any set of their blocks (1,024 ways for ten blocks;
// under no change each is as likely as the run itself): at most 5% of
// them call any metric changed.
func TestRecordedAALabelSwaps(t *testing.T) {
	for _, f := range []string{"aa-relay-26.4.0-300-blocks-1m.json", "aa-relay-26.4.0-300-blocks-1m-2026-12-07.json"} {
		t.Run(f, func(t *testing.T) { labelSwaps(t, "testdata/"+f) })
	}
}

func labelSwaps(t *testing.T, path string) {
	names, pairs, blocks := metricsOf(t, path)
	var ids []int
	seen := map[int]bool{}
	for _, b := range blocks {
		if !seen[b] {
			seen[b] = true
			ids = append(ids, b)
		}
	}
	if len(ids) < 8 {
		t.Fatalf("%d blocks, want at least 8", len(ids))
	}
	ways := 1 << len(ids)
	any := 0
	perMetric := make([]int, len(names))
	for mask := range ways {
		swap := map[int]bool{}
		for i, b := range ids {
			swap[b] = mask&(1<<i) != 0
		}
		called := false
		for m, c := range judged(names, pairs, blocks, DefaultPrior(), swap) {
			if c.Changed() {
				perMetric[m]++
				called = true
			}
		}
		if called {
			any++
		}
	}
	t.Logf("%d label swaps: any metric called in %.1f%%; per metric %v", ways, 100*float64(any)/float64(ways), perMetric)
	if fp := float64(any) / float64(ways); fp > Alpha {
		t.Errorf("any metric called changed in %.1f%% of %d label swaps, want at most 5%%", 100*fp, ways)
	}
}

// TestFamilywiseSimulated: A/A runs of 10 blocks of 8 pairs whose five
// metrics each have noise of their own and processes that differ: any
// metric is called changed in at most 5% of runs.
func TestFamilywiseSimulated(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const runs, k, m = 2000, 10, 8
	names := []string{"ms_per_envelope", "cores", "p99_ms", "peak_rss", "forwarded_per_s"}
	sd := []float64{0.09, 0.06, 0.2, 0.01, 0.02}
	tau := []float64{DefaultPrior().Spread, DefaultPrior().Spread, 0.03, 0.02, 0.005}
	pairs := make([][2][]float64, len(names))
	blocks := make([]int, k*m)
	for i := range blocks {
		blocks[i] = i / m
	}
	any := 0
	for range runs {
		for j := range names {
			a, b := make([]float64, k*m), make([]float64, k*m)
			for blk := range k {
				off := tau[j] * rng.NormFloat64()
				for i := blk * m; i < (blk+1)*m; i++ {
					a[i] = math.Exp(sd[j] * rng.NormFloat64() / math.Sqrt2)
					b[i] = math.Exp(off + sd[j]*rng.NormFloat64()/math.Sqrt2)
				}
			}
			pairs[j] = [2][]float64{a, b}
		}
		for _, c := range judged(names, pairs, blocks, DefaultPrior(), nil) {
			if c.Changed() {
				any++
				break
			}
		}
	}
	t.Logf("any of %d metrics called changed in %.2f%% of %d runs", len(names), 100*float64(any)/runs, runs)
	// Three standard errors of a 5% rate over 2,000 runs.
	if fp := float64(any) / runs; fp > Alpha+0.0146 {
		t.Errorf("any metric called changed in %.2f%% of runs", 100*fp)
	}
}
