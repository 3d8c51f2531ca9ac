//go:build linux

package blast

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// timerfdClock is the pacer's clock on Linux: it sleeps by reading a
// timerfd through Go's network poller instead of on a runtime timer.
//
// Why: an idle Go process waits for its next timer in epoll with the
// timeout truncated to whole milliseconds, so a timer due in 1.7 ms wakes
// the process at 1 ms (nothing due: back to sleep) and again at 2 ms. At
// rates below 1000/s that made two wake-ups per slot, each a context switch
// (costly on a VM, and on one machine CPU taken from Relay), and released
// slots up to 1 ms late. A timerfd expires when it is asked to: one wake-up
// per slot, on time, which shows in blast's CPU per request and in its
// latency at rates below 1000/s (internal/cmd/blastbench).
//
// Sleeps shorter than timerfdMin go on a runtime timer: above 1000 slots/s
// the process is rarely idle, and a busy runtime runs due timers at every
// scheduling point, promptly, while a timerfd's wake-up waits for the
// poller (blastbench's schedule lag at 10k and 20k/s is lower on runtime
// timers).
type timerfdClock struct {
	realClock
	fd   int
	f    *os.File // fd, registered with the poller
	spec unix.ItimerSpec
	buf  [8]byte
	stop func() bool // unregisters the cancellation hook
}

// timerfdMin is the shortest sleep taken on the timerfd.
const timerfdMin = time.Millisecond

// newPacerClock returns the clock Run paces with. Sleep must be called with
// ctx or a context that ends no later; cancelling ctx ends a sleep at once.
// Where timerfd is not available it is the runtime-timer clock.
func newPacerClock(ctx context.Context) clock {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return newRealClock()
	}
	f := os.NewFile(uintptr(fd), "blast-pacer-timer")
	// A deadline can be set only on a file the poller accepted; without one
	// a read would not wait.
	if f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return newRealClock()
	}
	c := &timerfdClock{realClock: *newRealClock(), fd: fd, f: f}
	c.stop = context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	return c
}

// Sleep is used by one goroutine only (the pacer).
func (c *timerfdClock) Sleep(ctx context.Context, d time.Duration) bool {
	if d < timerfdMin || ctx.Err() != nil {
		return c.realClock.Sleep(ctx, d)
	}
	c.spec.Value = unix.NsecToTimespec(int64(d))
	if err := unix.TimerfdSettime(c.fd, 0, &c.spec, nil); err != nil {
		// Not expected once created; the runtime timer keeps the schedule.
		return c.realClock.Sleep(ctx, d)
	}
	// The read ends with the expiry count, or with the deadline the
	// cancellation hook sets.
	_, err := c.f.Read(c.buf[:])
	return err == nil && ctx.Err() == nil
}

// close releases the timerfd.
func (c *timerfdClock) close() {
	c.stop()
	c.f.Close()
}
