package orchestrate

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// falsePositives is the share of n sub-runs of k pairs, drawn from pairs
// with rng, whose CPU-per-envelope verdict calls a change real: contiguous
// stretches of the run, or (subsets) k pairs drawn from anywhere in it.
// blocks[i] is pair i's block (the processes it ran on).
func falsePositives(base, build []float64, blocks []int, k, n int, subsets bool, rng *rand.Rand) float64 {
	hits := 0
	a, b, blk := make([]float64, k), make([]float64, k), make([]int, k)
	for range n {
		if subsets {
			for i, j := range rng.Perm(len(base))[:k] {
				a[i], b[i], blk[i] = base[j], build[j], blocks[j]
			}
		} else {
			start := rng.IntN(len(base) - k + 1)
			copy(a, base[start:start+k])
			copy(b, build[start:start+k])
			copy(blk, blocks[start:start+k])
		}
		if v := pairedChangeFrom("ms_per_envelope", a, b, blk, 0, DefaultProcessNoise).Verdict; v == VerdictLower || v == VerdictHigher {
			hits++
		}
	}
	return float64(hits) / float64(n)
}

// TestVerdictFalsePositivesSynthetic: two identical builds measured in
// pairs on a machine whose speed drifts (both slices of a pair alike) and
// whose slices are noisy on their own: the verdict calls a change real in
// about 5% of runs, as a 95% interval should, whatever the drift.
func TestVerdictFalsePositivesSynthetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{5, 10, 30} {
		const runs = 4000
		hits := 0
		for range runs {
			base, build := make([]float64, k), make([]float64, k)
			drift := 2 + 2.5*rng.Float64() // ms per envelope, wandering
			for i := range base {
				drift = math.Max(2, math.Min(4.5, drift+rng.NormFloat64()*0.2))
				base[i] = drift * math.Exp(rng.NormFloat64()*0.04)
				build[i] = drift * math.Exp(rng.NormFloat64()*0.04)
			}
			if v := pairedChange("ms_per_envelope", base, build).Verdict; v == VerdictLower || v == VerdictHigher {
				hits++
			}
		}
		// The bounds allow about three standard errors of a rate over 4000 runs.
		if fp := float64(hits) / runs; fp > 0.065 || fp < 0.035 {
			t.Errorf("%d pairs: false-positive rate %.3f, want about 0.05", k, fp)
		}
	}
}

// aaRun is a recorded A/A comparison in slices: the same Relay twice.
type aaRun struct {
	Command string  `json:"command"`
	Slices  []Slice `json:"slices"`
}

// BenchmarkVerdictCalibration holds the verdict to the real A/A runs of
// Relay recorded in testdata (the same binary compared with itself in
// slices, on one process per build or in blocks): over random sub-runs of
// 10, 20 and 30 pairs (contiguous stretches, and pairs drawn from anywhere
// in the run), the share whose CPU-per-envelope verdict calls a change real
// must be at most 5%. Sub-runs of one recording hold only its own few
// processes, so the spread between processes is checked by the A/A runs
// it was estimated from (docs/measurements.md), not here. It reports that
// rate per sub-run length; run it with
// go test -run '^$' -bench VerdictCalibration ./internal/orchestrate/.
func BenchmarkVerdictCalibration(b *testing.B) {
	files, _ := os.ReadDir("testdata")
	found := false
	for _, f := range files {
		if !strings.HasPrefix(f.Name(), "aa-") || !strings.HasSuffix(f.Name(), ".json") {
			continue
		}
		found = true
		raw, err := os.ReadFile("testdata/" + f.Name())
		if err != nil {
			b.Fatal(err)
		}
		var run aaRun
		if err := json.Unmarshal(raw, &run); err != nil {
			b.Fatal(err)
		}
		sr := SliceRun{Baseline: run.Slices[0].Build, Slices: run.Slices}
		var base, build []float64
		var blocks []int
		byPair := map[int][2]float64{}
		blockOf := map[int]int{}
		for _, s := range run.Slices {
			p := byPair[s.Pair]
			if s.Build == sr.Baseline {
				p[0] = s.MsPerEnv
			} else {
				p[1] = s.MsPerEnv
			}
			byPair[s.Pair], blockOf[s.Pair] = p, s.Block
		}
		for i := 1; i <= len(byPair); i++ {
			if p := byPair[i]; p[0] > 0 && p[1] > 0 {
				base, build, blocks = append(base, p[0]), append(build, p[1]), append(blocks, blockOf[i])
			}
		}
		if len(base) < 60 {
			b.Fatalf("%s: %d pairs, want at least 60", f.Name(), len(base))
		}
		for _, k := range []int{10, 20, 30} {
			for _, subsets := range []bool{false, true} {
				var fp float64
				for i := 0; i < b.N; i++ {
					fp = falsePositives(base, build, blocks, k, 4000, subsets, rand.New(rand.NewPCG(7, uint64(k))))
				}
				kind := "stretches"
				if subsets {
					kind = "subsets"
				}
				b.ReportMetric(100*fp, "fp%/"+strings.TrimSuffix(f.Name(), ".json")+"/"+strconv.Itoa(k)+"-pair-"+kind)
				if fp > 0.05 {
					b.Errorf("%s: %d-pair %s: false-positive rate %.1f%% > 5%%", f.Name(), k, kind, 100*fp)
				}
			}
		}
	}
	if !found {
		b.Skip("no recorded A/A run in testdata (aa-*.json)")
	}
}

