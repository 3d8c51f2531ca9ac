package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/pool"
)

// siteKind says what a site of a file holds and how it is replaced.
type siteKind uint8

const (
	siteID         siteKind = iota + 1 // an id: new hex digits, same shape
	siteTimeString                     // an RFC 3339 timestamp: shifted
	siteTimeNumber                     // epoch seconds: shifted
	siteSeq                            // a session's seq in epoch milliseconds: shifted
	siteDSN                            // the envelope header's dsn: the target project's
	siteKey                            // the DSC's public_key: the target project's
	siteLength                         // an item header's length: the patched payload's
)

// site is a value of a file to be replaced: a string's contents (without
// its quotes) or a number, at data[start:end].
type site struct {
	start, end int32
	kind       siteKind
}

// itemSpan locates one item's sites.
type itemSpan struct {
	length      int32 // index in file.sites of the header's "length" value; -1 without
	first, last int32 // the sites inside the payload: file.sites[first:last]
	size        int32 // payload bytes as recorded
}

// file is one recorded envelope and what replaying it patches.
type file struct {
	name  string
	data  []byte
	sum   [32]byte
	sites []site // in offset order, not overlapping
	items []itemSpan
	// eventID is the index in sites of the envelope header's event_id (-1: none).
	eventID int32
	// ref is the envelope's reference time in Unix nanoseconds: its sent_at,
	// else its latest timestamp (hasRef false: it has none).
	ref    int64
	hasRef bool
	origin origin
	// dsnOrigin is scheme://host of the header's dsn, kept for the new one.
	dsnOrigin string

	kind   pool.Kind
	nItems int      // items; a container counts its records (item_count)
	types  []string // item types in order

	userAgent, forwardedFor string
}

// idKeys are the keys whose string values are ids that Relay or Sentry
// would deduplicate, merge or link on: each copy of the corpus gets new ones.
var idKeys = map[string]bool{
	"event_id": true, "trace_id": true, "span_id": true, "parent_span_id": true, "segment_id": true,
	"sid": true, "check_in_id": true, "replay_id": true, "profile_id": true, "profiler_id": true,
}

// timeKeys are the keys whose values are points in time, in epoch seconds
// or RFC 3339.
var timeKeys = map[string]bool{
	"timestamp": true, "start_timestamp": true, "end_timestamp": true, "started": true, "sent_at": true, "received": true,
}

// opaqueTypes are item types whose payloads are not JSON documents (or hold
// JSON followed by binary data): they are replayed untouched.
var opaqueTypes = map[string]bool{
	"attachment": true, "replay_recording": true, "replay_video": true, "unreal_report": true,
	"form_data": true, "statsd": true, "raw_security": true,
}

// analyzer collects a file's sites.
type analyzer struct {
	f      *file
	tmp    []site
	maxTS  int64
	anyTS  bool
	sentAt bool
}

// analyze parses one envelope file and finds what replaying it patches.
func analyze(name string, b []byte, m meta, hasMeta bool) (*file, error) {
	env, err := envelope.Parse(b)
	if err != nil {
		return nil, err
	}
	if len(env.Items) == 0 {
		return nil, errors.New("an envelope without items: nothing to replay")
	}
	f := &file{name: name, data: b, sum: sha256.Sum256(b), eventID: -1}
	if hasMeta {
		f.origin, f.userAgent, f.forwardedFor = m.origin, m.userAgent, m.forwardedFor
	}
	a := &analyzer{f: f}
	hs := skipWS(b, 0)
	he := hs + len(env.Header)
	if !walkJSON(b[hs:he], func(mb *member) { a.member(b[hs:he], hs, mb, true) }) {
		return nil, errors.New("envelope header: not JSON") // Parse checked it: a bug here
	}
	f.sites = append(f.sites, a.tmp...)
	pos := he + 1
	for _, it := range env.Items {
		ih := skipWS(b, pos)
		ihe := ih + len(it.Header)
		ps := min(ihe+1, len(b))
		pe := ps + len(it.Payload)
		if ihe > len(b) || pe > len(b) || len(it.Payload) > 0 && &it.Payload[0] != &b[ps] {
			return nil, errors.New("item offsets disagree with the envelope parser") // a bug here
		}
		a.item(&it, b, ih, ihe, ps, pe)
		pos = pe + 1
	}
	if !a.sentAt && a.anyTS {
		f.ref, f.hasRef = a.maxTS, true
	}
	if !slices.IsSortedFunc(f.sites, func(x, y site) int { return int(x.start - y.start) }) {
		return nil, errors.New("sites out of order") // a bug here
	}
	f.kind = kindOf(f.types)
	if f.userAgent == "" {
		f.userAgent = eventUserAgent(env)
	}
	return f, nil
}

