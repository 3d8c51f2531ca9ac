package envelope

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of objects and arrays a header may have,
// counting the header object itself. serde_json, which Relay uses, stops at a
// recursion limit of 128 and fails once that budget reaches zero, so 127
// levels parse and the 128th does not.
const maxDepth = 127

// isSpace reports JSON whitespace (RFC 8259 §2), which serde_json skips
// before a value.
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// jsonError is a syntax error found at Offset. Msg is a constant, so that
// reporting it costs nothing until a ParseError is built.
type jsonError struct {
	off int
	msg string
}

// scanString checks the JSON string whose opening quote is at b[i] and returns
// the offset just past its closing quote and whether it holds escapes.
// Beyond RFC 8259 it rejects what serde_json rejects when it decodes a string:
// invalid UTF-8 and unpaired UTF-16 surrogate escapes.
func scanString(b []byte, i int) (end int, escaped bool, err *jsonError) {
	i++ // opening quote
	for {
		// Fast path: plain printable ASCII.
		for i < len(b) {
			c := b[i]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		if i >= len(b) {
			return i, escaped, &jsonError{len(b), "unexpected end of input in string"}
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			n, e := scanEscape(b, i)
			if e != nil {
				return n, escaped, e
			}
			i = n
		case c < 0x20:
			return i, escaped, &jsonError{i, "control character in string"}
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, escaped, &jsonError{i, "invalid UTF-8 in string"}
			}
			i += size
		}
	}
}

// scanEscape checks the escape sequence at b[i] == '\\' and returns the offset after it.
func scanEscape(b []byte, i int) (int, *jsonError) {
	if i+1 >= len(b) {
		return len(b), &jsonError{len(b), "unexpected end of input in string escape"}
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
		r, ok := hex4(b, i+2)
		if !ok {
			return i, &jsonError{i, "invalid \\u escape"}
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return i, &jsonError{i, "unpaired UTF-16 surrogate escape"}
		case r >= 0xD800 && r <= 0xDBFF:
			if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				if r2, ok := hex4(b, i+8); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
					return i + 12, nil
				}
			}
			return i, &jsonError{i, "unpaired UTF-16 surrogate escape"}
		}
		return i + 6, nil
	}
	return i, &jsonError{i, "invalid escape in string"}
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// scanNumber checks the JSON number starting at b[i] and returns the offset after it.
// Like serde_json it rejects numbers whose magnitude overflows a float64.
func scanNumber(b []byte, i int) (int, *jsonError) {
	start := i
	if b[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i >= len(b):
		return i, &jsonError{i, "unexpected end of input in number"}
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return i, &jsonError{i, "invalid number"}
	}
	intEnd, fracStart, fracEnd := i, i, i
	if i < len(b) && b[i] == '.' {
		i++
		fracStart = i
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, &jsonError{i, "invalid number: no digit after decimal point"}
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		fracEnd = i
	}
	exp := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			neg = b[i] == '-'
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, &jsonError{i, "invalid number: no digit in exponent"}
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			if exp < 1e6 { // beyond this the magnitude is decided anyway
				exp = exp*10 + int(b[i]-'0')
			}
			i++
		}
		if neg {
			exp = -exp
		}
	}
	if overflowsFloat64(b[start:i], b[intStart:intEnd], b[fracStart:fracEnd], exp) {
		return start, &jsonError{start, "number out of range"}
	}
	return i, nil
}

// overflowsFloat64 reports whether the number num, with integer digits
// intPart, fraction digits frac and exponent exp, is too big for a float64
// (|x| ≥ 2^1024 after rounding). It decides from the decimal magnitude and
// calls strconv only at the boundary, so it does not allocate.
func overflowsFloat64(num, intPart, frac []byte, exp int) bool {
	var mag int // x = d.ddd × 10^mag for its first non-zero digit d
	switch {
	case intPart[0] != '0':
		mag = len(intPart) - 1 + exp
	default:
		k := 0
		for k < len(frac) && frac[k] == '0' {
			k++
		}
		if k == len(frac) {
			return false // zero
		}
		mag = -(k + 1) + exp
	}
	switch {
	case mag < 308:
		return false
	case mag > 308:
		return true
	}
	f, err := strconv.ParseFloat(string(num), 64)
	return err != nil && (f > 1 || f < -1)
}

// scanValue checks the JSON value starting at b[i] (no leading whitespace) at
// nesting depth depth (the header object is depth 1) and returns the offset after it.
func scanValue(b []byte, i, depth int) (int, *jsonError) {
	if i >= len(b) {
		return i, &jsonError{i, "unexpected end of input, expected a value"}
	}
	switch c := b[i]; c {
	case '"':
		end, _, err := scanString(b, i)
		return end, err
	case '{', '[':
		if depth+1 > maxDepth {
			return i, &jsonError{i, "nesting deeper than 127 levels"}
		}
		if c == '{' {
			return scanObject(b, i, depth+1)
		}
		return scanArray(b, i, depth+1)
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			return scanNumber(b, i)
		}
		return i, &jsonError{i, "invalid character, expected a value"}
	}
}

func scanLiteral(b []byte, i int, lit string) (int, *jsonError) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return len(b), &jsonError{len(b), "unexpected end of input in literal"}
		}
		if b[i+k] != lit[k] {
			return i + k, &jsonError{i + k, "invalid literal"}
		}
	}
	return i, &jsonError{i, "invalid literal"} // unreachable
}

// scanObject checks a nested object at b[i] == '{'.
func scanObject(b []byte, i, depth int) (int, *jsonError) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return i, &jsonError{i, "unexpected end of input in object"}
		}
		if b[i] != '"' {
			return i, &jsonError{i, "invalid character, expected a string key"}
		}
		var err *jsonError
		if i, _, err = scanString(b, i); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &jsonError{i, "unexpected end of input in object"}
		}
		if b[i] != ':' {
			return i, &jsonError{i, "invalid character, expected ':'"}
		}
		if i, err = scanValue(b, skipSpace(b, i+1), depth); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &jsonError{i, "unexpected end of input in object"}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, &jsonError{i, "invalid character, expected ',' or '}'"}
		}
	}
}

// scanArray checks a nested array at b[i] == '['.
func scanArray(b []byte, i, depth int) (int, *jsonError) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err *jsonError
		if i, err = scanValue(b, i, depth); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &jsonError{i, "unexpected end of input in array"}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, &jsonError{i, "invalid character, expected ',' or ']'"}
		}
	}
}

// unquote decodes the contents of a JSON string that scanString accepted and
// that holds escapes. It allocates; strings without escapes are used in place.
func unquote(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				j = len(s) - i
			}
			out = append(out, s[i:i+j]...)
			i += j
			continue
		}
		switch s[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(s, i+2)
			if utf16.IsSurrogate(r) {
				r2, _ := hex4(s, i+8)
				r = utf16.DecodeRune(r, r2)
				i += 6
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default: // '"', '\\', '/'
			out = append(out, s[i+1])
		}
		i += 2
	}
	return out
}
