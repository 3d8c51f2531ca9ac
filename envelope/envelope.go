// Package envelope reads and writes Sentry envelopes with Relay's exact framing.
package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// Rule names the framing rule an input broke.
type Rule string

// Rules reported in ParseError.Rule.
const (
	RuleEmpty             Rule = "empty envelope"
	RuleHeaderInvalid     Rule = "invalid envelope header"
	RuleDuplicateKey      Rule = "duplicate key in header"
	RuleMissingNewline    Rule = "missing newline after header or payload"
	RuleItemHeaderInvalid Rule = "invalid item header"
	RuleMissingType       Rule = "item header without type"
	RuleTypeNotString     Rule = "item type is not a string"
	RuleInternalType      Rule = "internal item type"
	RuleBadLength         Rule = "invalid item length"
	RuleBadItemCount      Rule = "invalid item_count"
	RuleUnexpectedEOF     Rule = "unexpected end of file"
	RuleTrailingData      Rule = "trailing data after last item"
	RuleTooLarge          Rule = "envelope too large"
)

// ParseError names the byte offset and the rule broken.
type ParseError struct {
	Offset int
	Rule   Rule
	Detail string
}

func (e *ParseError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("envelope: offset %d: %s", e.Offset, e.Rule)
	}
	return fmt.Sprintf("envelope: offset %d: %s (%s)", e.Offset, e.Rule, e.Detail)
}

// Item is one envelope item.
type Item struct {
	Header      []byte         // raw item-header JSON as received (nil when building: Marshal writes it)
	Type        string         // "type"
	ContentType string         // "content_type"; "" = absent
	ItemCount   int            // "item_count"; 0 = absent
	Extra       map[string]any // builder only: extra item-header fields; ignored by Parse
	Payload     []byte         // aliases the parsed input
}

// Envelope is a parsed envelope or one being built.
type Envelope struct {
	Header               []byte // raw envelope-header JSON object ("{}" if nil when marshalling)
	EventID, DSN, SentAt string // parsed from Header by Parse (Marshal ignores them)
	Items                []Item
}

// Summary is the allocation-free result of Scan.
type Summary struct {
	DSN, EventID, SentAt []byte // string contents of those header fields (nil if absent)
	Items                []ItemSummary
}

// ItemSummary describes one item found by Scan.
type ItemSummary struct {
	Type                     []byte
	ContentType              []byte
	ItemCount                int
	PayloadStart, PayloadEnd int
}

// Parse parses b with Relay's framing. Payloads alias b.
func Parse(b []byte) (*Envelope, error) {
	var s Summary
	if err := Scan(b, &s); err != nil {
		return nil, err
	}
	hs, he, _ := objectBounds(b, 0)
	e := &Envelope{Header: b[hs:he], EventID: string(s.EventID), DSN: string(s.DSN), SentAt: string(s.SentAt)}
	e.Items = make([]Item, len(s.Items))
	off := he + 1
	for i, it := range s.Items {
		ihs, ihe, _ := objectBounds(b, off)
		e.Items[i] = Item{
			Header:      b[ihs:ihe],
			Type:        string(it.Type),
			ContentType: string(it.ContentType),
			ItemCount:   it.ItemCount,
			Payload:     b[it.PayloadStart:it.PayloadEnd:it.PayloadEnd],
		}
		off = it.PayloadEnd + 1
	}
	return e, nil
}

// ParseReader reads at most maxBytes from r and parses them.
func ParseReader(r io.Reader, maxBytes int64) (*Envelope, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("envelope: read: %w", err)
	}
	if int64(len(b)) > maxBytes {
		return nil, &ParseError{Offset: int(maxBytes), Rule: RuleTooLarge, Detail: fmt.Sprintf("more than %d bytes", maxBytes)}
	}
	return Parse(b)
}