// item records one item and its sites.
func (a *analyzer) item(it *envelope.Item, b []byte, hs, he, ps, pe int) {
	f := a.f
	f.types = append(f.types, it.Type)
	f.nItems += max(it.ItemCount, 1)
	span := itemSpan{length: -1, first: int32(len(f.sites)), last: int32(len(f.sites)), size: int32(pe - ps)}
	defer func() { f.items = append(f.items, span) }()
	payload := b[ps:pe]
	if opaqueTypes[it.Type] || it.ContentType == "application/octet-stream" {
		return
	}
	if i := skipWS(payload, 0); i >= len(payload) || payload[i] != '{' && payload[i] != '[' {
		return
	}
	a.tmp = a.tmp[:0]
	saveMax, saveAny := a.maxTS, a.anyTS
	if !walkJSON(payload, func(mb *member) { a.member(payload, ps, mb, false) }) || len(a.tmp) == 0 {
		a.maxTS, a.anyTS = saveMax, saveAny // not JSON: untouched, and its timestamps not counted
		return
	}
	lengthAt := -1
	var lengthEnd int
	hdr := b[hs:he]
	ok := walkJSON(hdr, func(mb *member) {
		if mb.depth == 1 && string(mb.key) == "length" && hdr[mb.start] != 'n' {
			lengthAt, lengthEnd = mb.start, mb.end
		}
	})
	if !ok || lengthAt < 0 && hasLength(hdr) {
		// A length this scanner cannot rewrite (written with escapes, or
		// as a number it does not read): the payload stays as it is.
		a.maxTS, a.anyTS = saveMax, saveAny
		return
	}
	if lengthAt >= 0 {
		span.length = int32(len(f.sites))
		f.sites = append(f.sites, site{start: int32(hs + lengthAt), end: int32(hs + lengthEnd), kind: siteLength})
	}
	span.first = int32(len(f.sites))
	f.sites = append(f.sites, a.tmp...)
	span.last = int32(len(f.sites))
}

// member records the site a member's value is, if any. buf is the JSON
// walked, at offset base of the file.
func (a *analyzer) member(buf []byte, base int, m *member, header bool) {
	v := buf[m.start:m.end]
	isStr := v[0] == '"'
	var content []byte
	plain := false
	if isStr {
		content = v[1 : len(v)-1]
		plain = bytes.IndexByte(content, '\\') < 0
	}
	add := func(k siteKind, start, end int) {
		a.tmp = append(a.tmp, site{start: int32(base + start), end: int32(base + end), kind: k})
	}
	if header {
		switch {
		case m.depth == 1 && string(m.key) == "dsn" && isStr:
			a.dsn(decodeString(v, content, plain))
			add(siteDSN, m.start+1, m.end-1)
			return
		case m.depth == 2 && string(m.parent) == "trace" && string(m.key) == "public_key" && isStr:
			if a.f.origin.key == "" && a.f.origin.id == 0 {
				a.f.origin.key = decodeString(v, content, plain)
			}
			add(siteKey, m.start+1, m.end-1)
			return
		}
	}
	key := string(m.key) // the map lookups below do not allocate for it
	switch {
	case idKeys[key] && isStr && plain && hasHexDigit(content):
		if header && m.depth == 1 && key == "event_id" {
			a.f.eventID = int32(len(a.tmp))
		}
		add(siteID, m.start+1, m.end-1)
	case timeKeys[key] && isStr && plain:
		if t, ok := parseTimeString(content); ok {
			add(siteTimeString, m.start+1, m.end-1)
			a.seen(t.ns, header && m.depth == 1 && key == "sent_at")
		}
	case timeKeys[key] && !isStr:
		if t, ok := parseTimeNumber(v); ok {
			add(siteTimeNumber, m.start, m.end)
			a.seen(t.ns, false)
		}
	case key == "seq" && !isStr:
		if ms, ok := parseSeq(v); ok {
			add(siteSeq, m.start, m.end)
			a.seen(ms*1e6, false)
		}
	}
}

