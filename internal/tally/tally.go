// Package tally counts what clients choose the names of (error reasons,
// fault kinds) in bounded memory, with sums that stop at math.MaxInt64
// instead of wrapping when a client sends huge counts.
package tally

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
)

// MaxReasons is how many distinct reasons a Reasons keeps; later new ones
// are counted as Other.
const MaxReasons = 500

// Other is the reason counted for a new reason once MaxReasons are kept.
const Other = "other"

// Reasons counts by reason, safe for concurrent use; its zero value is
// empty and ready.
type Reasons struct {
	m sync.Map // string → *atomic.Int64
	n atomic.Int64
}

// Add counts one of reason.
func (r *Reasons) Add(reason string) {
	if v, ok := r.m.Load(reason); ok {
		v.(*atomic.Int64).Add(1)
		return
	}
	// A new reason reserves its place first, so that concurrent adds
	// cannot keep more than MaxReasons.
	reserved := r.n.Add(1) <= MaxReasons
	if !reserved {
		r.n.Add(-1)
		reason = Other
	}
	v, loaded := r.m.LoadOrStore(reason, new(atomic.Int64))
	if loaded && reserved {
		r.n.Add(-1)
	}
	v.(*atomic.Int64).Add(1)
}

// Snapshot is the counts by reason.
func (r *Reasons) Snapshot() map[string]int64 {
	out := map[string]int64{}
	r.m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// Add returns a+b for non-negative a and b, or math.MaxInt64 where the sum
// would wrap.
func Add(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// AddAtomic adds d ≥ 0 to a as Add does.
func AddAtomic(a *atomic.Int64, d int64) {
	for {
		old := a.Load()
		if a.CompareAndSwap(old, Add(old, d)) {
			return
		}
	}
}

// ErrCount marks a count that is not one: negative, fractional, beyond
// 2⁶³−1, or not a JSON number at all.
var ErrCount = errors.New("count")

// ParseCount reads a count a client sent: a JSON number whose value is a
// whole number in [0, 2⁶³−1] (Relay writes counter values as floats, 3.0).
// Anything else is an error wrapping ErrCount, never truncated or wrapped
// into a count.
func ParseCount(b []byte) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("%w %.64q: %s", ErrCount, b, why)
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

// Count is a count in a JSON document, read by ParseCount's rules; JSON
// null leaves it unchanged, as for a plain number.
type Count int64

// UnmarshalJSON reads a count.
func (c *Count) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	n, err := ParseCount(b)
	if err != nil {
		return err
	}
	*c = Count(n)
	return nil
}
