package pool

import "testing"

func FuzzParseMix(f *testing.F) {
	f.Add(DefaultMix)
	f.Add("errors=1")
	f.Add("errors=NaN")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMix(s)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("ParseMix(%q) returned an invalid mix: %v", s, err)
		}
		m2, err := ParseMix(m.String())
		if err != nil || len(m2) != len(m) {
			t.Fatalf("round trip of %q via %q: %v", s, m.String(), err)
		}
		p := newPicker(m)
		for _, u := range []float64{0, 0.25, 0.5, 0.999999} {
			if k := p.pick(u); m[k] <= 0 {
				t.Fatalf("picked %s with weight %v", k, m[k])
			}
		}
	})
}

func TestFixed(t *testing.T) {
	for _, c := range []struct {
		v    int64
		d    int
		want string
	}{{1767225600123456, 6, "1767225600.123456"}, {1767225600000001, 6, "1767225600.000001"}, {1767225600000000, 6, "1767225600.000000"},
		{1767225600120, 3, "1767225600.120"}, {5, 3, "0.005"}, {42, 0, "42"}, {100000, 6, "0.100000"}} {
		var w jw
		w.fixed(c.v, c.d)
		if string(w.b) != c.want {
			t.Errorf("fixed(%d, %d) = %s, want %s", c.v, c.d, w.b, c.want)
		}
	}
}