// hasLength reports whether an item header has a "length" that is not null.
func hasLength(hdr []byte) bool {
	var h map[string]json.RawMessage
	if json.Unmarshal(hdr, &h) != nil {
		return true // envelope.Parse accepted it: assume the worst
	}
	v, ok := h["length"]
	return ok && string(v) != "null"
}

// seen notes a timestamp for the reference time.
func (a *analyzer) seen(ns int64, sentAt bool) {
	if sentAt {
		a.f.ref, a.f.hasRef, a.sentAt = ns, true, true
		return
	}
	if !a.anyTS || ns > a.maxTS {
		a.maxTS, a.anyTS = ns, true
	}
}

// dsn reads the original project from the header's dsn
// (scheme://key@host/[path/]id) and keeps its origin.
func (a *analyzer) dsn(s string) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return
	}
	a.f.dsnOrigin = u.Scheme + "://" + u.Host
	if a.f.origin.key != "" || a.f.origin.id != 0 {
		return // the manifest's
	}
	if u.User != nil {
		a.f.origin.key = u.User.Username()
	}
	p := strings.TrimSuffix(u.Path, "/")
	if id, err := strconv.ParseInt(p[strings.LastIndexByte(p, '/')+1:], 10, 64); err == nil {
		a.f.origin.id = id
	}
}

// decodeString returns a JSON string's value.
func decodeString(v, content []byte, plain bool) string {
	if plain {
		return string(content)
	}
	var s string
	_ = json.Unmarshal(v, &s) // walkJSON checked the syntax
	return s
}

func hasHexDigit(b []byte) bool {
	for _, c := range b {
		if isHex(c) {
			return true
		}
	}
	return false
}

// metaTypes are the item types that carry no data of their own: client
// reports and metrics, which Relay turns into outcomes and metrics (the
// fake upstream does not count an envelope of them alone as forwarded).
var metaTypes = map[string]bool{"client_report": true, "metric_buckets": true, "statsd": true, "metric_meta": true}

// CarriesData reports whether envelopes of kind k carry data: false for
// the kinds of envelopes that hold only client reports or metrics, which
// Relay does not forward as envelopes of their own.
func CarriesData(k pool.Kind) bool { return !metaTypes[string(k)] }

// kindOf is an envelope's kind from its item types: that of its first
// item that is neither a client report nor metrics (else of its first).
func kindOf(types []string) pool.Kind {
	t := types[0]
	for _, x := range types {
		if !metaTypes[x] {
			t = x
			break
		}
	}
	switch t {
	case "event":
		return pool.KindError
	case "transaction":
		return pool.KindTransaction
	case "session", "sessions":
		return pool.KindSession
	case "check_in":
		return pool.KindCheckIn
	case "log":
		return pool.KindLog
	}
	return pool.Kind(kindName(t))
}

// kindName makes an item type a kind name that is safe in file and
// directory names (blast --dump, relay-report's sections): letters,
// digits, '_', '-' and '.', at most 40 bytes.
func kindName(t string) string {
	b := []byte(t)
	if len(b) > 40 {
		b = b[:40]
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	if s := string(b); s != "" && strings.Trim(s, ".") != "" {
		return s
	}
	return "unnamed"
}

// eventUserAgent is the User-Agent of the first event's or transaction's
// request headers ("" if there is none).
func eventUserAgent(env *envelope.Envelope) string {
	for _, it := range env.Items {
		if it.Type != "event" && it.Type != "transaction" {
			continue
		}
		var ev struct {
			Request *struct {
				Headers json.RawMessage `json:"headers"`
			} `json:"request"`
		}
		if json.Unmarshal(it.Payload, &ev) != nil || ev.Request == nil {
			return ""
		}
		var obj map[string]any
		if json.Unmarshal(ev.Request.Headers, &obj) == nil {
			for k, v := range obj {
				if s, ok := v.(string); ok && strings.EqualFold(k, "User-Agent") {
					return s
				}
			}
			return ""
		}
		var pairs [][]any
		if json.Unmarshal(ev.Request.Headers, &pairs) == nil {
			for _, p := range pairs {
				if len(p) == 2 {
					k, _ := p[0].(string)
					if s, ok := p[1].(string); ok && strings.EqualFold(k, "User-Agent") {
						return s
					}
				}
			}
		}
		return ""
	}
	return ""
}
