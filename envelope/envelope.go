package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Rule names the framing rule an input broke. Its value is a short
// human-readable phrase, stable enough to count errors by.
type Rule string

// Rules reported in ParseError.Rule, with the Relay error each corresponds to.
const (
	// RuleEmpty: the input has no bytes ("empty request body").
	RuleEmpty Rule = "empty envelope"
	// RuleHeaderInvalid: the envelope header is missing, not JSON, not an
	// object, or a typed field has the wrong type ("invalid envelope header").
	RuleHeaderInvalid Rule = "invalid envelope header"
	// RuleDuplicateKey: a key occurs twice at the top level of the envelope
	// header or an item header.
	RuleDuplicateKey Rule = "duplicate key in header"
	// RuleMissingNewline: the byte after a header or a length-delimited payload
	// is neither LF nor the end of input, e.g. CR of CRLF
	// ("missing newline after header or payload").
	RuleMissingNewline Rule = "missing newline after header or payload"
	// RuleItemHeaderInvalid: an item header is not JSON, not an object, or a
	// typed field has the wrong type ("invalid item header").
	RuleItemHeaderInvalid Rule = "invalid item header"
	// RuleMissingType: an item header has no "type" ("invalid item header").
	RuleMissingType Rule = "item header without type"
	// RuleTypeNotString: "type" is not a JSON string ("invalid item header").
	RuleTypeNotString Rule = "item type is not a string"
	// RuleInternalType: "type" is "integration", which only Relay may create.
	RuleInternalType Rule = "internal item type"
	// RuleBadLength: "length" is not an integer in 0..4294967295
	// ("invalid item header").
	RuleBadLength Rule = "invalid item length"
	// RuleBadItemCount: "item_count" is not an integer in 0..4294967295
	// ("invalid item header").
	RuleBadItemCount Rule = "invalid item_count"
	// RuleUnexpectedEOF: a "length" runs past the end of the input
	// ("unexpected end of file").
	RuleUnexpectedEOF Rule = "unexpected end of file"
	// RuleTrailingData: only whitespace follows the last item, such as a
	// second final LF ("unexpected end of file").
	RuleTrailingData Rule = "trailing data after last item"
	// RuleTooLarge: ParseReader's input exceeds its limit.
	RuleTooLarge Rule = "envelope too large"
	// RuleTooManyItems: ScanLimit found more items than its limit. Relay has
	// no such rule (its cap is max_envelope_size); a receiver uses it to
	// bound the work one envelope costs.
	RuleTooManyItems Rule = "too many items"
)

// ParseError is a rejected envelope: the byte offset where the fault was
// found and the rule broken. Detail says more, for people.
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

// Item is one envelope item, parsed or to be written.
type Item struct {
	// Header is the raw item-header JSON object as received. Leave it nil when
	// building; Marshal writes the header from the fields below and copies
	// Header's other members, if any.
	Header []byte
	// Type is "type", decoded. Unknown types are kept as they are.
	Type string
	// ContentType is "content_type"; "" when absent or null.
	ContentType string
	// ItemCount is "item_count"; 0 when absent, null or 0. Relay honours it
	// only for container-capable types (log, span, trace_metric, session, ...).
	ItemCount int
	// Extra holds further item-header fields to write, e.g. "filename".
	// Builder only: Parse leaves it nil.
	Extra map[string]any
	// Payload is the item's payload; after Parse it aliases the input.
	Payload []byte
}

// Envelope is a parsed envelope or one being built.
type Envelope struct {
	// Header is the raw envelope-header JSON object. When building it must be
	// a JSON object; empty means "{}".
	Header []byte
	// EventID, DSN and SentAt are the decoded string values of those header
	// fields, set by Parse ("" when absent or null). Marshal ignores them:
	// it writes Header.
	EventID, DSN, SentAt string
	Items                []Item
}

// Summary is what Scan records about an envelope, without copying.
type Summary struct {
	// DSN, EventID and SentAt are the contents of those JSON strings in the
	// envelope header, aliasing the input; nil when absent or null. Strings
	// with JSON escapes are decoded into fresh memory instead.
	DSN, EventID, SentAt []byte
	// Items is reset and refilled by each Scan, reusing its capacity.
	Items []ItemSummary
}

// ItemSummary describes one item found by Scan. Type and ContentType alias
// the input like Summary's strings.
type ItemSummary struct {
	Type        []byte
	ContentType []byte // nil when absent or null
	ItemCount   int    // 0 when absent
	// The payload is b[PayloadStart:PayloadEnd] of the scanned input b.
	PayloadStart, PayloadEnd int
}

