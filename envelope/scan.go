package envelope

import (
	"bytes"
	"math"
	"strconv"
)

// reader walks an envelope's framing. Parse and Scan share it, so they apply
// the same rules and report the same errors.
type reader struct {
	b   []byte
	off int // where the next item header may start
	h   header
}

// envelopeHeader reads the envelope header and the newline after it.
// It mirrors Relay's Envelope::parse_headers.
func (r *reader) envelopeHeader() *ParseError {
	if len(r.b) == 0 {
		return &ParseError{Offset: 0, Rule: RuleEmpty, Detail: "no bytes"}
	}
	if skipSpace(r.b, 0) == len(r.b) {
		return &ParseError{Offset: len(r.b), Rule: RuleHeaderInvalid, Detail: "missing envelope header, only whitespace"}
	}
	if perr := r.h.scan(r.b, 0, envelopeHeader); perr != nil {
		return perr
	}
	if perr := requireNewline(r.b, r.h.end, "envelope header"); perr != nil {
		return perr
	}
	r.off = r.h.end + 1
	return nil
}

// item reads the next item into it and r.h. It returns false at the end of
// the input. It mirrors Relay's Envelope::parse_items and Item::parse.
func (r *reader) item(it *ItemSummary) (bool, *ParseError) {
	b := r.b
	if r.off >= len(b) {
		return false, nil
	}
	h := &r.h
	if skipSpace(b, r.off) == len(b) {
		// Relay reads leftover whitespace as the start of another item header
		// and fails with "unexpected end of file".
		return false, &ParseError{Offset: r.off, Rule: RuleTrailingData, Detail: "only whitespace where an item header should start (a second final newline?)"}
	}
	if perr := h.scan(b, r.off, itemHeader); perr != nil {
		return false, perr
	}
	if !h.hasType {
		return false, &ParseError{Offset: h.start, Rule: RuleMissingType, Detail: "item header has no \"type\""}
	}
	if string(h.typ.val) == "integration" {
		return false, &ParseError{Offset: h.typOff, Rule: RuleInternalType, Detail: "type \"integration\" is internal to Relay"}
	}
	if perr := requireNewline(b, h.end, "item header"); perr != nil {
		return false, perr
	}
	start := min(h.end+1, len(b))
	var end int
	if h.length >= 0 {
		if h.length > int64(len(b)-start) {
			return false, &ParseError{Offset: len(b), Rule: RuleUnexpectedEOF,
				Detail: "length " + strconv.FormatInt(h.length, 10) + " runs past the end; payload starts at " +
					strconv.Itoa(start) + ", " + strconv.Itoa(len(b)-start) + " bytes left"}
		}
		end = start + int(h.length)
		if perr := requireNewline(b, end, "payload"); perr != nil {
			return false, perr
		}
	} else if i := bytes.IndexByte(b[start:], '\n'); i >= 0 {
		end = start + i
	} else {
		end = len(b)
	}
	*it = ItemSummary{
		Type:         h.typ.val,
		ContentType:  h.contentType.val,
		ItemCount:    h.itemCount,
		PayloadStart: start,
		PayloadEnd:   end,
	}
	r.off = end + 1
	return true, nil
}

// requireNewline mirrors Relay's require_termination: the byte at off must be
// LF, or off must be the end of the input.
func requireNewline(b []byte, off int, after string) *ParseError {
	if off >= len(b) || b[off] == '\n' {
		return nil
	}
	return &ParseError{Offset: off, Rule: RuleMissingNewline, Detail: "byte " + strconv.QuoteRune(rune(b[off])) + " after " + after + ", want LF"}
}

// Scan checks b with exactly the rules of Parse and records where things are
// in s, without copying payloads. s is reset first; its Items capacity is
// reused, so a warm Summary scans without allocating (header strings with
// JSON escapes are the exception: they are decoded into fresh memory).
// On error s holds the items read before the error.
func Scan(b []byte, s *Summary) error { return ScanLimit(b, s, math.MaxInt) }

// ScanLimit is Scan that stops at the (maxItems+1)th item with a
// *ParseError of RuleTooManyItems (s then holds the first maxItems), so
// s.Items never holds more than maxItems+1 whatever the input: a receiver bounds the memory and time one
// envelope costs by its item count as well as by its size. Framing errors
// in the items before the limit are reported as Scan reports them.
func ScanLimit(b []byte, s *Summary, maxItems int) error {
	s.DSN, s.EventID, s.SentAt = nil, nil, nil
	s.Items = s.Items[:0]
	r := reader{b: b}
	if perr := r.envelopeHeader(); perr != nil {
		return perr
	}
	s.DSN, s.EventID, s.SentAt = r.h.dsn.val, r.h.eventID.val, r.h.sentAt.val
	for {
		if len(s.Items) > maxItems {
			s.Items = s.Items[:maxItems]
			return &ParseError{Offset: min(r.off, len(b)), Rule: RuleTooManyItems,
				Detail: "more than " + strconv.Itoa(maxItems) + " items"}
		}
		s.Items = append(s.Items, ItemSummary{})
		ok, perr := r.item(&s.Items[len(s.Items)-1])
		if !ok {
			s.Items = s.Items[:len(s.Items)-1]
			if perr != nil {
				return perr
			}
			return nil
		}
	}
}
