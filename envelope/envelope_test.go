package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// mark is put into test inputs where the expected error offset is; it is
// removed before parsing.
const mark = "‸"

func unmark(t testing.TB, in string) ([]byte, int) {
	t.Helper()
	off := strings.Index(in, mark)
	if off >= 0 && strings.Count(in, mark) != 1 {
		t.Fatalf("input %q has more than one mark", in)
	}
	return []byte(strings.Replace(in, mark, "", 1)), off
}

const eid = `"event_id":"9ec79c33ec9942ab8353589fcb2e04dc"`

// acceptCases are inputs Relay's parser accepts, with the item types and
// payloads Parse must find.
var acceptCases = []struct {
	name     string
	in       string
	types    []string
	payloads []string
}{
	{"lengths and one final LF", "{" + eid + "}\n{\"type\":\"event\",\"length\":2}\n{}\n{\"type\":\"attachment\",\"length\":5,\"filename\":\"a.txt\"}\nhello\n",
		[]string{"event", "attachment"}, []string{"{}", "hello"}},
	{"no final LF", "{}\n{\"type\":\"event\",\"length\":2}\n{}", []string{"event"}, []string{"{}"}},
	{"header only", "{}", nil, nil},
	{"header only with LF", "{" + eid + "}\n", nil, nil},
	{"no length, to next LF", "{}\n{\"type\":\"session\"}\n{\"sid\":1}\n{\"type\":\"event\"}\n{}\n", []string{"session", "event"}, []string{`{"sid":1}`, "{}"}},
	{"no length, to EOF", "{}\n{\"type\":\"session\"}\nabc", []string{"session"}, []string{"abc"}},
	{"no length, empty payload at EOF", "{}\n{\"type\":\"attachment\"}", []string{"attachment"}, []string{""}},
	{"no length, empty payload then LF", "{}\n{\"type\":\"attachment\"}\n\n{\"type\":\"attachment\"}\n\n", []string{"attachment", "attachment"}, []string{"", ""}},
	{"length 0 items (Relay test_deserialize_envelope_empty_item_newline)", "{" + eid + "}\n{\"type\":\"attachment\",\"length\":0}\n\n{\"type\":\"attachment\",\"length\":0}\n",
		[]string{"attachment", "attachment"}, []string{"", ""}},
	{"length 0 at EOF", "{}\n{\"type\":\"attachment\",\"length\":0}", []string{"attachment"}, []string{""}},
	{"LF, CR and binary inside a length payload", "{}\n{\"type\":\"attachment\",\"length\":10}\n\xef\xbb\xbfHello\r\n\n", []string{"attachment"}, []string{"\xef\xbb\xbfHello\r\n"}},
	{"unknown item type", "{}\n{\"type\":\"invalid_unknown\"}\nhelloworld\n", []string{"invalid_unknown"}, []string{"helloworld"}},
	{"empty type string", "{}\n{\"type\":\"\",\"length\":1}\nx\n", []string{""}, []string{"x"}},
	{"whitespace before headers", " \t{}\n  {\"type\":\"event\",\"length\":2}\n{}\n", []string{"event"}, []string{"{}"}},
	{"blank lines between items", "{}\n{\"type\":\"event\",\"length\":2}\n{}\n\n\r\n{\"type\":\"log\",\"length\":1}\nx", []string{"event", "log"}, []string{"{}", "x"}},
	{"header spanning lines", "{\n\"sent_at\" : \"2026-01-01T00:00:00Z\"\n}\n{\"type\":\n\"event\",\"o\":{\n\"a\" :\r\n[1,\n2]}}\n{}", []string{"event"}, []string{"{}"}},
	{"nested sdk and trace, escapes, numbers", `{"event_id":"9ec79c33-ec99-42ab-8353-589fcb2e04dc","sdk":{"name":"sentry.go","version":"0.1","packages":[{"name":"a","v":[1,2.5e3,-0.1,true,false,null]}]},"trace":{"trace_id":"771a43a4192642f0b136d5159a501700","public_key":"49d0f7386ad645858ae85020e393bef3","sample_rate":"0.5","sampled":true},"x":"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t"}` + "\n" +
		`{"type":"ev\u0065nt","length":2,"content_type":"application/json","item_count":null,"filename":null,"sampled":false}` + "\n{}\n",
		[]string{"event"}, []string{"{}"}},
	{"length null is absent", "{}\n{\"type\":\"event\",\"length\":null}\n{}\n", []string{"event"}, []string{"{}"}},
	{"length u32 max would be EOF, 0 is fine", "{}\n{\"type\":\"a\",\"length\":0,\"item_count\":4294967295}\n", []string{"a"}, []string{""}},
	{"sent_at, dsn and event_id null", `{"event_id":null,"dsn":null,"sent_at":null}` + "\n", nil, nil},
	{"braced and urn event ids", `{"event_id":"{9EC79C33-EC99-42AB-8353-589FCB2E04DC}"}` + "\n" + `{"type":"check_in","routing_hint":"urn:uuid:9ec79c33-ec99-42ab-8353-589fcb2e04dc"}` + "\n{}",
		[]string{"check_in"}, []string{"{}"}},
	{"nesting 127 deep", "{\"a\":" + strings.Repeat("[", 126) + strings.Repeat("]", 126) + "}", nil, nil},
	{"big integers and tiny floats", `{"a":123456789012345678901234567890,"b":1e-400,"c":-0,"d":0e999,"e":0.000e99999999999999999999}`, nil, nil},
	{"float64 limits", `{"a":1.7976931348623157e308,"b":-1.7976931348623157E+308,"c":0.00001e313,"d":179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000.0,"e":1e-99999999999}`, nil, nil},
	{"same key in nested objects", `{"a":{"k":1},"b":{"k":1}}` + "\n" + `{"type":"x","o":{"type":1,"length":"y"}}` + "\nz", []string{"x"}, []string{"z"}},
}

