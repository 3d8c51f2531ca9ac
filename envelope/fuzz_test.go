package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

var rulesByName = map[string]Rule{
	"RuleEmpty": RuleEmpty, "RuleHeaderInvalid": RuleHeaderInvalid, "RuleDuplicateKey": RuleDuplicateKey,
	"RuleMissingNewline": RuleMissingNewline, "RuleItemHeaderInvalid": RuleItemHeaderInvalid,
	"RuleMissingType": RuleMissingType, "RuleTypeNotString": RuleTypeNotString, "RuleInternalType": RuleInternalType,
	"RuleBadLength": RuleBadLength, "RuleBadItemCount": RuleBadItemCount, "RuleUnexpectedEOF": RuleUnexpectedEOF,
	"RuleTrailingData": RuleTrailingData,
}

func readTestdata(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.env"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata/%s files: %v", dir, err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

func TestTestdataValid(t *testing.T) {
	for name, b := range readTestdata(t, "valid") {
		t.Run(name, func(t *testing.T) {
			e, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			for i, it := range e.Items {
				if !json.Valid(it.Header) {
					t.Errorf("item %d header %s is not JSON", i, it.Header)
				}
			}
			checkScanAgrees(t, b)
			checkRoundTrip(t, b)
			r, err := ParseReader(bytes.NewReader(b), int64(len(b)))
			if err != nil || len(r.Items) != len(e.Items) {
				t.Errorf("ParseReader: %v", err)
			}
		})
	}
}

func TestTestdataInvalid(t *testing.T) {
	for name, b := range readTestdata(t, "invalid") {
		t.Run(name, func(t *testing.T) {
			want, ok := rulesByName[strings.SplitN(name, "-", 2)[0]]
			if !ok {
				t.Fatalf("file name %s does not start with a Rule constant", name)
			}
			_, err := Parse(b)
			var perr *ParseError
			if !errors.As(err, &perr) || perr.Rule != want {
				t.Fatalf("Parse = %v, want rule %q", err, want)
			}
			if perr.Offset < 0 || perr.Offset > len(b) {
				t.Errorf("offset %d outside the input", perr.Offset)
			}
			checkScanAgrees(t, b)
		})
	}
}

func addSeeds(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		for _, b := range readTestdata(f, dir) {
			f.Add(b)
		}
	}
	for _, tc := range acceptCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range rejectCases {
		in, _ := unmark(f, tc.in)
		f.Add(in)
	}
}

// FuzzParse checks that nothing panics, that Parse and Scan agree, that Parse
// agrees with the slow reference parser built on encoding/json, that what
// Parse accepts survives Marshal and Parse again, and that accepted headers
// are JSON objects by encoding/json's judgement.
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Add(benchEnvelope(true))
	f.Add(benchEnvelope(false))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkScanAgrees(t, b)
		checkReference(t, b)
		e, err := Parse(b)
		if err != nil {
			var perr *ParseError
			if !errors.As(err, &perr) || perr.Offset < 0 || perr.Offset > len(b) || perr.Rule == "" {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		if !json.Valid(e.Header) || e.Header[0] != '{' {
			t.Fatalf("accepted envelope header %q", e.Header)
		}
		for _, it := range e.Items {
			if !json.Valid(it.Header) || it.Header[0] != '{' {
				t.Fatalf("accepted item header %q", it.Header)
			}
		}
		checkRoundTrip(t, b)
	})
}

