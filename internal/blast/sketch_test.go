package blast

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

func lognormal(r *rand.Rand, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(math.Exp(r.NormFloat64()*0.8) * float64(2*time.Millisecond))
	}
	return out
}

func TestSketchAccuracy(t *testing.T) {
	vals := lognormal(rand.New(rand.NewPCG(1, 2)), 100000)
	s := NewSketch()
	for _, v := range vals {
		s.Add(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 0.9999} {
		exact := vals[int(q*float64(len(vals)-1))]
		got := s.Quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > Alpha+1e-9 {
			t.Errorf("q%v: got %v exact %v (rel err %.4f > %v)", q, got, exact, rel, Alpha)
		}
	}
	if s.Max() != vals[len(vals)-1] || s.Quantile(0) != vals[0] {
		t.Errorf("min/max %v/%v, want exact %v/%v", s.Quantile(0), s.Max(), vals[0], vals[len(vals)-1])
	}
	if s.Count() != int64(len(vals)) {
		t.Errorf("count %d", s.Count())
	}
	if NewSketch().Quantile(0.99) != 0 {
		t.Error("empty sketch quantile != 0")
	}
}

func TestSketchMergeEqualsUnion(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b, union := NewSketch(), NewSketch(), NewSketch()
	for _, v := range lognormal(r, 5000) {
		a.Add(v)
		union.Add(v)
	}
	for _, v := range lognormal(r, 7000) {
		b.Add(v * 3)
		union.Add(v * 3)
	}
	b.Add(0) // zero bucket too
	union.Add(0)
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if !a.Equal(union) {
		t.Fatal("merged sketch differs from the sketch of the union")
	}
}

func TestSketchJSONRoundTrip(t *testing.T) {
	s := NewSketch()
	for _, v := range lognormal(rand.New(rand.NewPCG(5, 6)), 20000) {
		s.Add(v)
	}
	for _, sk := range []*Sketch{s, NewSketch()} {
		b, err := json.Marshal(sk)
		if err != nil {
			t.Fatal(err)
		}
		var back Sketch
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !back.Equal(sk) {
			t.Fatalf("round trip changed the sketch: %s", b)
		}
		if len(b) > 4096 {
			t.Errorf("encoded sketch %d bytes", len(b))
		}
	}
	for _, bad := range []string{`{"alpha":0.02,"unit":"ms","count":0,"ddsketch":"AA=="}`, `{"alpha":0.01,"unit":"s"}`, `{"alpha":0.01,"unit":"ms","count":5,"ddsketch":""}`, `{"alpha":0.01,"unit":"ms","count":5,"ddsketch":"!!"}`} {
		var back Sketch
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func FuzzSketchUnmarshal(f *testing.F) {
	s := NewSketch()
	s.Add(time.Millisecond)
	b, _ := json.Marshal(s)
	f.Add(b)
	f.Add([]byte(`{"alpha":0.01,"unit":"ms","count":0,"ddsketch":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Sketch
		if json.Unmarshal(b, &s) != nil {
			return
		}
		s.Quantile(0.99) // must not panic
		if _, err := json.Marshal(&s); err != nil {
			t.Fatal(err)
		}
	})
}

// A crafted encoding naming far-apart bins is rejected before the dense
// store would allocate the span between them (1<<34 bins: 128 GB).
func TestSketchUnmarshalRejectsImpossibleBins(t *testing.T) {
	m, err := mapping.NewLogarithmicMapping(Alpha)
	if err != nil {
		t.Fatal(err)
	}
	for name, fill := range map[string]func(pos, neg *store.SparseStore){
		"huge index":     func(pos, _ *store.SparseStore) { pos.Add(0); pos.Add(1 << 34) },
		"negative index": func(pos, _ *store.SparseStore) { pos.Add(-1 << 34) },
		"negative value": func(pos, neg *store.SparseStore) { pos.Add(0); neg.Add(3) },
		"negative count": func(pos, _ *store.SparseStore) { pos.AddWithCount(5, -2); pos.AddWithCount(6, 3) },
	} {
		pos, neg := store.NewSparseStore(), store.NewSparseStore()
		fill(pos, neg)
		dd := ddsketch.NewDDSketch(m, pos, neg)
		var data []byte
		dd.Encode(&data, false)
		b, err := json.Marshal(sketchJSON{Alpha: Alpha, Unit: Unit, Count: int64(math.Round(dd.GetCount())), Min: 1, Max: 2, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		var s Sketch
		if err := json.Unmarshal(b, &s); err == nil {
			t.Errorf("%s: accepted %s", name, b)
		}
	}
	// The extremes Add can produce still decode.
	s := NewSketch()
	s.AddMillis(m.MinIndexableValue())
	s.AddMillis(m.MaxIndexableValue())
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Sketch
	if err := json.Unmarshal(b, &back); err != nil || !back.Equal(s) {
		t.Fatalf("extreme values: %v", err)
	}
	// min > max in the header
	var data []byte
	one := NewSketch()
	one.Add(time.Millisecond)
	one.dd.Encode(&data, false)
	b, err = json.Marshal(sketchJSON{Alpha: Alpha, Unit: Unit, Count: 1, Min: 3, Max: 2, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err == nil {
		t.Error("accepted min > max")
	}
}