// rejectCases are inputs Relay rejects; the mark shows the offset reported.
var rejectCases = []struct {
	name string
	in   string
	rule Rule
}{
	{"empty body", mark, RuleEmpty},
	{"only whitespace", " \n\t" + mark, RuleHeaderInvalid},
	{"header not JSON", mark + "hello\n", RuleHeaderInvalid},
	{"header is an array", mark + "[]\n", RuleHeaderInvalid},
	{"header is a string", mark + "\"{}\"\n", RuleHeaderInvalid},
	{"header syntax error", `{"a":` + mark + "}\n", RuleHeaderInvalid},
	{"header truncated", `{"a":1` + mark, RuleHeaderInvalid},
	{"header trailing comma", `{"a":1,` + mark + "}", RuleHeaderInvalid},
	{"header single quotes", "{" + mark + "'a':1}", RuleHeaderInvalid},
	{"CRLF after envelope header", "{}" + mark + "\r\n", RuleMissingNewline},
	{"space after envelope header", "{}" + mark + " \n", RuleMissingNewline},
	{"two objects on the header line", "{}" + mark + "{}\n", RuleMissingNewline},
	{"CRLF after item header", "{}\n{\"type\":\"event\",\"length\":2}" + mark + "\r\n{}\n", RuleMissingNewline},
	{"CRLF after payload", "{}\n{\"type\":\"event\",\"length\":2}\n{}" + mark + "\r\n", RuleMissingNewline},
	{"two final LFs", "{}\n{\"type\":\"event\",\"length\":2}\n{}\n" + mark + "\n", RuleTrailingData},
	{"two final LFs after no-length payload", "{}\n{\"type\":\"event\"}\n{}\n" + mark + "\n", RuleTrailingData},
	{"header only and two LFs", "{}\n" + mark + "\n", RuleTrailingData},
	{"trailing spaces", "{}\n{\"type\":\"a\",\"length\":1}\nx\n" + mark + "  ", RuleTrailingData},
	{"length past the end", "{}\n{\"type\":\"event\",\"length\":20}\n{}\n" + mark, RuleUnexpectedEOF},
	{"length u32 max past the end", "{}\n{\"type\":\"event\",\"length\":4294967295}\n{}" + mark, RuleUnexpectedEOF},
	{"length with header at EOF", "{}\n{\"type\":\"event\",\"length\":1}" + mark, RuleUnexpectedEOF},
	{"length shorter than payload", "{}\n{\"type\":\"event\",\"length\":1}\n{" + mark + "}\n", RuleMissingNewline},
	{"no length, LF inside payload", "{}\n{\"type\":\"event\"}\n{\"a\":\n" + mark + "1}\n", RuleItemHeaderInvalid},
	{"item header not JSON", "{}\n" + mark + "hello\n", RuleItemHeaderInvalid},
	{"item header is an array", "{}\n" + mark + "[{\"type\":\"event\"}]\n", RuleItemHeaderInvalid},
	{"item header is a number", "{}\n" + mark + "5\n", RuleItemHeaderInvalid},
	{"item header truncated", "{}\n{\"type\":\"ev" + mark, RuleItemHeaderInvalid},
	{"missing type", "{}\n" + mark + "{\"length\":2}\n{}\n", RuleMissingType},
	{"empty item header", "{}\n" + mark + "{}\n", RuleMissingType},
	{"type is a number", "{}\n{\"type\":" + mark + "5}\n", RuleTypeNotString},
	{"type is null", "{}\n{\"type\": " + mark + "null}\n", RuleTypeNotString},
	{"type is an object", "{}\n{\"type\":" + mark + "{\"a\":\"event\"}}\n", RuleTypeNotString},
	{"internal type integration", "{}\n{\"type\":" + mark + "\"integration\"}\n", RuleInternalType},
	{"length is a string", "{}\n{\"type\":\"event\",\"length\":" + mark + "\"2\"}\n{}\n", RuleBadLength},
	{"length is negative", "{}\n{\"type\":\"event\",\"length\":" + mark + "-1}\n", RuleBadLength},
	{"length is minus zero", "{}\n{\"type\":\"event\",\"length\":" + mark + "-0}\n", RuleBadLength},
	{"length is fractional", "{}\n{\"type\":\"event\",\"length\":" + mark + "2.0}\n{}\n", RuleBadLength},
	{"length has an exponent", "{}\n{\"type\":\"event\",\"length\":" + mark + "2e0}\n{}\n", RuleBadLength},
	{"length above u32", "{}\n{\"type\":\"event\",\"length\":" + mark + "4294967296}\n", RuleBadLength},
	{"length far above u32", "{}\n{\"type\":\"event\",\"length\":" + mark + "99999999999999999999999}\n", RuleBadLength},
	{"length is true", "{}\n{\"type\":\"event\",\"length\":" + mark + "true}\n", RuleBadLength},
	{"item_count is negative", "{}\n{\"type\":\"log\",\"item_count\":" + mark + "-2}\n[]\n", RuleBadItemCount},
	{"item_count is a string", "{}\n{\"type\":\"log\",\"item_count\":" + mark + "\"2\"}\n[]\n", RuleBadItemCount},
	{"duplicate sent_at", `{"sent_at":"2026-01-01T00:00:00Z",` + mark + `"sent_at":"2026-01-01T00:00:01Z"}`, RuleDuplicateKey},
	{"duplicate unknown envelope key", `{"x":1,` + mark + `"x":1}`, RuleDuplicateKey},
	{"duplicate key via escape", `{"sent_at":null,` + mark + `"sent\u005fat":null}`, RuleDuplicateKey},
	{"duplicate type", "{}\n{\"type\":\"event\"," + mark + "\"type\":\"event\"}\n{}\n", RuleDuplicateKey},
	{"duplicate length", "{}\n{\"type\":\"event\",\"length\":2," + mark + "\"length\":2}\n{}\n", RuleDuplicateKey},
	{"event_id not a UUID", `{"event_id":` + mark + `"abc"}`, RuleHeaderInvalid},
	{"event_id with bad hex", `{"event_id":` + mark + `"9ec79c33ec9942ab8353589fcb2e04dg"}`, RuleHeaderInvalid},
	{"event_id is a number", `{"event_id":` + mark + `5}`, RuleHeaderInvalid},
	{"dsn is an object", `{"dsn":` + mark + `{}}`, RuleHeaderInvalid},
	{"sent_at is a number", `{"sent_at":` + mark + `1767225600}`, RuleHeaderInvalid},
	{"content_type is a number", "{}\n{\"type\":\"attachment\",\"content_type\":" + mark + "1}\n", RuleItemHeaderInvalid},
	{"filename is an array", "{}\n{\"type\":\"attachment\",\"filename\":" + mark + "[]}\n", RuleItemHeaderInvalid},
	{"sampled is null", "{}\n{\"type\":\"profile\",\"sampled\":" + mark + "null}\n", RuleItemHeaderInvalid},
	{"routing_hint not a UUID", "{}\n{\"type\":\"check_in\",\"routing_hint\":" + mark + "\"x\"}\n", RuleItemHeaderInvalid},
	{"invalid UTF-8 in header", "{\"a\":\"x" + mark + "\xff\"}", RuleHeaderInvalid},
	{"UTF-8 encoded surrogate", "{\"a\":\"" + mark + "\xed\xa0\x80\"}", RuleHeaderInvalid},
	{"lone high surrogate escape", `{"a":"x` + mark + `\ud83dx"}`, RuleHeaderInvalid},
	{"lone low surrogate escape", `{"a":"` + mark + `\ude00"}`, RuleHeaderInvalid},
	{"control character in string", "{\"a\":\"" + mark + "\t\"}", RuleHeaderInvalid},
	{"bad escape", `{"a":"` + mark + `\x"}`, RuleHeaderInvalid},
	{"number out of float64 range", `{"a":` + mark + `1e400}`, RuleHeaderInvalid},
	{"number just past float64 max", `{"a":` + mark + `1.7976931348623159e308}`, RuleHeaderInvalid},
	{"negative number past float64 max", `{"a":[` + mark + `-18e307]}`, RuleHeaderInvalid},
	{"fraction scaled past float64 max", `{"a":` + mark + `0.001e312}`, RuleHeaderInvalid},
	{"huge exponent", `{"a":` + mark + `1e99999999999999999999}`, RuleHeaderInvalid},
	{"integer with 310 digits", `{"a":` + mark + `1` + strings.Repeat("0", 309) + `}`, RuleHeaderInvalid},
	{"leading zero", `{"a":0` + mark + `1}`, RuleHeaderInvalid},
	{"nesting 128 deep", "{\"a\":" + strings.Repeat("[", 126) + mark + "[" + strings.Repeat("]", 127) + "}", RuleHeaderInvalid},
	{"BOM before header", mark + "\xef\xbb\xbf{}", RuleHeaderInvalid},
	{"item header error after good item", "{}\n{\"type\":\"a\",\"length\":1}\nx\n{\"type\":\"b\"," + mark + "}\n", RuleItemHeaderInvalid},
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			e, err := Parse(in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var types, payloads []string
			for _, it := range e.Items {
				types = append(types, it.Type)
				payloads = append(payloads, string(it.Payload))
			}
			if !reflect.DeepEqual(types, tc.types) || !reflect.DeepEqual(payloads, tc.payloads) {
				t.Errorf("got types %q payloads %q, want %q %q", types, payloads, tc.types, tc.payloads)
			}
			checkScanAgrees(t, in)
			checkRoundTrip(t, in)
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range rejectCases {
		t.Run(tc.name, func(t *testing.T) {
			in, off := unmark(t, tc.in)
			if off < 0 {
				t.Fatal("case has no offset mark")
			}
			e, err := Parse(in)
			var perr *ParseError
			if !errors.As(err, &perr) {
				t.Fatalf("Parse = %+v, %v; want a *ParseError", e, err)
			}
			if perr.Rule != tc.rule || perr.Offset != off {
				t.Errorf("got %v\nwant rule %q at offset %d", perr, tc.rule, off)
			}
			if !strings.HasPrefix(perr.Error(), "envelope: offset ") || !strings.Contains(perr.Error(), string(tc.rule)) {
				t.Errorf("Error() = %q", perr.Error())
			}
			checkScanAgrees(t, in)
		})
	}
}

// checkScanAgrees asserts that Scan and Parse agree on success, error, types
// and payload bounds for in.
func checkScanAgrees(t testing.TB, in []byte) {
	t.Helper()
	e, perr := Parse(in)
	var s Summary
	serr := Scan(in, &s)
	if !reflect.DeepEqual(perr, serr) {
		t.Fatalf("Parse error %v, Scan error %v", perr, serr)
	}
	if perr != nil {
		return
	}
	if string(s.EventID) != e.EventID || string(s.DSN) != e.DSN || string(s.SentAt) != e.SentAt {
		t.Errorf("header fields: Scan %q %q %q, Parse %q %q %q", s.EventID, s.DSN, s.SentAt, e.EventID, e.DSN, e.SentAt)
	}
	if len(s.Items) != len(e.Items) {
		t.Fatalf("Scan found %d items, Parse %d", len(s.Items), len(e.Items))
	}
	for i, si := range s.Items {
		pi := e.Items[i]
		if string(si.Type) != pi.Type || string(si.ContentType) != pi.ContentType || si.ItemCount != pi.ItemCount {
			t.Errorf("item %d: Scan %q %q %d, Parse %q %q %d", i, si.Type, si.ContentType, si.ItemCount, pi.Type, pi.ContentType, pi.ItemCount)
		}
		if !bytes.Equal(in[si.PayloadStart:si.PayloadEnd], pi.Payload) {
			t.Errorf("item %d: Scan payload %q, Parse %q", i, in[si.PayloadStart:si.PayloadEnd], pi.Payload)
		}
		if len(pi.Payload) > 0 && &in[si.PayloadStart] != &pi.Payload[0] {
			t.Errorf("item %d: Parse payload does not alias the input", i)
		}
	}
	checkScanLimit(t, in, s.Items)
}

// checkScanLimit asserts that ScanLimit accepts a valid envelope of n items
// at limit n exactly as Scan does and stops one short of it with
// RuleTooManyItems, keeping the first n-1.
func checkScanLimit(t testing.TB, in []byte, items []ItemSummary) {
	t.Helper()
	n := len(items)
	var s Summary
	if err := ScanLimit(in, &s, n); err != nil || !reflect.DeepEqual(s.Items, items) {
		t.Fatalf("ScanLimit at %d items = %v, %d items; Scan found %d", n, err, len(s.Items), n)
	}
	if n == 0 {
		return
	}
	err := ScanLimit(in, &s, n-1)
	var perr *ParseError
	if !errors.As(err, &perr) || perr.Rule != RuleTooManyItems {
		t.Fatalf("ScanLimit at %d of %d items = %v, want %s", n-1, n, err, RuleTooManyItems)
	}
	if !reflect.DeepEqual(s.Items, items[:n-1]) {
		t.Errorf("ScanLimit kept %d items, want the first %d", len(s.Items), n-1)
	}
	if perr.Offset < 0 || perr.Offset > len(in) {
		t.Errorf("offset %d outside the input", perr.Offset)
	}
}

// checkRoundTrip asserts that Parse(Marshal(Parse(in))) keeps types,
// payloads, content types, item counts, the envelope header and the other
// item-header fields, and that Marshal is a fixed point after one pass.
func checkRoundTrip(t testing.TB, in []byte) {
	t.Helper()
	e, err := Parse(in)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	out := e.Marshal()
	e2, err := Parse(out)
	if err != nil {
		t.Fatalf("Parse(Marshal()) = %v\ninput  %q\nmarshal %q", err, in, out)
	}
	tail := []byte("}") // a header-only envelope may have its header compacted
	if n := len(e.Items); n > 0 {
		tail = e.Items[n-1].Payload
	}
	if !bytes.HasSuffix(out, append(tail[:len(tail):len(tail)], '\n')) {
		t.Errorf("Marshal output does not end in the last payload or header and one LF: %q", out)
	}
	if !sameJSON(t, e.Header, e2.Header) || e.EventID != e2.EventID || e.DSN != e2.DSN || e.SentAt != e2.SentAt {
		t.Errorf("envelope header changed: %s -> %s", e.Header, e2.Header)
	}
	if len(e2.Items) != len(e.Items) {
		t.Fatalf("round trip: %d items, want %d\n%q", len(e2.Items), len(e.Items), out)
	}
	if bytes.IndexByte(e2.Header, '\n') >= 0 || !bytes.HasPrefix(out, e2.Header) {
		t.Errorf("Marshal wrote the envelope header over several lines or after whitespace: %q", out)
	}
	for i := range e2.Items {
		if h := e2.Items[i].Header; bytes.IndexByte(h, '\n') >= 0 || !bytes.HasPrefix(h, []byte(`{"type":`)) {
			t.Errorf("Marshal wrote item header %d as %q", i, h)
		}
	}
	for i := range e.Items {
		a, b := e.Items[i], e2.Items[i]
		if a.Type != b.Type || a.ContentType != b.ContentType || a.ItemCount != b.ItemCount || !bytes.Equal(a.Payload, b.Payload) {
			t.Errorf("item %d changed: %q %q %d %q -> %q %q %d %q", i, a.Type, a.ContentType, a.ItemCount, a.Payload, b.Type, b.ContentType, b.ItemCount, b.Payload)
		}
		ha, hb := itemHeaderMap(t, a.Header), itemHeaderMap(t, b.Header)
		if !reflect.DeepEqual(ha, hb) {
			t.Errorf("item %d header fields changed: %v -> %v", i, ha, hb)
		}
		if !bytes.Contains(b.Header, []byte(`"length":`)) {
			t.Errorf("item %d: Marshal wrote no length: %s", i, b.Header)
		}
	}
	if out2 := e2.Marshal(); !bytes.Equal(out, out2) {
		t.Errorf("Marshal not stable:\n%q\n%q", out, out2)
	}
}

func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// itemHeaderMap decodes an item header, dropping what Marshal may
// legitimately change: "length", and null or zero "content_type"/"item_count".
func itemHeaderMap(t testing.TB, h []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(h, &m); err != nil {
		t.Fatalf("%s: %v", h, err)
	}
	delete(m, "length")
	if v, ok := m["content_type"]; ok && (v == nil || v == "") {
		delete(m, "content_type")
	}
	if v, ok := m["item_count"]; ok && (v == nil || v == 0.0) {
		delete(m, "item_count")
	}
	return m
}

func TestParseHeaderFields(t *testing.T) {
	in := []byte(`{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","dsn":"https://k@o1.ingest.sentry.io/42","sent_at":"2026-01-01T00:00:00.5Z","sdk":{"name":"x"}}` + "\n" +
		`{"type":"log","length":2,"content_type":"application/vnd.sentry.items.log+json","item_count":3}` + "\n[]\n")
	e, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	if e.EventID != "9ec79c33ec9942ab8353589fcb2e04dc" || e.DSN != "https://k@o1.ingest.sentry.io/42" || e.SentAt != "2026-01-01T00:00:00.5Z" {
		t.Errorf("header fields %q %q %q", e.EventID, e.DSN, e.SentAt)
	}
	if string(e.Header) != string(in[:bytes.IndexByte(in, '\n')]) {
		t.Errorf("Header = %s", e.Header)
	}
	it := e.Items[0]
	if it.Type != "log" || it.ContentType != "application/vnd.sentry.items.log+json" || it.ItemCount != 3 || string(it.Payload) != "[]" {
		t.Errorf("item = %+v", it)
	}
	if string(it.Header) != `{"type":"log","length":2,"content_type":"application/vnd.sentry.items.log+json","item_count":3}` {
		t.Errorf("item Header = %s", it.Header)
	}
	// Appending to a payload must not overwrite the input.
	_ = append(it.Payload, 'X')
	if in[len(in)-1] != '\n' {
		t.Error("append to Payload overwrote the input")
	}

	// Escaped strings are decoded.
	e, err = Parse([]byte(`{"dsn":"a\/b\u00e9"}` + "\n" + `{"type":"\u0065vent","content_type":"text\/plain"}` + "\nx"))
	if err != nil {
		t.Fatal(err)
	}
	if e.DSN != "a/bé" || e.Items[0].Type != "event" || e.Items[0].ContentType != "text/plain" {
		t.Errorf("decoded %q %q %q", e.DSN, e.Items[0].Type, e.Items[0].ContentType)
	}
	var s Summary
	if err := Scan([]byte(`{}`+"\n"+`{"type":"\u0065vent"}`+"\nx"), &s); err != nil || string(s.Items[0].Type) != "event" {
		t.Errorf("Scan decoded type %q, %v", s.Items[0].Type, err)
	}
}

func TestScanReusesSummary(t *testing.T) {
	var s Summary
	if err := Scan([]byte("{\"dsn\":\"d\"}\n{\"type\":\"a\"}\n1\n{\"type\":\"b\"}\n2\n{\"type\":\"c\"}\n3"), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Items) != 3 || string(s.DSN) != "d" {
		t.Fatalf("got %d items, dsn %q", len(s.Items), s.DSN)
	}
	c := cap(s.Items)
	if err := Scan([]byte("{}\n{\"type\":\"z\",\"length\":1}\n9\n"), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Items) != 1 || string(s.Items[0].Type) != "z" || s.DSN != nil || cap(s.Items) != c {
		t.Errorf("after reuse: %+v (cap %d, was %d)", s, cap(s.Items), c)
	}
	// An error leaves the items read before it.
	err := Scan([]byte("{}\n{\"type\":\"a\",\"length\":1}\n1\n{\"type\":\"b\",\"length\":5}\n1"), &s)
	if err == nil || len(s.Items) != 1 || string(s.Items[0].Type) != "a" {
		t.Errorf("after error %v: %d items", err, len(s.Items))
	}
}

func TestMarshalBuilder(t *testing.T) {
	e := &Envelope{
		Items: []Item{
			{Type: "event", ContentType: "application/json", Payload: []byte(`{"message":"a\nb"}`)},
			{Type: "attachment", Payload: []byte("line1\nline2\n"), Extra: map[string]any{"filename": "log.txt", "attachment_type": "event.attachment", "length": 99, "type": "nope"}},
			{Type: "log", ContentType: "application/vnd.sentry.items.log+json", ItemCount: 2, Payload: []byte(`{"items":[{},{}]}`)},
			{Type: "weird \"type\"\n<&>", Payload: nil},
		},
	}
	got := string(e.Marshal())
	want := "{}\n" +
		`{"type":"event","length":18,"content_type":"application/json"}` + "\n" + `{"message":"a\nb"}` + "\n" +
		`{"type":"attachment","length":12,"attachment_type":"event.attachment","filename":"log.txt"}` + "\nline1\nline2\n\n" +
		`{"type":"log","length":17,"content_type":"application/vnd.sentry.items.log+json","item_count":2}` + "\n" + `{"items":[{},{}]}` + "\n" +
		`{"type":"weird \"type\"\n<&>","length":0}` + "\n\n"
	if got != want {
		t.Errorf("Marshal:\n%s\nwant:\n%s", got, want)
	}
	back, err := Parse([]byte(got))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Items) != 4 || back.Items[3].Type != "weird \"type\"\n<&>" || string(back.Items[1].Payload) != "line1\nline2\n" {
		t.Errorf("parsed back: %+v", back.Items)
	}
	// AppendTo appends.
	if a := e.AppendTo([]byte("prefix")); string(a) != "prefix"+want {
		t.Errorf("AppendTo: %q", a)
	}
	// A header written with json.Encoder (trailing LF) or indented is fixed up.
	e = &Envelope{Header: []byte("{\n  \"event_id\": \"9ec79c33ec9942ab8353589fcb2e04dc\"\n}\n")}
	if got := string(e.Marshal()); got != `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc"}`+"\n" {
		t.Errorf("indented header marshalled as %q", got)
	}
	// An empty header is written as {}.
	e = &Envelope{Header: []byte{}}
	if got := string(e.Marshal()); got != "{}\n" {
		t.Errorf("empty header marshalled as %q", got)
	}
	// Invalid UTF-8 in a type is replaced, not passed to Relay.
	e = &Envelope{Items: []Item{{Type: "a\xffb"}}}
	if back, err := Parse(e.Marshal()); err != nil || back.Items[0].Type != "a\ufffdb" {
		t.Errorf("invalid UTF-8 type: %v %+v", err, back)
	}
}

func TestMarshalExtraPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"bad"`) {
			t.Errorf("recover() = %v", r)
		}
	}()
	e := &Envelope{Items: []Item{{Type: "a", Extra: map[string]any{"bad": make(chan int)}}}}
	e.Marshal()
}

func TestParseReader(t *testing.T) {
	in := "{}\n{\"type\":\"event\",\"length\":2}\n{}\n"
	e, err := ParseReader(strings.NewReader(in), int64(len(in)))
	if err != nil || len(e.Items) != 1 {
		t.Fatalf("at the limit: %v", err)
	}
	_, err = ParseReader(strings.NewReader(in), int64(len(in)-1))
	var perr *ParseError
	if !errors.As(err, &perr) || perr.Rule != RuleTooLarge || perr.Offset != len(in)-1 {
		t.Errorf("over the limit: %v", err)
	}
	_, err = ParseReader(strings.NewReader(""), 10)
	if !errors.As(err, &perr) || perr.Rule != RuleEmpty {
		t.Errorf("empty: %v", err)
	}
	readErr := errors.New("boom")
	_, err = ParseReader(&failingReader{err: readErr}, 10)
	if !errors.Is(err, readErr) {
		t.Errorf("read error not wrapped: %v", err)
	}
	if _, err = ParseReader(strings.NewReader(in), -1); err == nil {
		t.Error("negative limit accepted")
	}
}

type failingReader struct{ err error }

func (r *failingReader) Read([]byte) (int, error) { return 0, r.err }

// TestScanDoesNotAllocate pins the property the fake upstream depends on:
// a warm Summary scans a realistic envelope without allocating.
func TestScanDoesNotAllocate(t *testing.T) {
	for _, withLength := range []bool{true, false} {
		in := benchEnvelope(withLength)
		var s Summary
		if err := Scan(in, &s); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(50, func() { _ = Scan(in, &s) }); n != 0 {
			t.Errorf("withLength=%v: %v allocations per Scan", withLength, n)
		}
	}
	// Numbers with exponents are range-checked without allocating too.
	in := []byte(`{"trace":{"sample_rate":1e-05,"x":[1.5E+300,-2e-308,0.1e10]},"sent_at":"2026-01-01T00:00:00Z"}` + "\n" + `{"type":"log","item_count":2}` + "\n[]")
	var s Summary
	if n := testing.AllocsPerRun(50, func() {
		if err := Scan(in, &s); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per Scan of a header with exponents", n)
	}
}
