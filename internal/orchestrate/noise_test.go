package orchestrate

import (
	"math"
	"testing"
)

func TestMannWhitneyP(t *testing.T) {
	for _, tc := range []struct {
		a, b []float64
		p    float64
	}{
		// Completely separated: the most extreme of C(n+m, n) orders, twice.
		{[]float64{1, 2, 3}, []float64{4, 5, 6}, 2.0 / 20},
		{[]float64{1, 2, 3, 4}, []float64{5, 6, 7, 8}, 2.0 / 70},
		{[]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}, 2.0 / 252},
		// Interleaved: no evidence.
		{[]float64{1, 3, 5}, []float64{2, 4, 6}, 0.7},
		{[]float64{1, 2, 3}, []float64{1, 2, 3}, 1},
	} {
		if p := mannWhitneyP(tc.a, tc.b); math.Abs(p-tc.p) > 1e-9 {
			t.Errorf("%v vs %v: p %v, want %v", tc.a, tc.b, p, tc.p)
		}
	}
}

func TestNoiseVerdict(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []float64
		want string
	}{
		// An A/A run measured on this machine: +1% median, ±1% and ±5%
		// spreads (the same binary under two names, 3 rounds).
		{"A/A", []float64{4.00, 4.04, 4.08}, []float64{3.92, 4.08, 4.32}, ChangeWithinNoise},
		{"faster, 3 rounds", []float64{4.0, 4.1, 4.2}, []float64{3.1, 3.2, 3.3}, ChangeLower},
		{"slower, 5 rounds", []float64{3.0, 3.1, 3.0, 3.2, 3.1}, []float64{3.5, 3.6, 3.4, 3.5, 3.7}, ChangeHigher},
		{"overlapping ranges", []float64{3.0, 3.5, 4.0}, []float64{3.4, 3.9, 4.4}, ChangeWithinNoise},
		{"too few rounds", []float64{4.0, 4.1}, []float64{3.0, 3.1}, ""},
	} {
		if got, _ := noiseVerdict(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