// TestPrecisionStopFalsePositives: an A/A comparison that adds pairs until
// the interval is within ±P% (or 60 pairs) and is then judged. Judged on the
// plain interval, stopping when it happens to be narrow calls a change more
// often than 5%; the two-stage interval of pairedChangeStopped keeps it
// within 5%.
func TestPrecisionStopFalsePositives(t *testing.T) {
	const runs, maxPairs, precision = 3000, 60, 4.0
	rate := func(change func(metric string, base, build []float64) Change) float64 {
		rng := rand.New(rand.NewPCG(11, 12))
		hits := 0
		for range runs {
			var base, build []float64
			var c Change
			for range maxPairs {
				base = append(base, math.Exp(rng.NormFloat64()*0.1))
				build = append(build, math.Exp(rng.NormFloat64()*0.1))
				if c = change("x", base, build); len(base) >= MinPairs && c.HalfWidth <= precision {
					break
				}
			}
			if c.Verdict == VerdictLower || c.Verdict == VerdictHigher {
				hits++
			}
		}
		return float64(hits) / runs
	}
	plain, stopped := rate(pairedChange), rate(pairedChangeStopped)
	t.Logf("false positives under the precision rule: plain interval %.1f%%, two-stage %.1f%%", 100*plain, 100*stopped)
	if stopped > 0.05 {
		t.Errorf("two-stage interval under the precision rule: false-positive rate %.3f > 0.05", stopped)
	}
}

// processPairs are the recorded A/A pairs of Relay processes
// (testdata/processes-*.json): each entry one pair of processes, each of
// its pairs [a, b] the two builds' CPU per envelope.
type processPairs struct {
	Processes []struct {
		Run   string       `json:"run"`
		Pairs [][2]float64 `json:"pairs"`
	} `json:"processes"`
}

func readProcessPairs(tb testing.TB) processPairs {
	raw, err := os.ReadFile("testdata/processes-relay-26.4.0-300.json")
	if err != nil {
		tb.Fatal(err)
	}
	var pp processPairs
	if err := json.Unmarshal(raw, &pp); err != nil {
		tb.Fatal(err)
	}
	return pp
}

// TestDefaultProcessNoise: DefaultProcessNoise is at least the
// DerSimonian–Laird estimate of the spread between pairs of processes over
// every recorded A/A pair of processes, so that a recording that shows
// more moves it.
func TestDefaultProcessNoise(t *testing.T) {
	pp := readProcessPairs(t)
	var base, build []float64
	var blocks []int
	for i, p := range pp.Processes {
		for _, ab := range p.Pairs {
			base, build, blocks = append(base, ab[0]), append(build, ab[1]), append(blocks, i)
		}
	}
	if len(pp.Processes) < 10 {
		t.Fatalf("%d pairs of processes recorded, want at least 10", len(pp.Processes))
	}
	got := blockSpread(base, build, blocks)
	t.Logf("%d recorded pairs of processes spread by %.4f", len(pp.Processes), got)
	if got > DefaultProcessNoise {
		t.Errorf("the recorded pairs of processes spread by %.4f, more than DefaultProcessNoise %.4f", got, DefaultProcessNoise)
	}
}

// BenchmarkVerdictCalibrationBlocks holds the verdict to comparisons drawn
// from the recorded A/A pairs of processes: a run of k blocks of m pairs
// takes k different pairs of processes at random and a random stretch of
// m pairs from each, as a run in blocks would. The share of runs whose
// CPU-per-envelope verdict calls a change real must be at most 5%. Run it
// with go test -run '^$' -bench VerdictCalibrationBlocks ./internal/orchestrate/.
func BenchmarkVerdictCalibrationBlocks(b *testing.B) {
	pp := readProcessPairs(b)
	for _, d := range []struct{ k, m int }{{1, 8}, {1, 17}, {3, 8}, {3, 17}, {5, 17}, {10, 8}, {12, 6}} {
		var eligible []int
		for i, p := range pp.Processes {
			if len(p.Pairs) >= d.m {
				eligible = append(eligible, i)
			}
		}
		var fp float64
		for i := 0; i < b.N; i++ {
			rng := rand.New(rand.NewPCG(9, uint64(d.k*100+d.m)))
			const runs = 4000
			hits := 0
			for range runs {
				var base, build []float64
				var blocks []int
				for _, e := range rng.Perm(len(eligible))[:d.k] {
					ps := pp.Processes[eligible[e]].Pairs
					start := rng.IntN(len(ps) - d.m + 1)
					for _, ab := range ps[start : start+d.m] {
						base, build, blocks = append(base, ab[0]), append(build, ab[1]), append(blocks, e)
					}
				}
				if v := pairedChangeFrom("ms_per_envelope", base, build, blocks, 0, DefaultProcessNoise).Verdict; v == VerdictLower || v == VerdictHigher {
					hits++
				}
			}
			fp = float64(hits) / runs
		}
		b.ReportMetric(100*fp, "fp%/"+strconv.Itoa(d.k)+"x"+strconv.Itoa(d.m)+"-pairs")
		if fp > 0.05 {
			b.Errorf("%d blocks of %d pairs: false-positive rate %.1f%% > 5%%", d.k, d.m, 100*fp)
		}
	}
}
