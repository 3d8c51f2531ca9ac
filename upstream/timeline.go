package upstream

import (
	"sync/atomic"
	"time"
)

// TimelineSeconds is how many one-second buckets a timeline holds after
// start or a reset; later arrivals are counted in Timeline.Later.
const TimelineSeconds = 3600

// timeline counts data envelopes by the second they arrived in: beside what
// the load generator sent, it tells a Relay that keeps pace from a backlog.
type timeline struct {
	start   time.Time
	seconds [TimelineSeconds]atomic.Int64
	later   atomic.Int64
}

func (t *timeline) add(now time.Time) {
	sec := int64(now.Sub(t.start) / time.Second)
	if sec < 0 {
		sec = 0 // a clock step back: count it in the first second
	}
	if sec >= TimelineSeconds {
		t.later.Add(1)
		return
	}
	t.seconds[sec].Add(1)
}

// Timeline is the data envelopes (Stats.DataEnvelopes) received per second
// since the server's start or the last reset.
type Timeline struct {
	// Start is when second 0 began.
	Start time.Time `json:"start"`
	// Envelopes[i] arrived in [Start+i s, Start+i+1 s); the slice ends
	// with the last second that had an arrival.
	Envelopes []int64 `json:"envelopes_per_second"`
	// Later counts arrivals after the last of TimelineSeconds buckets.
	Later int64 `json:"later,omitempty"`
}

func (t *timeline) snapshot() Timeline {
	n := len(t.seconds)
	for n > 0 && t.seconds[n-1].Load() == 0 {
		n--
	}
	out := Timeline{Start: t.start, Envelopes: make([]int64, n), Later: t.later.Load()}
	for i := range out.Envelopes {
		out.Envelopes[i] = t.seconds[i].Load()
	}
	return out
}

// Total is the sum of every bucket and Later.
func (t Timeline) Total() int64 {
	n := t.Later
	for _, v := range t.Envelopes {
		n += v
	}
	return n
}

// DataEnvelopes is Stats().DataEnvelopes in one atomic load, cheap enough to
// poll many times a second.
func (s *Server) DataEnvelopes() int64 {
	return s.stats.Load().dataEnvelopes.Load()
}
