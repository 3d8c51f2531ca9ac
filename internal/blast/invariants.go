package blast

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// checkInvariants checks what Result documents of its counters and
// sketches, so that a damaged or hand-edited file (a negative sent, ok above
// sent, a counter near 2^63 that overflows when added up) is refused before
// it is merged or summarized: Merge would otherwise print whatever the
// arithmetic gives, and call it valid. Errors name the JSON field.
func (r *Result) checkInvariants() error {
	switch {
	case !(r.Rate >= 0 && r.Rate <= MaxRate):
		return fmt.Errorf("rate %v: want 0 (closed loop) to %s", r.Rate, formatRate(MaxRate))
	case r.Shards < 1:
		return fmt.Errorf("shards %d: want 1 or more", r.Shards)
	case r.Shard < -1 || r.Shard >= r.Shards:
		return fmt.Errorf("shard %d: want -1 (a merge) or 0..%d", r.Shard, r.Shards-1)
	case r.Parts < 0:
		return fmt.Errorf("parts %d: must not be negative", r.Parts)
	}
	for _, d := range []struct {
		name string
		v    int64
	}{{"warmup_ns", int64(r.Warmup)}, {"elapsed_ns", int64(r.Elapsed)}, {"duration_ns", int64(r.Duration)}} {
		if d.v < 0 {
			return fmt.Errorf("%s %d: must not be negative", d.name, d.v)
		}
	}
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"scheduled", r.Scheduled}, {"sent", r.Sent}, {"ok", r.OK}, {"dropped", r.Dropped}, {"abandoned", r.Abandoned},
		{"peak_inflight", r.PeakInflight}, {"workers", int64(r.Workers)}, {"concurrency", int64(r.Concurrency)},
		{"warmup_sent", r.WarmupSent}, {"warmup_ok", r.WarmupOK}, {"warmup_dropped", r.WarmupDropped}, {"count", r.Count},
	} {
		if err := checkCounter(c.name, c.v); err != nil {
			return err
		}
	}
	for code := range r.ByStatus {
		if code != 0 && (code < 100 || code > 599) {
			return fmt.Errorf("by_status: status %d: want 100..599, or 0 for one outside", code)
		}
	}
	for c := range r.Errors {
		if !slices.Contains(errorClasses[:], c) {
			return fmt.Errorf("errors: class %q: want one of %v", c, errorClasses)
		}
	}
	answered, err := sumCounters("by_status", r.ByStatus)
	if err != nil {
		return err
	}
	var ok2xx int64 // bounded by answered
	for code, n := range r.ByStatus {
		if code >= 200 && code < 300 {
			ok2xx += n
		}
	}
	unanswered, err := sumCounters("errors", r.Errors)
	if err != nil {
		return err
	}
	byKind, err := sumCounters("by_kind", r.ByKind)
	if err != nil {
		return err
	}
	okByKind, err := sumCounters("ok_by_kind", r.OKByKind)
	if err != nil {
		return err
	}
	recorded := r.Sent - r.Abandoned // requests that ended (answered or failed)
	switch {
	case r.Sent+r.Dropped != r.Scheduled:
		return fmt.Errorf("sent %d + dropped %d != scheduled %d", r.Sent, r.Dropped, r.Scheduled)
	case answered+unanswered+r.Abandoned != r.Sent:
		return fmt.Errorf("sent %d != by_status %d + errors %d + abandoned %d", r.Sent, answered, unanswered, r.Abandoned)
	case r.OK != ok2xx:
		return fmt.Errorf("ok %d != the 2xx of by_status %d (sent %d)", r.OK, ok2xx, r.Sent)
	case byKind != recorded:
		return fmt.Errorf("by_kind adds up to %d, want sent %d - abandoned %d", byKind, r.Sent, r.Abandoned)
	case okByKind != r.OK:
		return fmt.Errorf("ok_by_kind adds up to %d, want ok %d", okByKind, r.OK)
	case r.WarmupOK > r.WarmupSent:
		return fmt.Errorf("warmup_ok %d > warmup_sent %d", r.WarmupOK, r.WarmupSent)
	}
	for k, n := range r.OKByKind {
		if n > r.ByKind[k] {
			return fmt.Errorf("ok_by_kind[%s] %d > by_kind[%s] %d", k, n, k, r.ByKind[k])
		}
	}
	for _, s := range []struct {
		name string
		got  int64
		want int64
		of   string
	}{
		{"latency", r.Latency.Count(), answered, "by_status"},
		{"service", r.Service.Count(), answered, "by_status"},
		{"lag", r.Lag.Count(), recorded, "sent - abandoned"},
	} {
		if s.got != s.want {
			return fmt.Errorf("%s sketch counts %d requests, %s %d", s.name, s.got, s.of, s.want)
		}
	}
	return r.checkWindows(recorded)
}

