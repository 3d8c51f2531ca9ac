package profile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fuzzSeeds adds the heads of the fixtures and a few edge cases.
func fuzzSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.perf.txt")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 1<<10)])
	}
	for _, s := range []string{
		"",
		"relay 1 1.000001: cycles: \n",
		"relay 1/2 [000] 1.000001: 7 cycles:P: \n\t  aa f+0x1 (/x)\n\t  bb <a<b> as c>::d (x (y))\n\n",
		"a b 1 2.5: 3 e:  ffff [unknown] ([unknown])\n",
		"\t aa f (/x)\n",
		"x 1 1.1: 9999999999999999999999 c: \n\t\n\t ( ) ) (\n\t _ZN3foo3bar17h0123456789abcdefE\n",
	} {
		f.Add([]byte(s))
	}
}

// FuzzParse: Parse never panics, fails only with its two sentinel
// errors, and a profile it returns is consistent: the folded weights add
// up to the total weight, and no share exceeds 100%.
func FuzzParse(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := Parse(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrNotPerfScript) && !errors.Is(err, ErrNoSamples) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		if p.UnknownSamples > p.Samples || p.UnknownWeight > p.Weight || p.TruncatedSamples > p.Samples || p.Weight < 0 {
			t.Fatalf("inconsistent counts: %+v", *p)
		}
		checkFolded(t, p, folded(t, p))
		for _, fs := range p.Top(0) {
			if fs.Inclusive > 100+1e-9 || fs.Self > fs.Inclusive+1e-9 || fs.Self < 0 {
				t.Fatalf("bad share %+v", fs)
			}
		}
		for _, g := range p.Groups(DefaultGroups()) {
			if g.Inclusive > 100+1e-9 || g.Self > g.Inclusive+1e-9 || g.Samples > p.Samples {
				t.Fatalf("bad group share %+v", g)
			}
		}
	})
}

// FuzzFlameSVG: whatever the names, the flame graph is well-formed XML.
func FuzzFlameSVG(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := Parse(bytes.NewReader(in))
		if err != nil {
			return
		}
		parseSVG(t, svg(t, p, FlameOptions{MaxRects: 200}))
	})
}
