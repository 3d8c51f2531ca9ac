package testutil

import (
	"sync"
	"testing"
	"time"
)

// fakeSleeper is a clock whose sleeps last what a script says.
type fakeSleeper struct {
	mu     sync.Mutex
	t      time.Time
	extra  []time.Duration // how much longer than asked each sleep lasts
	i      int
	parked chan struct{} // closed when the script has run out
}

func (f *fakeSleeper) sleep(d time.Duration) {
	f.mu.Lock()
	if f.i >= len(f.extra) {
		f.mu.Unlock()
		select {
		case <-f.parked:
		default:
			close(f.parked)
		}
		time.Sleep(time.Millisecond) // the meter waits here for Stop
		return
	}
	f.t = f.t.Add(d + f.extra[f.i])
	f.i++
	f.mu.Unlock()
}

func (f *fakeSleeper) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

// The meter adds up each wake's lateness beyond a timer's slack and keeps
// the longest; a wake within the slack adds nothing.
func TestStalls(t *testing.T) {
	f := &fakeSleeper{t: time.Unix(0, 0), parked: make(chan struct{}),
		extra: []time.Duration{0, 300 * time.Microsecond, 40 * time.Millisecond, 0, 2 * time.Millisecond, 250 * time.Millisecond}}
	s := startStalls(f.sleep, f.now)
	<-f.parked
	lost := s.Stop()
	if want := 292 * time.Millisecond; lost != want || s.Lost() != want {
		t.Errorf("lost %v (Lost %v), want %v", lost, s.Lost(), want)
	}
	if s.Longest() != 250*time.Millisecond {
		t.Errorf("longest %v, want 250ms", s.Longest())
	}
	if s.Stop() != lost {
		t.Error("a second Stop changed what was lost")
	}
}

// The real meter starts, stops, and never reports a negative loss.
func TestStartStalls(t *testing.T) {
	s := StartStalls()
	time.Sleep(30 * time.Millisecond)
	if lost := s.Stop(); lost < 0 || s.Longest() > lost {
		t.Errorf("lost %v, longest %v", lost, s.Longest())
	}
}
