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
func falsePositives(base, build []float64, k, n int, subsets bool, rng *rand.Rand) float64 {
	hits := 0
	a, b := make([]float64, k), make([]float64, k)
	for range n {
		if subsets {
			for i, j := range rng.Perm(len(base))[:k] {
				a[i], b[i] = base[j], build[j]
			}
		} else {
			start := rng.IntN(len(base) - k + 1)
			copy(a, base[start:start+k])
			copy(b, build[start:start+k])
		}
		if v := pairedChangeFrom("ms_per_envelope", a, b, nil, 0, DefaultProcessNoise).Verdict; v == VerdictLower || v == VerdictHigher {
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

// BenchmarkVerdictCalibration holds the verdict to a real A/A run of Relay
// recorded in testdata (the same binary compared with itself in slices):
// over random sub-runs of 10, 20 and 30 pairs (contiguous stretches, and
// pairs drawn from anywhere in the run), the share whose
// CPU-per-envelope verdict calls a change real must be at most 5%. It
// reports that rate per sub-run length; run it with
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
		byPair := map[int][2]float64{}
		for _, s := range run.Slices {
			p := byPair[s.Pair]
			if s.Build == sr.Baseline {
				p[0] = s.MsPerEnv
			} else {
				p[1] = s.MsPerEnv
			}
			byPair[s.Pair] = p
		}
		for i := 1; i <= len(byPair); i++ {
			if p := byPair[i]; p[0] > 0 && p[1] > 0 {
				base, build = append(base, p[0]), append(build, p[1])
			}
		}
		if len(base) < 60 {
			b.Fatalf("%s: %d pairs, want at least 60", f.Name(), len(base))
		}
		for _, k := range []int{10, 20, 30} {
			for _, subsets := range []bool{false, true} {
				var fp float64
				for i := 0; i < b.N; i++ {
					fp = falsePositives(base, build, k, 4000, subsets, rand.New(rand.NewPCG(7, uint64(k))))
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
