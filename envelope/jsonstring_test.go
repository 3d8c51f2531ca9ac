package envelope

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	cases := []string{"", "a", "plain ascii text that is long enough", "quote\"inside and more text", "back\\slash in a longer string",
		"tab\there", "nl\nx", "ctl\x01\x1f", "ünïcödé long enough string", "\xff invalid utf8 here", strings.Repeat("x", 100) + "\"",
		"1234567\"", "12345678\\", "<html>&amp;</html>"}
	for _, c := range cases {
		got := AppendJSONString(nil, c)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q → %s: %v", c, got, err)
		}
		if want := viaEncodingJSON(t, c); back != want {
			t.Fatalf("%q → %s → %q", c, got, back)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("hello \"world\"\n")
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q → %s: %v", s, got, err)
		}
		if back != viaEncodingJSON(t, s) {
			t.Fatalf("%q → %q", s, back)
		}
	})
}

// viaEncodingJSON is what encoding/json makes of s (invalid UTF-8 bytes
// become U+FFFD one by one, as AppendJSONString does).
func viaEncodingJSON(t *testing.T, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back string
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back
}
