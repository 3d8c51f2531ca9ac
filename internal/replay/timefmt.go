package replay

import (
	"strconv"
	"time"
)

// Timestamps are shifted in place in the format they came in: RFC 3339
// strings keep their separator, number of fraction digits and zone suffix;
// numbers of seconds keep their number of fraction digits. Both are
// computed in decimal, so that a shift of zero writes the same bytes.

// Plausible epoch seconds for a number under a timestamp key: a number
// outside them (a relative offset, say) is left alone.
const (
	minEpochSeconds = 946684800  // 2000-01-01
	maxEpochSeconds = 4102444800 // 2100-01-01
)

// Plausible epoch milliseconds for a session's seq (Relay's default for a
// missing seq is the time in milliseconds).
const (
	minEpochMillis = minEpochSeconds * 1000
	maxEpochMillis = maxEpochSeconds * 1000
)

// timeString is a parsed RFC 3339 timestamp and the shape it was written in.
type timeString struct {
	ns     int64 // since the epoch, UTC
	sep    byte  // 'T', 't' or ' '
	frac   []byte
	zone   []byte // "Z", "+02:00", "+0200" or "" (read as UTC)
	offset int64  // the zone's offset in seconds
}

// parseTimeString parses YYYY-MM-DD[T ]HH:MM:SS[.fraction][zone] with a
// year in 1900..2200.
func parseTimeString(s []byte) (timeString, bool) {
	var t timeString
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':' {
		return t, false
	}
	switch s[10] {
	case 'T', 't', ' ':
		t.sep = s[10]
	default:
		return t, false
	}
	y, ok1 := atoiN(s[0:4])
	mo, ok2 := atoiN(s[5:7])
	d, ok3 := atoiN(s[8:10])
	h, ok4 := atoiN(s[11:13])
	mi, ok5 := atoiN(s[14:16])
	sec, ok6 := atoiN(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || y < 1900 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > 31 ||
		h > 23 || mi > 59 || sec > 59 {
		return t, false
	}
	civil := time.Date(y, time.Month(mo), d, h, mi, sec, 0, time.UTC)
	if civil.Day() != d { // 31 April and the like
		return t, false
	}
	rest := s[19:]
	var nanos int64
	if len(rest) > 0 && rest[0] == '.' {
		j := digits(rest, 1)
		if j == 1 {
			return t, false
		}
		t.frac = rest[1:j]
		nanos = fracNanos(t.frac)
		rest = rest[j:]
	}
	switch {
	case len(rest) == 0:
	case len(rest) == 1 && (rest[0] == 'Z' || rest[0] == 'z'):
	case (len(rest) == 6 && rest[3] == ':' || len(rest) == 5) && (rest[0] == '+' || rest[0] == '-'):
		oh, okh := atoiN(rest[1:3])
		om, okm := atoiN(rest[len(rest)-2:])
		if !okh || !okm || oh > 23 || om > 59 {
			return t, false
		}
		t.offset = int64(oh*3600 + om*60)
		if rest[0] == '-' {
			t.offset = -t.offset
		}
	default:
		return t, false
	}
	t.zone = rest
	t.ns = (civil.Unix()-t.offset)*1e9 + nanos
	return t, true
}

// appendShifted appends t moved by shift nanoseconds, in t's shape. It
// reports false (appending nothing) when the result would leave 4-digit years.
func (t timeString) appendShifted(dst []byte, shift int64) ([]byte, bool) {
	ns := t.ns + shift
	local := time.Unix(0, ns+t.offset*1e9).UTC()
	y := local.Year()
	if y < 1000 || y > 9999 {
		return dst, false
	}
	dst = pad(dst, y, 4)
	dst = append(dst, '-')
	dst = pad(dst, int(local.Month()), 2)
	dst = append(dst, '-')
	dst = pad(dst, local.Day(), 2)
	dst = append(dst, t.sep)
	dst = pad(dst, local.Hour(), 2)
	dst = append(dst, ':')
	dst = pad(dst, local.Minute(), 2)
	dst = append(dst, ':')
	dst = pad(dst, local.Second(), 2)
	if len(t.frac) > 0 {
		dst = append(dst, '.')
		dst = appendFrac(dst, int64(local.Nanosecond()), t.frac)
	}
	return append(dst, t.zone...), true
}

// timeNumber is a parsed number of seconds since the epoch.
type timeNumber struct {
	ns   int64
	frac []byte
}

// parseTimeNumber parses a plain decimal number of seconds (no sign or
// exponent) between 2000 and 2100.
func parseTimeNumber(s []byte) (timeNumber, bool) {
	var t timeNumber
	i := digits(s, 0)
	if i == 0 || i > 10 {
		return t, false
	}
	sec, err := strconv.ParseInt(string(s[:i]), 10, 64)
	if err != nil || sec < minEpochSeconds || sec >= maxEpochSeconds {
		return t, false
	}
	if i < len(s) {
		if s[i] != '.' {
			return t, false
		}
		j := digits(s, i+1)
		if j == i+1 || j != len(s) {
			return t, false
		}
		t.frac = s[i+1 : j]
	}
	t.ns = sec*1e9 + fracNanos(t.frac)
	return t, true
}

// appendShifted appends t moved by shift, with as many fraction digits.
func (t timeNumber) appendShifted(dst []byte, shift int64) ([]byte, bool) {
	ns := t.ns + shift
	if ns < 0 {
		return dst, false
	}
	dst = strconv.AppendInt(dst, ns/1e9, 10)
	if len(t.frac) > 0 {
		dst = append(dst, '.')
		dst = appendFrac(dst, ns%1e9, t.frac)
	}
	return dst, true
}

// parseSeq parses a session's seq when it is a time in milliseconds.
func parseSeq(s []byte) (int64, bool) {
	if len(s) < 12 || len(s) > 14 || digits(s, 0) != len(s) {
		return 0, false
	}
	v, err := strconv.ParseInt(string(s), 10, 64)
	return v, err == nil && v >= minEpochMillis && v < maxEpochMillis
}

// fracNanos reads up to the first 9 digits of a fraction of a second.
func fracNanos(frac []byte) int64 {
	var n int64
	for k := range 9 {
		n *= 10
		if k < len(frac) {
			n += int64(frac[k] - '0')
		}
	}
	return n
}

// appendFrac appends len(orig) fraction digits: those of nanos, then any
// digits orig had beyond nanoseconds, as they were.
func appendFrac(dst []byte, nanos int64, orig []byte) []byte {
	var nine [9]byte
	for k := 8; k >= 0; k-- {
		nine[k] = byte('0' + nanos%10)
		nanos /= 10
	}
	if len(orig) <= 9 {
		return append(dst, nine[:len(orig)]...)
	}
	dst = append(dst, nine[:]...)
	return append(dst, orig[9:]...)
}

func pad(dst []byte, v, width int) []byte {
	var buf [8]byte
	s := strconv.AppendInt(buf[:0], int64(v), 10)
	for k := len(s); k < width; k++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

func atoiN(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