// checkWindows checks the windows against the totals: every request that
// ended is in the window of its second, warm-up included, and so is every
// dropped slot.
func (r *Result) checkWindows(recorded int64) error {
	var sent, ok, dropped int64
	for i, w := range r.Windows {
		for _, c := range []struct {
			name string
			v    int64
		}{{"sent", w.Sent}, {"ok", w.OK}, {"errors", w.Errors}, {"dropped", w.Dropped}} {
			if err := checkCounter("windows["+strconv.Itoa(i)+"]."+c.name, c.v); err != nil {
				return err
			}
		}
		if w.OK+w.Errors > w.Sent {
			return fmt.Errorf("windows[%d]: ok %d + errors %d > sent %d", i, w.OK, w.Errors, w.Sent)
		}
		if w.Latency != nil && w.Latency.Count() != w.Sent-w.Errors {
			return fmt.Errorf("windows[%d]: latency sketch counts %d requests, sent %d - errors %d", i, w.Latency.Count(), w.Sent, w.Errors)
		}
		// Each term is at most MaxCount, and so is each sum checked below
		// before the next term is added: no overflow.
		sent, ok, dropped = sent+w.Sent, ok+w.OK, dropped+w.Dropped
		if sent > MaxCount || ok > MaxCount || dropped > MaxCount {
			return fmt.Errorf("windows add up to more than %d requests", MaxCount)
		}
	}
	if len(r.Windows) == 0 {
		return nil // a result written without windows: nothing to compare
	}
	switch {
	case sent != recorded+r.WarmupSent:
		return fmt.Errorf("windows' sent adds up to %d, want sent %d - abandoned %d + warmup_sent %d", sent, r.Sent, r.Abandoned, r.WarmupSent)
	case ok != r.OK+r.WarmupOK:
		return fmt.Errorf("windows' ok adds up to %d, want ok %d + warmup_ok %d", ok, r.OK, r.WarmupOK)
	case dropped != r.Dropped+r.WarmupDropped:
		return fmt.Errorf("windows' dropped adds up to %d, want dropped %d + warmup_dropped %d", dropped, r.Dropped, r.WarmupDropped)
	}
	return nil
}

// checkCounter refuses a negative count or one above MaxCount.
func checkCounter(name string, v int64) error {
	if v < 0 || v > MaxCount {
		return fmt.Errorf("%s %d: want 0..%d", name, v, MaxCount)
	}
	return nil
}

// sumCounters adds up a map of counters, refusing a negative one and a sum
// above MaxCount (so the sum cannot overflow).
func sumCounters[K comparable](name string, m map[K]int64) (int64, error) {
	var sum int64
	for k, v := range m {
		if err := checkCounter(fmt.Sprintf("%s[%v]", name, k), v); err != nil {
			return 0, err
		}
		if sum += v; sum > MaxCount {
			return 0, fmt.Errorf("%s adds up to more than %d", name, MaxCount)
		}
	}
	return sum, nil
}

// checkTotals refuses parts whose counters together exceed MaxCount, so
// that adding them up cannot overflow (every counter of a checked part is
// bounded by one of these).
func checkTotals(rs []*Result) error {
	var total float64
	for _, r := range rs {
		total += float64(r.Scheduled) + float64(r.WarmupSent) + float64(r.WarmupDropped) +
			float64(r.PeakInflight) + float64(r.Workers) + float64(r.Concurrency)
	}
	if total > float64(MaxCount) || math.IsNaN(total) {
		return fmt.Errorf("the results together count more than %d requests", MaxCount)
	}
	return nil
}
