package pool

import (
	"strconv"
	"unsafe"

	"github.com/relayload/relayload/envelope"
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
	w.b = envelope.AppendJSONString(w.b, s)
	w.comma = true
}

func (w *jw) strBytes(s []byte) {
	w.sep()
	w.b = envelope.AppendJSONString(w.b, bytesView(s))
	w.comma = true
}

// strs writes the concatenation of parts as one JSON string without
// building it first.
func (w *jw) strs(parts ...string) {
	w.sep()
	w.b = append(w.b, '"')
	for _, p := range parts {
		w.b = envelope.AppendJSONEscaped(w.b, p)
	}
	w.b = append(w.b, '"')
	w.comma = true
}

// kstrs is key + strs.
func (w *jw) kstrs(k string, parts ...string) { w.key(k); w.strs(parts...) }

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

// Key-value shorthands.
func (w *jw) kstr(k, v string)                  { w.key(k); w.str(v) }
func (w *jw) kint(k string, v int64)            { w.key(k); w.int(v) }
func (w *jw) kbool(k string, v bool)            { w.key(k); w.bool(v) }
func (w *jw) kfloat(k string, v float64, p int) { w.key(k); w.float(v, p) }

// hexDigits are the lowercase hex digits (IDs).
const hexDigits = "0123456789abcdef"

// bytesView is a read-only string view of b (no copy).
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
