//go:build !linux

package blast

import "context"

// newPacerClock returns the clock Run paces with: runtime timers (the
// timerfd clock is Linux only).
func newPacerClock(ctx context.Context) clock { return newRealClock() }
