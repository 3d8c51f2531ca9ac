package tally

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestReasons(t *testing.T) {
	var r Reasons
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				r.Add("r" + strconv.Itoa((g*1000+i)%600))
			}
		}()
	}
	wg.Wait()
	snap := r.Snapshot()
	var total int64
	for _, n := range snap {
		total += n
	}
	// Nothing is lost; at most MaxReasons distinct reasons plus Other.
	if total != 4000 || len(snap) > MaxReasons+1 || snap[Other] == 0 {
		t.Errorf("total %d, %d reasons, other %d", total, len(snap), snap[Other])
	}
	// A kept reason keeps counting under its own name.
	before := snap["r0"]
	r.Add("r0")
	if got := r.Snapshot()["r0"]; got != before+1 || before == 0 {
		t.Errorf("r0 %d after %d", got, before)
	}
}

func TestAdd(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{math.MaxInt64 - 1, 1, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{0, 0, 0},
	} {
		if got := Add(tc.a, tc.b); got != tc.want {
			t.Errorf("Add(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	// Concurrent adds to one counter that pass the maximum half-way stop
	// there, never wrapping negative.
	var a atomic.Int64
	const workers, per = 4, 1000
	step := int64(math.MaxInt64 / (workers * per / 2))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				AddAtomic(&a, step)
				if a.Load() < 0 {
					t.Error("counter went negative")
					return
				}
			}
		}()
	}
	wg.Wait()
	if a.Load() != math.MaxInt64 {
		t.Errorf("counter = %d, want %d", a.Load(), int64(math.MaxInt64))
	}
}

func TestParseCount(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"-0", 0, true},
		{"3.0", 3, true},
		{"2e3", 2000, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-1", 0, false},
		{"-0.5", 0, false},
		{"1.5", 0, false},
		{"1e30", 0, false},
		{"9223372036854775808", 0, false},
		{"9.223372036854775807e18", 0, false}, // rounds to 2^63
		{"-9223372036854775809", 0, false},
		{`"3"`, 0, false},
		{"true", 0, false},
		{"[1]", 0, false},
		{"", 0, false},
		{"-", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseCount([]byte(tt.in))
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("ParseCount(%s) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrCount) {
			t.Errorf("ParseCount(%s): error %v does not wrap ErrCount", tt.in, err)
		}
	}
}

// FuzzParseCount: an accepted count is the whole, non-negative
// number the text denotes; JSON decoding through Count agrees.
func FuzzParseCount(f *testing.F) {
	for _, s := range []string{"0", "1", "-1", "1.5", "3.0", "1e3", "9223372036854775807", "9223372036854775808", "-0", `"1"`, "null", "1e-400", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCount([]byte(s))
		if err != nil {
			if !errors.Is(err, ErrCount) {
				t.Fatalf("%q: error %v does not wrap ErrCount", s, err)
			}
		} else {
			if n < 0 {
				t.Fatalf("%q accepted as negative %d", s, n)
			}
			if v, perr := strconv.ParseFloat(strings.Trim(s, " \t\r\n"), 64); perr != nil || v != float64(n) {
				t.Fatalf("%q accepted as %d, but it reads as the float %v (%v)", s, n, v, perr)
			}
		}
		var doc struct {
			Q Count `json:"q"`
		}
		if jerr := json.Unmarshal([]byte(`{"q":`+s+`}`), &doc); jerr == nil && s != "null" && (err != nil || int64(doc.Q) != n) {
			t.Fatalf("%q: JSON decoding gave %d, ParseCount %d, %v", s, doc.Q, n, err)
		}
	})
}

func ExampleReasons() {
	var errs Reasons
	errs.Add("bad_json")
	errs.Add("bad_json")
	errs.Add("too_large")
	fmt.Println(errs.Snapshot())
	// Output: map[bad_json:2 too_large:1]
}
