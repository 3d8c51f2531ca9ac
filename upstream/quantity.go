package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// errQuantity marks a quantity that is not a count: negative, fractional,
// beyond 2⁶³−1, or not a JSON number at all.
var errQuantity = errors.New("quantity")

// parseQuantity reads one outcome quantity: a JSON number whose value is a
// whole number in [0, 2⁶³−1] (Relay writes counter values as floats, 3.0);
// anything else is bad input, never truncated or wrapped into a count.
func parseQuantity(b []byte) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("%w %s: %s", errQuantity, clipReason(string(b)), why)
	}
	b = bytes.Trim(b, " \t\r\n") // JSON whitespace
	if len(b) == 0 {
		return bad("empty")
	}
	if b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return bad("not a number")
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return bad("out of range (more than 2^63-1 or less than 0)")
	case err == nil && n < 0:
		return bad("negative")
	case err == nil:
		return n, nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return bad("not a number")
	case math.IsNaN(f) || math.IsInf(f, 0) || errors.Is(err, strconv.ErrRange):
		return bad("out of range")
	case f < 0:
		return bad("negative")
	case f != math.Trunc(f):
		return bad("not a whole number")
	case f >= math.MaxInt64: // 2⁶³ exactly: the float nearest MaxInt64
		return bad("out of range (more than 2^63-1)")
	}
	return int64(f), nil
}

// quantity is an outcome quantity in a JSON document (parseQuantity's rules).
type quantity int64

// UnmarshalJSON reads a quantity; JSON null leaves it unchanged, as for a
// plain number.
func (q *quantity) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	n, err := parseQuantity(b)
	if err != nil {
		return err
	}
	*q = quantity(n)
	return nil
}

// addSaturating returns a+b for non-negative a and b, or math.MaxInt64
// where the sum would wrap.
func addSaturating(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}