// Parse parses b with Relay's framing (see the package documentation).
// Header and Payload slices alias b; b must not change while they are in use.
// Every failure is a *ParseError.
func Parse(b []byte) (*Envelope, error) {
	r := reader{b: b}
	if perr := r.envelopeHeader(); perr != nil {
		return nil, perr
	}
	e := &Envelope{
		Header: b[r.h.start:r.h.end:r.h.end],
		Items:  make([]Item, 0, 8),
	}
	e.EventID, e.DSN, e.SentAt = strings3(r.h.eventID.val, r.h.dsn.val, r.h.sentAt.val)
	var it ItemSummary
	for {
		ok, perr := r.item(&it)
		if perr != nil {
			return nil, perr
		}
		if !ok {
			return e, nil
		}
		e.Items = append(e.Items, Item{
			Header:      b[r.h.start:r.h.end:r.h.end],
			Type:        internType(it.Type),
			ContentType: internContentType(it.ContentType),
			ItemCount:   it.ItemCount,
			Payload:     b[it.PayloadStart:it.PayloadEnd:it.PayloadEnd],
		})
	}
}

// strings3 converts three byte slices to strings with one allocation.
func strings3(a, b, c []byte) (string, string, string) {
	var sb strings.Builder
	sb.Grow(len(a) + len(b) + len(c))
	sb.Write(a)
	sb.Write(b)
	sb.Write(c)
	s := sb.String()
	return s[:len(a)], s[len(a) : len(a)+len(b)], s[len(a)+len(b):]
}

// ParseReader reads the whole of r, at most maxBytes, and parses it.
// Input longer than maxBytes fails with a *ParseError of RuleTooLarge
// without reading more than maxBytes+1 bytes; read errors are returned wrapped.
func ParseReader(r io.Reader, maxBytes int64) (*Envelope, error) {
	if maxBytes < 0 {
		return nil, fmt.Errorf("envelope: negative maxBytes %d", maxBytes)
	}
	limit := maxBytes
	if limit < math.MaxInt64 {
		limit++
	}
	b, err := io.ReadAll(io.LimitReader(r, limit))
	if err != nil {
		return nil, fmt.Errorf("envelope: read: %w", err)
	}
	if int64(len(b)) > maxBytes {
		return nil, &ParseError{Offset: int(maxBytes), Rule: RuleTooLarge, Detail: "more than " + strconv.FormatInt(maxBytes, 10) + " bytes"}
	}
	return Parse(b)
}

// internType returns the item types Sentry defines as constant strings, so
// parsing them does not allocate.
func internType(b []byte) string {
	switch string(b) {
	case "event":
		return "event"
	case "transaction":
		return "transaction"
	case "attachment":
		return "attachment"
	case "session":
		return "session"
	case "sessions":
		return "sessions"
	case "check_in":
		return "check_in"
	case "log":
		return "log"
	case "span":
		return "span"
	case "otel_log":
		return "otel_log"
	case "client_report":
		return "client_report"
	case "user_report":
		return "user_report"
	case "feedback":
		return "feedback"
	case "profile":
		return "profile"
	case "profile_chunk":
		return "profile_chunk"
	case "replay_event":
		return "replay_event"
	case "replay_recording":
		return "replay_recording"
	case "replay_video":
		return "replay_video"
	case "statsd":
		return "statsd"
	case "metric_buckets":
		return "metric_buckets"
	case "trace_metric":
		return "trace_metric"
	case "form_data":
		return "form_data"
	case "security":
		return "security"
	case "raw_security":
		return "raw_security"
	case "nel":
		return "nel"
	case "unreal_report":
		return "unreal_report"
	}
	return string(b)
}

// internContentType does for common content types what internType does for types.
func internContentType(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case "application/json":
		return "application/json"
	case "application/octet-stream":
		return "application/octet-stream"
	case "text/plain":
		return "text/plain"
	case "application/vnd.sentry.items.log+json":
		return "application/vnd.sentry.items.log+json"
	case "application/vnd.sentry.items.span.v2+json":
		return "application/vnd.sentry.items.span.v2+json"
	case "application/vnd.sentry.items.trace-metric+json":
		return "application/vnd.sentry.items.trace-metric+json"
	}
	return string(b)
}

// Marshal returns the envelope in Relay's framing; see AppendTo.
func (e *Envelope) Marshal() []byte {
	n := len(e.Header) + 3
	for i := range e.Items {
		it := &e.Items[i]
		n += len(it.Payload) + len(it.Type) + len(it.ContentType) + 64 + 32*len(it.Extra)
	}
	return e.AppendTo(make([]byte, 0, n))
}

