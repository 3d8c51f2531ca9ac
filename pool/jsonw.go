package pool

import (
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// jw appends compact JSON to a byte slice. It is a hand-written writer rather
// than encoding/json because the pool builds hundreds of megabytes of JSON
// per second; it writes keys in call order, so output is deterministic.
type jw struct {
	b     []byte
	comma bool // a value was written at this level: the next one needs ','
}

func (w *jw) sep() {
	if w.comma {
		w.b = append(w.b, ',')
	}
}

func (w *jw) open() { w.sep(); w.b = append(w.b, '{'); w.comma = false }
func (w *jw) close() {
	w.b = append(w.b, '}')
	w.comma = true
}
func (w *jw) openArr() { w.sep(); w.b = append(w.b, '['); w.comma = false }
func (w *jw) closeArr() {
	w.b = append(w.b, ']')
	w.comma = true
}

// key writes "k": (k must not need escaping).
func (w *jw) key(k string) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
	w.comma = false
}

// obj starts an object under key k.
func (w *jw) obj(k string) { w.key(k); w.open() }

// arr starts an array under key k.
func (w *jw) arr(k string) { w.key(k); w.openArr() }

func (w *jw) str(s string) {
	w.sep()
	w.b = appendQuoted(w.b, s)
	w.comma = true
}

func (w *jw) strBytes(s []byte) {
	w.sep()
	w.b = appendQuoted(w.b, bytesView(s))
	w.comma = true
}

// strs writes the concatenation of parts as one JSON string without
// building it first.
func (w *jw) strs(parts ...string) {
	w.sep()
	w.b = append(w.b, '"')
	for _, p := range parts {
		w.b = appendEscaped(w.b, p)
	}
	w.b = append(w.b, '"')
	w.comma = true
}

// kstrs is key + strs.
func (w *jw) kstrs(k string, parts ...string) {
	w.key(k)
	w.sep()
	w.b = append(w.b, '"')
	for _, p := range parts {
		w.b = appendEscaped(w.b, p)
	}
	w.b = append(w.b, '"')
	w.comma = true
}

func (w *jw) int(v int64) {
	w.sep()
	w.b = strconv.AppendInt(w.b, v, 10)
	w.comma = true
}

func (w *jw) bool(v bool) {
	w.sep()
	w.b = strconv.AppendBool(w.b, v)
	w.comma = true
}

func (w *jw) null() {
	w.sep()
	w.b = append(w.b, "null"...)
	w.comma = true
}

// float writes v with prec decimals.
func (w *jw) float(v float64, prec int) {
	w.sep()
	w.b = strconv.AppendFloat(w.b, v, 'f', prec, 64)
	w.comma = true
}

// pow10 for fixed.
var pow10 = [...]int64{1, 10, 100, 1000, 10000, 100000, 1000000}

// fixed writes v/10^d with exactly d decimals (v ≥ 0, d ≤ 6): timestamps
// kept as integer milli- or microseconds, formatted without strconv's float
// machinery (a tenth of the build time went there).
func (w *jw) fixed(v int64, d int) {
	w.sep()
	w.b = strconv.AppendInt(w.b, v/pow10[d], 10)
	if d > 0 {
		w.b = append(w.b, '.')
		frac := v % pow10[d]
		for p := pow10[d] / 10; p > frac && p > 1; p /= 10 {
			w.b = append(w.b, '0')
		}
		w.b = strconv.AppendInt(w.b, frac, 10)
	}
	w.comma = true
}

func (w *jw) kfixed(k string, v int64, d int) { w.key(k); w.fixed(v, d) }

// raw writes pre-encoded JSON.
func (w *jw) raw(s string) {
	w.sep()
	w.b = append(w.b, s...)
	w.comma = true
}

// Key-value shorthands.
func (w *jw) kstr(k, v string)                  { w.key(k); w.str(v) }
func (w *jw) kint(k string, v int64)            { w.key(k); w.int(v) }
func (w *jw) kbool(k string, v bool)            { w.key(k); w.bool(v) }
func (w *jw) kfloat(k string, v float64, p int) { w.key(k); w.float(v, p) }

const hexDigits = "0123456789abcdef"

// appendQuoted appends s as a JSON string. Generated text is ASCII almost
// everywhere, so the loop copies runs of safe bytes at once.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s)
	return append(b, '"')
}

// bytesView is a read-only string view of b (no copy).
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// appendEscaped appends the JSON-escaped contents of s (no quotes).
func appendEscaped(b []byte, s string) []byte {
	p := unsafe.Pointer(unsafe.StringData(s))
	start := 0
	for i := 0; i < len(s); {
		// Fast path: skip 8 plain bytes at a time (SWAR: no byte < 0x20,
		// ≥ 0x80, '"' or '\\'). Unaligned 8-byte loads; byte order does not
		// matter for "any byte" tests.
		for i+8 <= len(s) {
			x := *(*uint64)(unsafe.Add(p, i))
			if (x-lo*0x20)&^x&hi|x&hi|zeroByte(x^lo*'"')|zeroByte(x^lo*'\\') != 0 {
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	return append(b, s[start:]...)
}

// plain marks the ASCII bytes that need no escaping in a JSON string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	lo uint64 = 0x0101010101010101
	hi uint64 = 0x8080808080808080
)

// zeroByte is non-zero iff some byte of x is zero (exact when no byte of x
// is ≥ 0x80, which the caller tests alongside).
func zeroByte(x uint64) uint64 { return (x - lo) &^ x & hi }