// FuzzScanHeader compares the hand-written JSON scanner with encoding/json
// plus the limits serde_json adds (UTF-8, paired surrogates, float64 range,
// nesting depth), and the header reader's duplicate-key check with a
// decoder-based one.
func FuzzScanHeader(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `[1,2]`, `"x"`, `{"a":"\ud83d\ude00"}`, `{"a":"\ud83d"}`, `{"a":1e400}`, `{"a":-0.5E-3}`,
		` {"a" : [ true , false , null ] } `, `{"a":{"b":{}}}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, "{\"a\":\"\xff\"}", `{"type":"x","length":3}`,
		strings.Repeat("[", 127) + strings.Repeat("]", 127), strings.Repeat("[", 128) + strings.Repeat("]", 128), `{"a":"\"}`, `01`, `-`, `1.`, `tru`,
		`[1.7976931348623157e308]`, `[1.7976931348623159e308]`, `[0.001e311]`, `[-179.76931348623157e306]`, `[0.0e400]`} {
		f.Add([]byte(s))
	}
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		start := skipSpace(b, 0)
		end, jerr := scanValue(b, start, 0)
		got := jerr == nil && skipSpace(b, end) == len(b)
		want := oracleValid(b)
		if got != want {
			t.Fatalf("scanner says valid=%v (err %v at %d), oracle %v for %q", got, jerr, end, want, b)
		}
		if want {
			dec := json.NewDecoder(bytes.NewReader(b))
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil || int(dec.InputOffset()) != end {
				t.Fatalf("value ends at %d, encoding/json says %d (%v)", end, dec.InputOffset(), err)
			}
		}

		// Header level: only objects, no duplicate top-level keys.
		// The header reader stops after the first object, so judge that prefix.
		var h header
		herr := h.scan(b, 0, envelopeHeader)
		if herr == nil {
			obj := b[:h.end]
			if _, dup := topLevelKeys(obj); !oracleValid(obj) || b[h.start] != '{' || dup {
				t.Fatalf("header %q accepted: valid=%v dup=%v", obj, oracleValid(obj), dup)
			}
		}
		keys, dup := topLevelKeys(b)
		if herr != nil && want && b[start] == '{' && !dup && !hasTypedKey(keys) {
			t.Fatalf("valid header %q rejected: %v", b, herr)
		}
		if herr != nil && herr.Rule == RuleDuplicateKey && !dup {
			t.Fatalf("duplicate reported for %q, decoder finds none", b)
		}
	})
}

// oracleValid is json.Valid tightened by the limits serde_json applies.
func oracleValid(b []byte) bool {
	if !json.Valid(b) || !utf8.Valid(b) || maxNesting(b) > maxDepth || hasLoneSurrogate(b) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
		if n, ok := tok.(json.Number); ok {
			if f, _ := strconv.ParseFloat(string(n), 64); math.IsInf(f, 0) {
				return false
			}
		}
	}
}

// maxNesting counts the deepest [ or { outside strings of valid JSON.
func maxNesting(b []byte) int {
	depth, deepest, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// hasLoneSurrogate reports a \u escape of a UTF-16 surrogate that is not part
// of a high-low pair, in valid JSON.
func hasLoneSurrogate(b []byte) bool {
	u := func(i int) int64 {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return -1
		}
		v, err := strconv.ParseInt(string(b[i+2:i+6]), 16, 32)
		if err != nil {
			return -1
		}
		return v
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		v := u(i)
		switch {
		case v >= 0xD800 && v <= 0xDBFF:
			if w := u(i + 6); w < 0xDC00 || w > 0xDFFF {
				return true
			}
			i += 11
		case v >= 0xDC00 && v <= 0xDFFF:
			return true
		default:
			i++ // skip the escaped character, so `\\` is one escape
		}
	}
	return false
}

// topLevelKeys decodes the top-level keys of a JSON object with encoding/json.
func topLevelKeys(b []byte) (keys []string, dup bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys, dup
		}
		k, _ := tok.(string)
		if seen[k] {
			dup = true
		}
		seen[k] = true
		keys = append(keys, k)
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return keys, dup
		}
	}
	return keys, dup
}

func hasTypedKey(keys []string) bool {
	for _, k := range keys {
		switch k {
		case "event_id", "dsn", "sent_at":
			return true
		}
	}
	return false
}

// TestNumberRangeAgainstStrconv compares the allocation-free float64 range
// check with strconv.ParseFloat on numbers around the float64 maximum.
func TestNumberRangeAgainstStrconv(t *testing.T) {
	mantissas := []string{"1", "1.7976931348623157", "1.7976931348623158", "1.7976931348623159", "17.976931348623157",
		"0.17976931348623157", "0.0017976931348623157", "179769313486231570", "9.99", "0.000", "-1.7976931348623157", "-1.8"}
	for _, m := range mantissas {
		for exp := 300; exp <= 315; exp++ {
			for _, e := range []string{"e", "E+", "e0"} {
				num := m + e + strconv.Itoa(exp)
				f, _ := strconv.ParseFloat(num, 64)
				_, err := scanNumber([]byte(num), 0)
				if (err != nil) != math.IsInf(f, 0) {
					t.Errorf("%s: scanNumber error %v, ParseFloat %v", num, err, f)
				}
			}
		}
	}
}
