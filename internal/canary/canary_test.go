package canary

import (
	"bytes"
	"strings"
	"testing"
)

func TestMarkersAreUniqueAndSafe(t *testing.T) {
	codes := map[string]bool{}
	for _, k := range Kinds() {
		if codes[k.Code] {
			t.Fatalf("duplicate code %q", k.Code)
		}
		codes[k.Code] = true
		m := k.Marker(17)
		for _, word := range []string{"auth", "secret", "token", "key", "pass", "pwd", "cred", "otp"} {
			if strings.Contains(strings.ToLower(m), word) {
				t.Errorf("marker %q contains %q, which Relay's password rule matches", m, word)
			}
		}
		if strings.ContainsAny(m, "0123456789") {
			t.Errorf("marker %q has digits", m)
		}
		if k.Expect == Masked && k.Secret == "" {
			t.Errorf("masked kind %s has no secret", k.Name)
		}
	}
	if a, b := Kinds()[0].Marker(1), Kinds()[0].Marker(2); a == b {
		t.Fatal("index not encoded")
	}
}

func TestScan(t *testing.T) {
	pw, _ := ByCode([]byte("pa"))
	cc, _ := ByCode([]byte("cc"))
	keep, _ := ByCode([]byte("ke"))
	tests := []struct {
		name    string
		payload string
		want    []Finding
	}{
		{"clean", `{"request":{"data":{"password":"[Filtered]"}}}`, nil},
		{"removed leaked", `{"password":"` + pw.Value(123456) + `"}`, []Finding{{pw, 123456, true}}},
		{"masked ok", `{"note":"` + cc.Marker(9) + ` [Filtered]"}`, []Finding{{cc, 9, false}}},
		{"masked leaked", `{"note":"` + cc.Value(9) + `"}`, []Finding{{cc, 9, true}}},
		{"kept", `{"public_note":"` + keep.Value(3) + `"}`, []Finding{{keep, 3, false}}},
		{"truncated marker", `"rlcnry-pa-ab`, nil},
		{"unknown code", `"rlcnry-zz-aaaaa"`, nil},
		{"bad letters", `"rlcnry-pa-aa1aa"`, nil},
		{"two", pw.Value(0) + " " + pw.Value(1), []Finding{{pw, 0, true}, {pw, 1, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Finding
			Scan([]byte(tt.payload), func(f Finding) { got = append(got, f) })
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i].Kind.Code != tt.want[i].Kind.Code || got[i].Index != tt.want[i].Index || got[i].Leaked != tt.want[i].Leaked {
					t.Errorf("finding %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestScanAllocatesNothing(t *testing.T) {
	cc, _ := ByCode([]byte("cc"))
	b := []byte(strings.Repeat("x", 5000) + cc.Value(5) + strings.Repeat("y", 5000))
	n := 0
	allocs := testing.AllocsPerRun(100, func() { Scan(b, func(Finding) { n++ }) })
	if allocs != 0 {
		t.Errorf("Scan allocates %v per run", allocs)
	}
	if n != 101 {
		t.Errorf("found %d markers in 101 runs", n)
	}
}

func FuzzScan(f *testing.F) {
	f.Add([]byte(`rlcnry-cc-aaaaa 4111`))
	f.Add([]byte(`rlcnry-`))
	f.Fuzz(func(t *testing.T, b []byte) {
		Scan(b, func(fd Finding) {
			if fd.Index >= 26*26*26*26*26 {
				t.Fatalf("index %d out of range", fd.Index)
			}
		})
	})
}

func BenchmarkScan10KB(b *testing.B) {
	cc, _ := ByCode([]byte("cc"))
	payload := []byte(strings.Repeat(`{"a":"some text here","b":12345},`, 300) + cc.Marker(1) + ` [Filtered]`)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		Scan(payload, func(Finding) {})
	}
}

// FuzzIndexAnchored: indexAnchored finds what bytes.Index finds, for the
// two patterns it is used with, whatever byte anchors them.
func FuzzIndexAnchored(f *testing.F) {
	for _, s := range []string{"", "rlcnry-", "xrlcnry-cc-abcde", "rlcnryrlcnry-", "yyyyyrlcnry-", "rlcnr", "rlcnry", "typekey rlcnry-pw-aaaaa", `{"a":1,"_meta":{"x":{"":{"rem":[]}}}}`, `"_met_meta"`} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, off uint8) {
		for _, pat := range []string{Prefix, metaKey} {
			o := int(off) % len(pat)
			if got, want := indexAnchored(b, pat, o), bytes.Index(b, []byte(pat)); got != want {
				t.Fatalf("%q in %q (anchor %d): indexAnchored %d, bytes.Index %d", pat, b, o, got, want)
			}
		}
		if indexPrefix(b) != bytes.Index(b, []byte(Prefix)) {
			t.Fatalf("%q: indexPrefix", b)
		}
	})
}

func TestScrubRemark(t *testing.T) {
	for _, tt := range []struct {
		payload string
		want    bool
	}{
		{`{"user":{"ip_address":null},"_meta":{"user":{"ip_address":{"":{"rem":[["@ip","x"]]}}}}}`, true},
		{`{"_meta":{"a":{"":{"len":3}}}}`, false},
		{`{"rem":1,"x":"_meta"}`, false},
		{`{"a":"b"}`, false},
	} {
		if got := ScrubRemark([]byte(tt.payload)); got != tt.want {
			t.Errorf("%s: %v", tt.payload, got)
		}
	}
}
