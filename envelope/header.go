package envelope

import (
	"bytes"
	"strconv"
)

// headerKind selects which fields of a header object are interpreted.
type headerKind uint8

const (
	envelopeHeader headerKind = iota
	itemHeader
)

// inlineKeys is how many keys of one header are checked for duplicates
// without allocating; bigger headers fall back to a map.
const inlineKeys = 32

// strField is a string-valued header field: its decoded contents (aliasing the
// input unless the JSON string holds escapes) and whether it was present and
// not null.
type strField struct {
	val []byte
	set bool
}

// header is what scanHeader learns from one header object.
type header struct {
	start, end int // offset of '{' and offset just past '}'

	// Envelope header fields.
	eventID, dsn, sentAt strField

	// Item header fields.
	typ         strField
	typOff      int
	hasType     bool
	contentType strField
	length      int64 // -1: absent or null
	itemCount   int

	// Keys seen so far, for duplicate detection.
	nkeys int
	keys  [inlineKeys][]byte
	more  map[string]struct{}
}

// scanHeader reads the header object at b[off:], after optional JSON
// whitespace, exactly as far as serde_json's stream reader would: up to and
// including the closing '}'. It checks JSON syntax, duplicate keys and the
// JSON types of the fields Relay deserializes into typed struct fields.
func (h *header) scan(b []byte, off int, kind headerKind) *ParseError {
	invalid := RuleHeaderInvalid
	if kind == itemHeader {
		invalid = RuleItemHeaderInvalid
	}
	h.nkeys = 0
	h.more = nil
	h.eventID, h.dsn, h.sentAt = strField{}, strField{}, strField{}
	h.typ, h.contentType = strField{}, strField{}
	h.hasType = false
	h.length = -1
	h.itemCount = 0

	i := skipSpace(b, off)
	h.start = i
	if i >= len(b) {
		return &ParseError{Offset: i, Rule: invalid, Detail: "unexpected end of input, expected '{'"}
	}
	if b[i] != '{' {
		if _, err := scanValue(b, i, 0); err != nil {
			return &ParseError{Offset: err.off, Rule: invalid, Detail: err.msg}
		}
		return &ParseError{Offset: i, Rule: invalid, Detail: "not a JSON object"}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		h.end = i + 1
		return nil
	}
	for {
		if i >= len(b) {
			return &ParseError{Offset: i, Rule: invalid, Detail: "unexpected end of input in object"}
		}
		if b[i] != '"' {
			return &ParseError{Offset: i, Rule: invalid, Detail: "invalid character, expected a string key"}
		}
		keyOff := i
		end, esc, err := scanString(b, i)
		if err != nil {
			return &ParseError{Offset: err.off, Rule: invalid, Detail: err.msg}
		}
		key := b[i+1 : end-1]
		if esc {
			key = unquote(key)
		}
		if h.seen(key) {
			return &ParseError{Offset: keyOff, Rule: RuleDuplicateKey, Detail: "key " + strconv.Quote(string(key))}
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return &ParseError{Offset: i, Rule: invalid, Detail: "unexpected end of input in object"}
		}
		if b[i] != ':' {
			return &ParseError{Offset: i, Rule: invalid, Detail: "invalid character, expected ':'"}
		}
		valOff := skipSpace(b, i+1)
		if i, err = scanValue(b, valOff, 1); err != nil {
			return &ParseError{Offset: err.off, Rule: invalid, Detail: err.msg}
		}
		if perr := h.field(kind, key, b[valOff:i], valOff); perr != nil {
			return perr
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return &ParseError{Offset: i, Rule: invalid, Detail: "unexpected end of input in object"}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			h.end = i + 1
			return nil
		default:
			return &ParseError{Offset: i, Rule: invalid, Detail: "invalid character, expected ',' or '}'"}
		}
	}
}

// seen records key and reports whether it was already present.
func (h *header) seen(key []byte) bool {
	if h.more != nil {
		if _, dup := h.more[string(key)]; dup {
			return true
		}
		h.more[string(key)] = struct{}{}
		return false
	}
	for _, k := range h.keys[:h.nkeys] {
		if bytes.Equal(k, key) {
			return true
		}
	}
	if h.nkeys < inlineKeys {
		h.keys[h.nkeys] = key
		h.nkeys++
		return false
	}
	h.more = make(map[string]struct{}, 2*inlineKeys)
	for _, k := range h.keys[:h.nkeys] {
		h.more[string(k)] = struct{}{}
	}
	h.more[string(key)] = struct{}{}
	return false
}

