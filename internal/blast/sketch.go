package blast

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// Alpha is the relative accuracy of every sketch blast writes. Sketches only
// merge when their index mappings match, so it is fixed, not a flag.
const Alpha = 0.01

// Unit is the unit of sketch values: milliseconds, the unit Relay's statsd
// timers use, so their sketches merge with blast's.
const Unit = "ms"

// Sketch is a DDSketch of durations in milliseconds (relative accuracy
// Alpha) plus the exact minimum and maximum, which DDSketch only knows to
// within Alpha. It is not safe for concurrent use.
type Sketch struct {
	dd       *ddsketch.DDSketch
	min, max float64 // exact; valid when count > 0
}

// NewSketch returns an empty sketch.
func NewSketch() *Sketch {
	dd, err := ddsketch.LogUnboundedDenseDDSketch(Alpha)
	if err != nil { // only for an invalid Alpha
		panic(err)
	}
	return &Sketch{dd: dd, min: math.Inf(1), max: math.Inf(-1)}
}

// Add records one duration; negative durations count as zero.
func (s *Sketch) Add(d time.Duration) {
	s.AddMillis(float64(max(d, 0)) / 1e6)
}

// AddMillis records one value in milliseconds.
func (s *Sketch) AddMillis(ms float64) {
	if !(ms >= 0) || math.IsInf(ms, 1) { // NaN, negative
		ms = 0
	}
	_ = s.dd.Add(ms) // cannot fail for finite non-negative values
	s.min = min(s.min, ms)
	s.max = max(s.max, ms)
}

// Count is the number of values recorded (0 for a nil sketch).
func (s *Sketch) Count() int64 {
	if s == nil {
		return 0
	}
	return int64(math.Round(s.dd.GetCount()))
}

// Quantile returns the value at quantile q (0..1) within relative error
// Alpha; q = 1 gives the exact maximum and q = 0 the exact minimum. An
// empty sketch returns 0.
func (s *Sketch) Quantile(q float64) time.Duration {
	return millis(s.QuantileMillis(q))
}

// QuantileMillis is Quantile in milliseconds.
func (s *Sketch) QuantileMillis(q float64) float64 {
	if s == nil || s.dd.IsEmpty() {
		return 0
	}
	switch {
	case q <= 0:
		return s.min
	case q >= 1:
		return s.max
	}
	v, err := s.dd.GetValueAtQuantile(q)
	if err != nil {
		return 0
	}
	// The bin representative can lie just outside the exact range.
	return min(max(v, s.min), s.max)
}

// Max is the exact maximum (0 when empty).
func (s *Sketch) Max() time.Duration { return s.Quantile(1) }

// Merge adds o's values into s; the result equals a sketch built from both
// sets of values.
func (s *Sketch) Merge(o *Sketch) error {
	if o == nil || o.dd.IsEmpty() {
		return nil
	}
	if err := s.dd.MergeWith(o.dd); err != nil {
		return fmt.Errorf("blast: merge sketch: %w", err)
	}
	s.min = min(s.min, o.min)
	s.max = max(s.max, o.max)
	return nil
}

// Clear empties s, keeping its memory.
func (s *Sketch) Clear() {
	s.dd.Clear()
	s.min, s.max = math.Inf(1), math.Inf(-1)
}

// Equal reports whether s and o hold the same bins with the same counts and
// the same exact min and max.
func (s *Sketch) Equal(o *Sketch) bool {
	if s.Count() != o.Count() || s.dd.GetZeroCount() != o.dd.GetZeroCount() {
		return false
	}
	if s.Count() > 0 && (s.min != o.min || s.max != o.max) {
		return false
	}
	type bin struct{ v, c float64 }
	var a, b []bin
	s.dd.ForEach(func(v, c float64) bool { a = append(a, bin{v, c}); return false })
	o.dd.ForEach(func(v, c float64) bool { b = append(b, bin{v, c}); return false })
	return slices.Equal(a, b)
}

// sketchJSON is the file form of a Sketch: the compact DDSketch encoding
// (index mapping included) in base64, with the exact min and max.
type sketchJSON struct {
	Alpha float64 `json:"alpha"`
	Unit  string  `json:"unit"`
	Count int64   `json:"count"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	Data  []byte  `json:"ddsketch"`
}

// MarshalJSON implements json.Marshaler.
func (s *Sketch) MarshalJSON() ([]byte, error) {
	j := sketchJSON{Alpha: Alpha, Unit: Unit, Count: s.Count()}
	if j.Count > 0 {
		j.Min, j.Max = s.min, s.max
	}
	s.dd.Encode(&j.Data, false)
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Sketch) UnmarshalJSON(b []byte) error {
	var j sketchJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.Alpha != Alpha || j.Unit != Unit {
		return fmt.Errorf("blast: sketch with alpha %v unit %q, want %v %q", j.Alpha, j.Unit, Alpha, Unit)
	}
	fresh := NewSketch()
	if len(j.Data) == 0 {
		return errors.New("blast: sketch without data")
	}
	if err := fresh.decode(j.Data); err != nil {
		return err
	}
	if fresh.Count() != j.Count {
		return fmt.Errorf("blast: sketch count %d, header says %d", fresh.Count(), j.Count)
	}
	if j.Count > 0 {
		if !(0 <= j.Min && j.Min <= j.Max) {
			return fmt.Errorf("blast: sketch min %v max %v", j.Min, j.Max)
		}
		fresh.min, fresh.max = j.Min, j.Max
	}
	*s = *fresh
	return nil
}

// decode merges an encoded DDSketch into the empty s. The encoding names bin
// indexes and s keeps a dense store spanning the lowest to the highest, so
// it is decoded into a sparse store first (memory bounded by the input) and
// only merged once every bin is one Add can produce: an index within the
// mapping's indexable range, a positive finite count, no negative values.
// Otherwise a crafted file of a few bytes makes the dense store allocate
// gigabytes.
func (s *Sketch) decode(data []byte) error {
	m := s.dd.IndexMapping
	sparse, err := ddsketch.DecodeDDSketch(data, store.SparseStoreConstructor, m)
	if err != nil {
		return fmt.Errorf("blast: decode sketch: %w", err)
	}
	if !sparse.GetNegativeValueStore().IsEmpty() {
		return errors.New("blast: decode sketch: negative values")
	}
	if z := sparse.GetZeroCount(); !(z >= 0) || math.IsInf(z, 1) {
		return fmt.Errorf("blast: decode sketch: zero count %v", z)
	}
	lo, hi := m.Index(m.MinIndexableValue()), m.Index(m.MaxIndexableValue())
	var bad error
	sparse.GetPositiveValueStore().ForEach(func(index int, count float64) bool {
		if index < lo || index > hi || !(count > 0) || math.IsInf(count, 1) {
			bad = fmt.Errorf("blast: decode sketch: bin %d with count %v (indexes %d..%d)", index, count, lo, hi)
			return true
		}
		return false
	})
	if bad != nil {
		return bad
	}
	if err := s.dd.MergeWith(sparse); err != nil {
		return fmt.Errorf("blast: decode sketch: %w", err)
	}
	return nil
}

func millis(ms float64) time.Duration { return time.Duration(math.Round(ms * 1e6)) }
