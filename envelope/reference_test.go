package envelope

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// refItem is what the reference parser finds for an item.
type refItem struct {
	typ        string
	start, end int
}

// uuidRe lists the UUID forms of Rust's uuid crate: simple, hyphenated, braced, URN.
var uuidRe = regexp.MustCompile(strings.ReplaceAll(`^(?:[0-9a-fA-F]{32}|H|\{H\}|urn:uuid:H)$`, "H",
	`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`))
var u32Re = regexp.MustCompile(`^(?:0|[1-9][0-9]{0,9})$`)

// refParse is a slow, independent statement of the framing rules, written
// with encoding/json and the oracle of FuzzScanHeader, for differential
// testing. It reports only whether the input is accepted and the items.
func refParse(b []byte) ([]refItem, bool) {
	if len(b) == 0 {
		return nil, false
	}
	hdr, end, ok := refHeader(b, 0)
	if !ok || !refTerminated(b, end) {
		return nil, false
	}
	if v, has := hdr["event_id"]; has && v != nil {
		s, isStr := v.(string)
		if !isStr || !refUUID(s) {
			return nil, false
		}
	}
	for _, k := range []string{"dsn", "sent_at"} {
		if v, has := hdr[k]; has && v != nil {
			if _, isStr := v.(string); !isStr {
				return nil, false
			}
		}
	}
	var items []refItem
	for off := end + 1; off < len(b); {
		h, end, ok := refHeader(b, off)
		if !ok {
			return nil, false
		}
		typ, isStr := h["type"].(string)
		if !isStr || typ == "integration" {
			return nil, false
		}
		length, ok := refU32(h, "length")
		if _, okCount := refU32(h, "item_count"); !ok || !okCount {
			return nil, false
		}
		for _, k := range []string{"content_type", "attachment_type", "filename", "platform", "routing_hint"} {
			if v, has := h[k]; has && v != nil {
				s, isStr := v.(string)
				if !isStr || k == "routing_hint" && !refUUID(s) {
					return nil, false
				}
			}
		}
		for _, k := range []string{"metrics_extracted", "spans_extracted", "fully_normalized", "sampled"} {
			if v, has := h[k]; has {
				if _, isBool := v.(bool); !isBool {
					return nil, false
				}
			}
		}
		if !refTerminated(b, end) {
			return nil, false
		}
		start := min(end+1, len(b))
		var stop int
		if length >= 0 {
			stop = start + int(length)
			if stop > len(b) || !refTerminated(b, stop) {
				return nil, false
			}
		} else if i := bytes.IndexByte(b[start:], '\n'); i >= 0 {
			stop = start + i
		} else {
			stop = len(b)
		}
		items = append(items, refItem{typ, start, stop})
		off = stop + 1
	}
	return items, true
}

func refUUID(s string) bool { return uuidRe.MatchString(s) }

func refU32(h map[string]any, k string) (int64, bool) {
	v, has := h[k]
	if !has || v == nil {
		return -1, true
	}
	n, isNum := v.(json.Number)
	if !isNum || !u32Re.MatchString(string(n)) {
		return -1, false
	}
	u, err := strconv.ParseUint(string(n), 10, 32)
	return int64(u), err == nil
}

func refTerminated(b []byte, off int) bool { return off >= len(b) || b[off] == '\n' }

// refHeader decodes the JSON object after optional whitespace at off.
func refHeader(b []byte, off int) (map[string]any, int, bool) {
	i := off
	for i < len(b) && bytes.IndexByte([]byte(" \t\r\n"), b[i]) >= 0 {
		i++
	}
	if i == len(b) || b[i] != '{' {
		return nil, 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(b[i:]))
	var raw json.RawMessage
	if dec.Decode(&raw) != nil {
		return nil, 0, false
	}
	if !oracleValid(raw) {
		return nil, 0, false
	}
	if _, dup := topLevelKeys(raw); dup {
		return nil, 0, false
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&m) != nil {
		return nil, 0, false
	}
	return m, i + int(dec.InputOffset()), true
}

// checkReference asserts Parse agrees with refParse on acceptance and items.
func checkReference(t testing.TB, b []byte) {
	t.Helper()
	want, wantOK := refParse(b)
	e, err := Parse(b)
	if (err == nil) != wantOK {
		t.Fatalf("Parse error %v, reference accepts=%v, input %q", err, wantOK, b)
	}
	if err != nil {
		return
	}
	if len(e.Items) != len(want) {
		t.Fatalf("Parse found %d items, reference %d", len(e.Items), len(want))
	}
	for i, it := range e.Items {
		w := want[i]
		if it.Type != w.typ || !bytes.Equal(it.Payload, b[w.start:w.end]) {
			t.Errorf("item %d: %q %q, reference %q %q", i, it.Type, it.Payload, w.typ, b[w.start:w.end])
		}
	}
}

func TestReferenceAgrees(t *testing.T) {
	for _, tc := range acceptCases {
		checkReference(t, []byte(tc.in))
	}
	for _, tc := range rejectCases {
		in, _ := unmark(t, tc.in)
		checkReference(t, in)
	}
	for _, dir := range []string{"valid", "invalid"} {
		for _, b := range readTestdata(t, dir) {
			checkReference(t, b)
		}
	}
}
