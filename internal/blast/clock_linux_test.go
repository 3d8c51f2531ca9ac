//go:build linux

package blast

import (
	"context"
	"os"
	"testing"
	"time"
)

// The pacer's timerfd clock never wakes early, on the timerfd or (under a
// millisecond) on a runtime timer, and ends a sleep when its context is
// cancelled.
func TestTimerfdClock(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, ok := newPacerClock(ctx).(*timerfdClock)
	if !ok {
		t.Skip("no timerfd here: the runtime-timer clock is used")
	}
	defer c.close()
	for _, tc := range []struct {
		d, atLeast time.Duration
	}{
		{0, 0},
		{-time.Millisecond, 0},
		{100 * time.Microsecond, 100 * time.Microsecond},
		{1700 * time.Microsecond, 1700 * time.Microsecond},
		{3 * time.Millisecond, 3 * time.Millisecond},
	} {
		start := c.Now()
		if !c.Sleep(ctx, tc.d) {
			t.Fatalf("Sleep(%v) = false with a live context", tc.d)
		}
		if got := c.Now() - start; got < tc.atLeast {
			t.Errorf("Sleep(%v) returned after %v, want at least %v", tc.d, got, tc.atLeast)
		}
	}

	done := make(chan bool)
	go func() { done <- c.Sleep(ctx, time.Hour) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Error("Sleep = true after its context was cancelled")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Sleep did not end when its context was cancelled")
	}
	if c.Sleep(ctx, time.Millisecond) {
		t.Error("Sleep = true on a cancelled context")
	}
}

// Each run's timerfd is closed when the run ends.
func TestTimerfdClockClosed(t *testing.T) {
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip(err)
		}
		return len(ents)
	}
	before := count()
	for range 20 {
		c := newPacerClock(context.Background())
		if cl, ok := c.(interface{ close() }); ok {
			cl.close()
		}
	}
	if after := count(); after > before+2 {
		t.Errorf("open files %d -> %d after 20 clocks closed", before, after)
	}
}
