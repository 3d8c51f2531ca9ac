package standinrelay

import (
	"context"
	"math"
	"sync"
	"time"
)

// capacityBurst is how much idle time the processing pacer credits: after
// a pause, up to this long's worth of standin.capacity (at least one
// envelope) is processed at once before the pacing resumes.
const capacityBurst = 50 * time.Millisecond

// pacer spaces the processing workers' envelopes, all workers together, to
// standin.capacity per second: a token bucket kept as the virtual time at
// which the next envelope may start (GCRA). Waiting is a timer sleep, so a
// paced worker costs no CPU. A nil *pacer does not limit.
type pacer struct {
	interval time.Duration // 1 / capacity
	burst    time.Duration // idle credit cap

	mu   sync.Mutex
	next time.Time // when the next envelope may start
}

// newPacer returns a pacer for capacity envelopes per second, or nil for
// capacity 0 (unlimited).
func newPacer(capacity float64) *pacer {
	if capacity <= 0 || math.IsNaN(capacity) || math.IsInf(capacity, 0) {
		return nil
	}
	// A tiny capacity means "practically nothing is processed"; clamp the
	// interval to a year so the conversion stays defined.
	const maxInterval = 365 * 24 * time.Hour
	interval := maxInterval
	if f := float64(time.Second) / capacity; f < float64(maxInterval) {
		interval = max(time.Duration(f), 1)
	}
	return &pacer{interval: interval, burst: max(interval, capacityBurst)}
}

// reserve books the next slot and returns how long to wait for it (≤ 0: go now).
func (p *pacer) reserve(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if floor := now.Add(-p.burst); p.next.Before(floor) {
		p.next = floor
	}
	at := p.next
	p.next = at.Add(p.interval)
	return at.Sub(now)
}

// wait blocks until the caller may process one envelope. It returns false
// if ctx ended first.
func (p *pacer) wait(ctx context.Context) bool {
	if p == nil {
		return ctx.Err() == nil
	}
	return sleep(ctx, p.reserve(time.Now()))
}
