package envelope

import (
	"unicode/utf8"
	"unsafe"
)

// AppendJSONString appends s to dst as a JSON string. Unlike encoding/json it
// does not escape <, > and &; like it, it replaces invalid UTF-8 with U+FFFD,
// because Relay rejects headers that are not UTF-8. The pool writes every
// JSON string with it (BenchmarkBuild20k in internal/pool), so it copies
// runs of plain bytes at once.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = AppendJSONEscaped(dst, s)
	return append(dst, '"')
}

// AppendJSONEscaped appends the contents of s as AppendJSONString writes
// them, without the quotes, so that a caller can write one JSON string from
// several parts.
func AppendJSONEscaped(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
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
		if plainJSON[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	return append(dst, s[start:]...)
}

// plainJSON marks the ASCII bytes that need no escaping in a JSON string.
var plainJSON = func() (t [256]bool) {
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
