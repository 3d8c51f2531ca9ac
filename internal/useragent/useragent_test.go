package useragent

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUniqueNeverCollides(t *testing.T) {
	const n = 200_000
	seen := make(map[string]uint64, n)
	for v := uint64(0); v < n; v++ {
		// Adversarial: every v draws from the same stream, so only v differs.
		a := Generate(rand.New(rand.NewPCG(1, 2)), true, v)
		if prev, ok := seen[a.UA]; ok {
			t.Fatalf("v=%d and v=%d both gave %q", prev, v, a.UA)
		}
		seen[a.UA] = v
	}
	for v := uint64(0); v < n; v++ {
		a := Generate(rand.New(rand.NewPCG(v, 7)), true, v)
		if prev, ok := seen[a.UA]; ok && prev != v {
			t.Fatalf("v=%d and v=%d both gave %q", prev, v, a.UA)
		}
	}
}

func TestDeterministic(t *testing.T) {
	for i := uint64(0); i < 1000; i++ {
		a := Generate(rand.New(rand.NewPCG(i, 3)), i%2 == 0, i)
		b := Generate(rand.New(rand.NewPCG(i, 3)), i%2 == 0, i)
		if a != b {
			t.Fatalf("%d: %q != %q", i, a.UA, b.UA)
		}
	}
}

func TestFamilyShares(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	counts := map[string]int{}
	classes := map[Class]int{}
	distinct := map[string]bool{}
	const n = 100_000
	for i := 0; i < n; i++ {
		a := Generate(r, false, 0)
		counts[a.Family]++
		classes[a.Class]++
		distinct[a.UA] = true
		if a.UA == "" || strings.ContainsAny(a.UA, "\n\r\"") {
			t.Fatalf("bad agent %q", a.UA)
		}
	}
	for _, f := range families {
		got := float64(counts[f.name]) / n
		want := float64(f.weight) / float64(totalWeight)
		if got < want*0.85 || got > want*1.15 {
			t.Errorf("%s: share %.4f, want ≈ %.4f", f.name, got, want)
		}
	}
	if classes[Browser] < n*8/10 {
		t.Errorf("browsers %d of %d, want ≥ 80%%", classes[Browser], n)
	}
	// The templates must give thousands of distinct realistic strings.
	if len(distinct) < 5000 {
		t.Errorf("only %d distinct agents in %d draws", len(distinct), n)
	}
}

func TestShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 20000; i++ {
		a := Generate(r, i%3 == 0, uint64(i))
		switch a.Family {
		case "chrome-desktop", "chrome-android", "edge", "opera", "samsung":
			if !strings.HasPrefix(a.UA, "Mozilla/5.0 (") || !strings.Contains(a.UA, " Chrome/") || !strings.Contains(a.UA, "Safari/537.36") {
				t.Fatalf("%s: %q", a.Family, a.UA)
			}
		case "mobile-safari":
			if !strings.Contains(a.UA, "like Mac OS X") || !strings.Contains(a.UA, " Mobile/") {
				t.Fatalf("%s: %q", a.Family, a.UA)
			}
		case "firefox":
			if !strings.Contains(a.UA, " Firefox/") || !strings.Contains(a.UA, "rv:") {
				t.Fatalf("%s: %q", a.Family, a.UA)
			}
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < b.N; i++ {
		Generate(r, i%2 == 0, uint64(i))
	}
}