// AppendTo appends the envelope in Relay's framing to dst and returns the
// extended slice:
//
//	<Header, or {} if empty>\n
//	{"type":T,"length":N[,"content_type":C][,"item_count":K][,extra...]}\n
//	<payload>\n
//	...
//
// Every item gets an explicit "length", so payloads may hold any bytes,
// LF included, and the output ends with exactly one LF. Header is written
// as given except that surrounding JSON whitespace is trimmed and a header
// spanning several lines is compacted onto one; it must be a JSON object,
// which is the caller's responsibility (Parse(Marshal()) reports it if not).
// The item header is rebuilt from Type, ContentType, ItemCount (written if
// non-zero), then the other top-level members of Item.Header, if set (as
// after Parse, so that "filename" and the like survive a round trip; copied
// raw, in their order, compacted if they span lines), then Extra (sorted by
// key). Typed fields win over
// Header and Extra members of the same name, and Extra wins over Header, so
// no key is written twice. AppendTo panics if
// an Extra value cannot be encoded by encoding/json, as that is a bug in the
// caller, like a bad format string.
func (e *Envelope) AppendTo(dst []byte) []byte {
	dst = appendHeader(dst, e.Header)
	dst = append(dst, '\n')
	for i := range e.Items {
		it := &e.Items[i]
		dst = append(dst, `{"type":`...)
		dst = AppendJSONString(dst, it.Type)
		dst = append(dst, `,"length":`...)
		dst = strconv.AppendInt(dst, int64(len(it.Payload)), 10)
		if it.ContentType != "" {
			dst = append(dst, `,"content_type":`...)
			dst = AppendJSONString(dst, it.ContentType)
		}
		if it.ItemCount != 0 {
			dst = append(dst, `,"item_count":`...)
			dst = strconv.AppendInt(dst, int64(it.ItemCount), 10)
		}
		if len(it.Header) > 0 {
			dst = appendMembers(dst, it.Header, it.Extra)
		}
		if len(it.Extra) > 0 {
			dst = appendExtra(dst, it.Extra)
		}
		dst = append(dst, "}\n"...)
		dst = append(dst, it.Payload...)
		dst = append(dst, '\n')
	}
	return dst
}

func appendHeader(dst, h []byte) []byte {
	h = bytes.TrimFunc(h, func(r rune) bool { return r < utf8.RuneSelf && isSpace(byte(r)) })
	if len(h) == 0 {
		return append(dst, "{}"...)
	}
	return appendOneLine(dst, h)
}

// appendOneLine appends the JSON text v, compacted if it spans lines, so that
// headers stay on one line as the protocol recommends.
func appendOneLine(dst, v []byte) []byte {
	if bytes.IndexByte(v, '\n') < 0 {
		return append(dst, v...)
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, v); err != nil {
		// Not JSON: write it as it is and let the reader report it.
		return append(dst, v...)
	}
	return buf.Bytes()
}

// reservedItemKeys are the item-header keys AppendTo writes itself.
var reservedItemKeys = [...]string{"type", "length", "content_type", "item_count"}

// appendMembers appends ",key:value" for each top-level member of the raw
// item header hdr whose key is neither reserved nor in extra. Members are
// copied as received. Should hdr not be a valid JSON object, copying stops at
// the first fault, so the output stays valid JSON.
func appendMembers(dst, hdr []byte, extra map[string]any) []byte {
	i := skipSpace(hdr, 0)
	if i >= len(hdr) || hdr[i] != '{' {
		return dst
	}
	i = skipSpace(hdr, i+1)
	for i < len(hdr) && hdr[i] == '"' {
		keyEnd, esc, err := scanString(hdr, i)
		if err != nil {
			return dst
		}
		key := hdr[i+1 : keyEnd-1]
		if esc {
			key = unquote(key)
		}
		j := skipSpace(hdr, keyEnd)
		if j >= len(hdr) || hdr[j] != ':' {
			return dst
		}
		valStart := skipSpace(hdr, j+1)
		valEnd, verr := scanValue(hdr, valStart, 1)
		if verr != nil {
			return dst
		}
		_, inExtra := extra[string(key)]
		if !inExtra && !slices.Contains(reservedItemKeys[:], string(key)) {
			dst = append(dst, ',')
			dst = append(dst, hdr[i:keyEnd]...)
			dst = append(dst, ':')
			dst = appendOneLine(dst, hdr[valStart:valEnd])
		}
		i = skipSpace(hdr, valEnd)
		if i >= len(hdr) || hdr[i] != ',' {
			return dst
		}
		i = skipSpace(hdr, i+1)
	}
	return dst
}

func appendExtra(dst []byte, extra map[string]any) []byte {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if !slices.Contains(reservedItemKeys[:], k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, err := json.Marshal(extra[k])
		if err != nil {
			panic(fmt.Sprintf("envelope: item header field %q: %v", k, err))
		}
		dst = append(dst, ',')
		dst = AppendJSONString(dst, k)
		dst = append(dst, ':')
		dst = append(dst, v...)
	}
	return dst
}
