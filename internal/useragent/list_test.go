package useragent

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	l, err := ReadFile("testdata/agents.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 7 || !strings.HasPrefix(l[0].UA, "Mozilla/5.0 (Windows NT 10.0") || l[6].UA != "python-requests/2.32.3" {
		t.Fatalf("%d agents: %+v", len(l), l)
	}
	for _, w := range l {
		if w.Weight != 0 {
			t.Fatalf("weight %v without weights in the file", w.Weight)
		}
	}
	l, err = ReadFile("testdata/weighted.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{60, 30, 7.5, 2.5}
	if len(l) != len(want) {
		t.Fatalf("%d agents, want %d", len(l), len(want))
	}
	for i, w := range want {
		if l[i].Weight != w || strings.ContainsAny(l[i].UA, "\t") {
			t.Errorf("agent %d: %+v, want weight %v", i, l[i], w)
		}
	}
	if _, err := ReadFile("testdata/nonexistent.txt"); err == nil || !strings.Contains(err.Error(), "nonexistent.txt") {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseList(t *testing.T) {
	long := strings.Repeat("a", MaxLength+1)
	for _, tc := range []struct {
		name, in string
		want     []Weighted
		line     int    // of the error; 0 with wantErr: the list as a whole
		wantErr  string // "" for success
	}{
		{name: "one", in: "curl/8.5.0", want: []Weighted{{UA: "curl/8.5.0"}}},
		{name: "crlf, bom, spaces, comments", in: "\ufeff# c\r\n  curl/8.5.0  \r\n\r\n   # indented\r\nWget/1.21.4\r\n",
			want: []Weighted{{UA: "curl/8.5.0"}, {UA: "Wget/1.21.4"}}},
		{name: "weights", in: "a/1\t3\nb/2 \t 0.5\nc/3\t1e2\n", want: []Weighted{{"a/1", 3}, {"b/2", 0.5}, {"c/3", 100}}},
		{name: "inner spaces kept", in: "A  B (x; y)\n", want: []Weighted{{UA: "A  B (x; y)"}}},
		{name: "non-ASCII", in: "Café/1.0 CFNetwork/1494.0.7 Darwin/23.4.0\n", want: []Weighted{{UA: "Café/1.0 CFNetwork/1494.0.7 Darwin/23.4.0"}}},
		{name: "no final newline", in: "a/1\nb/2", want: []Weighted{{UA: "a/1"}, {UA: "b/2"}}},

		{name: "empty", in: "", wantErr: "no agents"},
		{name: "comments only", in: "# a\n\n  \n#b\n", wantErr: "no agents"},
		{name: "duplicate", in: "a/1\nb/2\n\na/1\n", line: 4, wantErr: "the agent of line 1 again"},
		{name: "duplicate after trimming", in: "a/1\n a/1 \n", line: 2, wantErr: "the agent of line 1 again"},
		{name: "weight zero", in: "a/1\t0\n", line: 1, wantErr: `weight "0": want a positive number`},
		{name: "weight negative", in: "# x\na/1\t-2\n", line: 2, wantErr: `weight "-2"`},
		{name: "weight word", in: "a/1\tmany\n", line: 1, wantErr: `weight "many"`},
		{name: "weight NaN", in: "a/1\tNaN\n", line: 1, wantErr: `weight "NaN"`},
		{name: "weight Inf", in: "a/1\tInf\n", line: 1, wantErr: `weight "Inf"`},
		{name: "weight missing after tab", in: "a/1\t\n", line: 1, wantErr: `weight "": want a positive number`},
		{name: "weights overflow", in: "a/1\t1e308\nb/1\t1e308\n", line: 2, wantErr: "add up to more"},
		{name: "two tabs", in: "a/1\t1\t2\n", line: 1, wantErr: "more than one tab"},
		{name: "weight only", in: "\t3\n", line: 1, wantErr: "no agent"},
		{name: "some weighted", in: "a/1\t2\nb/2\n", line: 2, wantErr: "no weight, but line 1 has one"},
		{name: "some unweighted", in: "a/1\nb/2\t2\n", line: 2, wantErr: "a weight, but line 1 has none"},
		{name: "control character", in: "a/1\nb\x01c\n", line: 2, wantErr: "control character U+0001"},
		{name: "DEL", in: "a\x7f\n", line: 1, wantErr: "control character U+007F"},
		{name: "C1 control", in: "a\u0085b\n", line: 1, wantErr: "control character U+0085"},
		{name: "not UTF-8", in: "a/1\nb\xff\n", line: 2, wantErr: "not UTF-8"},
		{name: "too long", in: "a/1\n" + long + "\n", line: 2, wantErr: "want at most 2048"},
		{name: "line too long", in: "a/1\n#" + strings.Repeat("x", maxLine) + "\n", line: 2, wantErr: "line longer than"},
	} {
		got, err := ParseList(strings.NewReader(tc.in), "agents.txt")
		if tc.wantErr == "" {
			if err != nil || len(got) != len(tc.want) {
				t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
				continue
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%s: agent %d %+v, want %+v", tc.name, i, got[i], tc.want[i])
				}
			}
			continue
		}
		var le *LineError
		if !errors.As(err, &le) || le.Line != tc.line || le.Name != "agents.txt" || !strings.Contains(err.Error(), tc.wantErr) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want line %d and %q", tc.name, err, tc.line, tc.wantErr)
			continue
		}
		prefix := "agents.txt: "
		if tc.line > 0 {
			prefix = "agents.txt:" + itoa(tc.line) + ": "
		}
		if !strings.HasPrefix(err.Error(), prefix) {
			t.Errorf("%s: %q does not start with %q", tc.name, err, prefix)
		}
	}
}

// More agents than the bound are refused at the first one too many.
func TestParseListBound(t *testing.T) {
	_, err := parseList(strings.NewReader("# 3 at most\na/1\nb/1\n\nc/1\nd/1\n"), "big", 3)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 6 || !strings.Contains(err.Error(), "big:6: more than 3 agents") {
		t.Fatalf("%v", err)
	}
	if l, err := parseList(strings.NewReader("a/1\nb/1\nc/1\n"), "big", 3); err != nil || len(l) != 3 {
		t.Fatalf("three agents with a bound of 3: %v, %v", l, err)
	}
}

// FuzzParseList: any input parses or fails with a one-line error naming a
// line; a parsed list holds distinct agents that Check accepts, all
// weighted or none, and parses again, written back, to the same list.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"", "a\n", "# x\n\na/1\t2\nb/1\t3\n", "a\t\t1", "\ufeffa\r\n", "a\nb\na\n", "a\t1e308\nb\t1e308",
		"a\x00b", "a\xffb", " #x\n\tz"} {
		f.Add([]byte(s))
	}
	for _, p := range []string{"testdata/agents.txt", "testdata/weighted.txt"} {
		b, err := os.ReadFile(filepath.Clean(p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		l, err := ParseList(strings.NewReader(string(in)), "f")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") || strings.Contains(err.Error(), "\n") || l != nil {
				t.Fatalf("error %q, list %v", err, l)
			}
			return
		}
		seen := map[string]bool{}
		var b strings.Builder
		b.WriteString("# written back\n") // a byte order mark is an agent's below line 1
		for _, w := range l {
			if Check(w.UA) != nil || seen[w.UA] || (w.Weight > 0) != (l[0].Weight > 0) || w.Weight < 0 {
				t.Fatalf("bad entry %+v in %+v", w, l)
			}
			seen[w.UA] = true
			b.WriteString(w.UA)
			if w.Weight > 0 {
				b.WriteString("\t")
				b.WriteString(strconv.FormatFloat(w.Weight, 'g', -1, 64))
			}
			b.WriteString("\n")
		}
		again, err := ParseList(strings.NewReader(b.String()), "f")
		if err != nil || len(again) != len(l) {
			t.Fatalf("written back: %v, %d of %d agents", err, len(again), len(l))
		}
		for i := range l {
			if again[i] != l[i] {
				t.Fatalf("written back: %+v, want %+v", again[i], l[i])
			}
		}
	})
}