// objectBounds finds the JSON value starting at off (after whitespace) and returns its bounds.
func objectBounds(b []byte, off int) (start, end int, err error) {
	start = off
	for start < len(b) && (b[start] == ' ' || b[start] == '\t' || b[start] == '\n' || b[start] == '\r') {
		start++
	}
	dec := json.NewDecoder(bytes.NewReader(b[off:]))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return start, start, err
	}
	return start, off + int(dec.InputOffset()), nil
}

type headerField struct {
	key string
	raw json.RawMessage
}

// readHeader reads one header object at off. It returns its fields and the end offset.
func readHeader(b []byte, off int, invalid Rule) ([]headerField, int, *ParseError) {
	start := off
	for start < len(b) && (b[start] == ' ' || b[start] == '\t' || b[start] == '\n' || b[start] == '\r') {
		start++
	}
	if start < len(b) && b[start] != '{' {
		return nil, 0, &ParseError{Offset: start, Rule: invalid, Detail: "not a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(b[off:]))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, 0, &ParseError{Offset: start, Rule: invalid, Detail: err.Error()}
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, 0, &ParseError{Offset: start, Rule: invalid, Detail: "not a JSON object"}
	}
	var fields []headerField
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, 0, &ParseError{Offset: off + int(dec.InputOffset()), Rule: invalid, Detail: err.Error()}
		}
		k := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, 0, &ParseError{Offset: off + int(dec.InputOffset()), Rule: invalid, Detail: err.Error()}
		}
		if seen[k] {
			return nil, 0, &ParseError{Offset: off + int(dec.InputOffset()), Rule: RuleDuplicateKey, Detail: strconv.Quote(k)}
		}
		seen[k] = true
		fields = append(fields, headerField{k, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, 0, &ParseError{Offset: off + int(dec.InputOffset()), Rule: invalid, Detail: err.Error()}
	}
	return fields, off + int(dec.InputOffset()), nil
}

func requireNewline(b []byte, off int, what string) *ParseError {
	if off < len(b) && b[off] != '\n' {
		return &ParseError{Offset: off, Rule: RuleMissingNewline, Detail: fmt.Sprintf("byte %q after %s", b[off], what)}
	}
	return nil
}

func stringField(raw json.RawMessage) ([]byte, bool) {
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false
	}
	if s == nil {
		return nil, true
	}
	return []byte(*s), true
}

func u32Field(raw json.RawMessage) (int, bool) {
	if raw[0] == '-' || bytes.ContainsAny(raw, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw), 10, 32)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// Scan checks b with the same rules as Parse and records each item's bounds in s.