// field interprets one member. val is the raw JSON value, already checked.
func (h *header) field(kind headerKind, key, val []byte, off int) *ParseError {
	if kind == envelopeHeader {
		switch string(key) {
		case "event_id":
			return h.stringField(&h.eventID, key, val, off, RuleHeaderInvalid, checkUUID)
		case "dsn":
			return h.stringField(&h.dsn, key, val, off, RuleHeaderInvalid, nil)
		case "sent_at":
			return h.stringField(&h.sentAt, key, val, off, RuleHeaderInvalid, nil)
		}
		return nil
	}
	switch string(key) {
	case "type":
		h.hasType = true
		h.typOff = off
		if val[0] != '"' {
			return &ParseError{Offset: off, Rule: RuleTypeNotString, Detail: "type is " + jsonKind(val)}
		}
		return h.stringField(&h.typ, key, val, off, RuleTypeNotString, nil)
	case "length":
		n, perr := u32Field(key, val, off, RuleBadLength)
		h.length = n
		return perr
	case "item_count":
		n, perr := u32Field(key, val, off, RuleBadItemCount)
		if n > 0 {
			h.itemCount = int(n)
		}
		return perr
	case "content_type":
		return h.stringField(&h.contentType, key, val, off, RuleItemHeaderInvalid, nil)
	case "attachment_type", "filename", "platform":
		return h.stringField(nil, key, val, off, RuleItemHeaderInvalid, nil)
	case "routing_hint":
		return h.stringField(nil, key, val, off, RuleItemHeaderInvalid, checkUUID)
	case "metrics_extracted", "spans_extracted", "fully_normalized", "sampled":
		// Plain bool fields with a default: present means true or false, not null.
		if val[0] != 't' && val[0] != 'f' {
			return &ParseError{Offset: off, Rule: RuleItemHeaderInvalid, Detail: string(key) + " is " + jsonKind(val) + ", want a boolean"}
		}
	}
	return nil
}

// stringField checks a field Relay deserializes as Option<String-like>:
// a JSON string or null. check, if set, validates the decoded contents.
func (h *header) stringField(dst *strField, key, val []byte, off int, rule Rule, check func([]byte) bool) *ParseError {
	if val[0] == 'n' { // null: same as absent
		return nil
	}
	if val[0] != '"' {
		return &ParseError{Offset: off, Rule: rule, Detail: string(key) + " is " + jsonKind(val) + ", want a string"}
	}
	s := val[1 : len(val)-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		s = unquote(s)
	}
	if check != nil && !check(s) {
		return &ParseError{Offset: off, Rule: rule, Detail: string(key) + " is not a UUID"}
	}
	if dst != nil {
		*dst = strField{val: s, set: true}
	}
	return nil
}

// u32Field parses a field Relay deserializes as Option<u32>: null, or a JSON
// integer without sign, fraction or exponent that fits 32 bits. It returns -1
// for null.
func u32Field(key, val []byte, off int, rule Rule) (int64, *ParseError) {
	if val[0] == 'n' {
		return -1, nil
	}
	if val[0] < '0' || val[0] > '9' {
		return -1, &ParseError{Offset: off, Rule: rule, Detail: string(key) + " is " + jsonKind(val) + ", want an unsigned 32-bit integer"}
	}
	var n int64
	for _, c := range val {
		if c < '0' || c > '9' || n > 1<<32 {
			return -1, &ParseError{Offset: off, Rule: rule, Detail: string(key) + " " + truncate(val) + " is not an unsigned 32-bit integer"}
		}
		n = n*10 + int64(c-'0')
	}
	if n > 1<<32-1 {
		return -1, &ParseError{Offset: off, Rule: rule, Detail: string(key) + " " + truncate(val) + " exceeds 4294967295"}
	}
	return n, nil
}

func truncate(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "…"
	}
	return string(b)
}

// jsonKind names the JSON type of a checked value.
func jsonKind(val []byte) string {
	switch val[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// checkUUID accepts the forms Rust's uuid crate parses: 32 hex digits,
// the hyphenated 8-4-4-4-12 form, and that form in braces or after "urn:uuid:".
func checkUUID(s []byte) bool {
	switch len(s) {
	case 32:
		return allHex(s)
	case 36:
		return hyphenated(s)
	case 38:
		return s[0] == '{' && s[37] == '}' && hyphenated(s[1:37])
	case 45:
		return string(s[:9]) == "urn:uuid:" && hyphenated(s[9:])
	}
	return false
}

func hyphenated(s []byte) bool {
	return s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' &&
		allHex(s[:8]) && allHex(s[9:13]) && allHex(s[14:18]) && allHex(s[19:23]) && allHex(s[24:])
}

func allHex(s []byte) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
