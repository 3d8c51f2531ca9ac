package testutil

import (
	"sync"
	"time"
)

// stallTick is how long the meter sleeps at a time, and stallNoise the
// lateness of one wake that is a timer's ordinary slack, not a stall.
const (
	stallTick  = 10 * time.Millisecond
	stallNoise = time.Millisecond
)

// Stalls measures how far a loaded machine holds this process back: a
// goroutine sleeps a few milliseconds at a time and adds up how much later
// than asked it woke. A test that bounds a wall time adds what the meter
// lost over the same span to its margin, so the bound holds on a machine
// busy with other work and still fails on a quiet one when the code is
// slow. The meter cannot tell other processes from this one's own busy
// goroutines: a bound it widens is for code that mostly waits, not for
// code whose CPU is the thing measured (that belongs in a benchmark).
type Stalls struct {
	sleep func(time.Duration)
	now   func() time.Time

	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	lost    time.Duration
	longest time.Duration
}

// StartStalls starts a meter; Stop ends it.
func StartStalls() *Stalls {
	return startStalls(time.Sleep, time.Now)
}

func startStalls(sleep func(time.Duration), now func() time.Time) *Stalls {
	s := &Stalls{sleep: sleep, now: now, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *Stalls) run() {
	defer close(s.done)
	last := s.now()
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		s.sleep(stallTick)
		at := s.now()
		if late := at.Sub(last) - stallTick; late > stallNoise {
			s.mu.Lock()
			s.lost += late
			s.longest = max(s.longest, late)
			s.mu.Unlock()
		}
		last = at
	}
}

// Lost is the time lost to stalls so far: the sum of the meter's wakes'
// lateness.
func (s *Stalls) Lost() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// Longest is the longest single stall so far.
func (s *Stalls) Longest() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.longest
}

// Stop ends the meter and returns the time lost. The wake in progress,
// stalled or not, counts: a stall that lasts until Stop is not missed.
func (s *Stalls) Stop() time.Duration {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	return s.Lost()
}
