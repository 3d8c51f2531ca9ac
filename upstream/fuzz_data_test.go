package upstream

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestParseQuantity(t *testing.T) {
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
		got, err := parseQuantity([]byte(tt.in))
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("parseQuantity(%s) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, errQuantity) {
			t.Errorf("parseQuantity(%s): error %v does not wrap errQuantity", tt.in, err)
		}
	}
}

// FuzzParseQuantity: an accepted quantity is the whole, non-negative
// number the text denotes; JSON decoding through quantity agrees.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"0", "1", "-1", "1.5", "3.0", "1e3", "9223372036854775807", "9223372036854775808", "-0", `"1"`, "null", "1e-400", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseQuantity([]byte(s))
		if err != nil {
			if !errors.Is(err, errQuantity) {
				t.Fatalf("%q: error %v does not wrap errQuantity", s, err)
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
			Q quantity `json:"q"`
		}
		if jerr := json.Unmarshal([]byte(`{"q":`+s+`}`), &doc); jerr == nil && s != "null" && (err != nil || int64(doc.Q) != n) {
			t.Fatalf("%q: JSON decoding gave %d, parseQuantity %d, %v", s, doc.Q, n, err)
		}
	})
}

// FuzzCheckRateLimits: an accepted rate_limits value is bounded in length
// and every quota's retry_after in seconds.
func FuzzCheckRateLimits(f *testing.F) {
	for _, s := range []string{"60::organization", "60:error;transaction:project:quota, 30::key", "3601:error", "x:error", ",,", "1.5:error", "-1:error", "NaN:error"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if checkRateLimits(v) != nil {
			return
		}
		if len(v) > maxRateLimitsLen {
			t.Fatalf("accepted %d bytes", len(v))
		}
		for _, q := range strings.Split(v, ",") {
			ra, _, _ := strings.Cut(strings.TrimSpace(q), ":")
			if ra == "" && strings.TrimSpace(q) == "" {
				continue
			}
			if secs, err := strconv.ParseFloat(ra, 64); err != nil || secs < 0 || secs > maxRetryAfter {
				t.Fatalf("accepted %q with retry_after %q", v, ra)
			}
		}
	})
}

// TestCountersSaturate: sums that would pass 2⁶³−1 stop there, also under
// concurrent adds to one atomic counter.
func TestCountersSaturate(t *testing.T) {
	if got := addSaturating(math.MaxInt64-1, 5); got != math.MaxInt64 {
		t.Errorf("addSaturating = %d", got)
	}
	if got := addSaturating(40, 2); got != 42 {
		t.Errorf("addSaturating(40, 2) = %d", got)
	}
	var a atomic.Int64
	const workers, per = 4, 1000
	step := int64(math.MaxInt64 / (workers * per / 2)) // passes the maximum half-way
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				addSaturatingAtomic(&a, step)
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
	var tab outcomeTable
	tab.add("accepted", "error", "", math.MaxInt64)
	tab.add("accepted", "error", "", math.MaxInt64)
	if r := tab.rows[outcomeKey{"accepted", "error", ""}]; r.quantity != math.MaxInt64 || r.count != 2 {
		t.Errorf("row = %+v", *r)
	}
}