func Scan(b []byte, s *Summary) error {
	s.DSN, s.EventID, s.SentAt = nil, nil, nil
	s.Items = s.Items[:0]
	if len(b) == 0 {
		return &ParseError{Offset: 0, Rule: RuleEmpty}
	}
	fields, end, perr := readHeader(b, 0, RuleHeaderInvalid)
	if perr != nil {
		return perr
	}
	for _, f := range fields {
		var dst *[]byte
		switch f.key {
		case "dsn":
			dst = &s.DSN
		case "event_id":
			dst = &s.EventID
		case "sent_at":
			dst = &s.SentAt
		default:
			continue
		}
		v, ok := stringField(f.raw)
		if !ok {
			return &ParseError{Offset: 0, Rule: RuleHeaderInvalid, Detail: f.key + " is not a string"}
		}
		*dst = v
	}
	if perr := requireNewline(b, end, "envelope header"); perr != nil {
		return perr
	}
	off := end + 1
	for off < len(b) {
		ws := off
		for ws < len(b) && (b[ws] == ' ' || b[ws] == '\t' || b[ws] == '\n' || b[ws] == '\r') {
			ws++
		}
		if ws == len(b) {
			return &ParseError{Offset: off, Rule: RuleTrailingData, Detail: "only whitespace where an item header was expected"}
		}
		fields, hend, perr := readHeader(b, off, RuleItemHeaderInvalid)
		if perr != nil {
			return perr
		}
		var it ItemSummary
		length := -1
		hasType := false
		for _, f := range fields {
			switch f.key {
			case "type":
				v, ok := stringField(f.raw)
				if !ok || v == nil {
					return &ParseError{Offset: ws, Rule: RuleTypeNotString}
				}
				it.Type = v
				hasType = true
			case "length":
				if string(f.raw) == "null" {
					continue
				}
				n, ok := u32Field(f.raw)
				if !ok {
					return &ParseError{Offset: ws, Rule: RuleBadLength, Detail: string(f.raw)}
				}
				length = n
			case "item_count":
				if string(f.raw) == "null" {
					continue
				}
				n, ok := u32Field(f.raw)
				if !ok {
					return &ParseError{Offset: ws, Rule: RuleBadItemCount, Detail: string(f.raw)}
				}
				it.ItemCount = n
			case "content_type":
				v, ok := stringField(f.raw)
				if !ok {
					return &ParseError{Offset: ws, Rule: RuleItemHeaderInvalid, Detail: "content_type is not a string"}
				}
				it.ContentType = v
			}
		}
		if !hasType {
			return &ParseError{Offset: ws, Rule: RuleMissingType}
		}
		if string(it.Type) == "integration" {
			return &ParseError{Offset: ws, Rule: RuleInternalType}
		}
		if perr := requireNewline(b, hend, "item header"); perr != nil {
			return perr
		}
		ps := min(hend+1, len(b))
		var pe int
		if length >= 0 {
			pe = ps + length
			if pe > len(b) {
				return &ParseError{Offset: len(b), Rule: RuleUnexpectedEOF, Detail: fmt.Sprintf("payload of %d bytes at offset %d", length, ps)}
			}
			if perr := requireNewline(b, pe, "payload"); perr != nil {
				return perr
			}
		} else {
			i := bytes.IndexByte(b[ps:], '\n')
			if i < 0 {
				pe = len(b)
			} else {
				pe = ps + i
			}
		}
		it.PayloadStart, it.PayloadEnd = ps, pe
		s.Items = append(s.Items, it)
		off = pe + 1
	}
	return nil
}

// Marshal writes the envelope with "length" on every item and one trailing LF.
func (e *Envelope) Marshal() []byte {
	n := len(e.Header) + 2
	for i := range e.Items {
		n += len(e.Items[i].Payload) + 64
	}
	return e.AppendTo(make([]byte, 0, n))
}

// AppendTo appends the marshalled envelope to dst.
func (e *Envelope) AppendTo(dst []byte) []byte {
	if e.Header == nil {
		dst = append(dst, "{}"...)
	} else {
		dst = append(dst, e.Header...)
	}
	dst = append(dst, '\n')
	for i := range e.Items {
		it := &e.Items[i]
		dst = append(dst, `{"type":`...)
		dst = appendJSONString(dst, it.Type)
		dst = append(dst, `,"length":`...)
		dst = strconv.AppendInt(dst, int64(len(it.Payload)), 10)
		if it.ContentType != "" {
			dst = append(dst, `,"content_type":`...)
			dst = appendJSONString(dst, it.ContentType)
		}
		if it.ItemCount != 0 {
			dst = append(dst, `,"item_count":`...)
			dst = strconv.AppendInt(dst, int64(it.ItemCount), 10)
		}
		keys := make([]string, 0, len(it.Extra))
		for k := range it.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, err := json.Marshal(it.Extra[k])
			if err != nil {
				v = []byte("null")
			}
			dst = append(dst, ',')
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = append(dst, v...)
		}
		dst = append(dst, "}\n"...)
		dst = append(dst, it.Payload...)
		dst = append(dst, '\n')
	}
	return dst
}

func appendJSONString(dst []byte, s string) []byte {
	v, _ := json.Marshal(s)
	return append(dst, v...)
}
