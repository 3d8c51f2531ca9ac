package blast

import (
	"context"
	"time"
)

// clock is the pacer's time source: real time in Run, a fake clock in the
// pacing tests. Times are offsets from the run's start.
type clock interface {
	Now() time.Duration
	// Sleep waits about d (real timers round up to ~1 ms here); it returns
	// false when ctx is done first.
	Sleep(ctx context.Context, d time.Duration) bool
}

// realClock measures on the monotonic clock from start.
type realClock struct {
	start time.Time
	timer *time.Timer
}

func newRealClock() *realClock {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &realClock{start: time.Now(), timer: t}
}

func (c *realClock) Now() time.Duration { return time.Since(c.start) }

// Sleep is used by one goroutine only (the pacer); it reuses one timer.
func (c *realClock) Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	c.timer.Reset(d)
	select {
	case <-c.timer.C:
		return true
	case <-ctx.Done():
		c.timer.Stop()
		return false
	}
}
