package blast

import (
	"context"
	"math"
	"time"
)

// schedule is the shared open-loop plan: global slot k is due at k/rate after
// the start. A shard i of N owns the slots k ≡ i (mod N), so N processes with
// the same plan send exactly the slots one process would.
type schedule struct {
	rate   float64 // total slots per second over all shards, > 0
	shard  int64
	shards int64
	end    int64 // global slots run 0..end-1
	warm   int64 // global slots 0..warm-1 are warm-up
}

// at is the intended send time of global slot k.
func (s schedule) at(k int64) time.Duration {
	return time.Duration(float64(k) / s.rate * 1e9)
}

// slotsIn is the number of slots due strictly before d: k with k/rate < d.
func slotsIn(rate float64, d time.Duration) int64 {
	n := d.Seconds() * rate
	c := math.Ceil(n - 1e-9)
	if c < 0 {
		return 0
	}
	if c > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(c)
}

// owned is the number of this shard's slots among global slots lo..hi-1.
func (s schedule) owned(lo, hi int64) int64 {
	return countCongruent(hi, s.shard, s.shards) - countCongruent(lo, s.shard, s.shards)
}

// countCongruent counts k in [0, n) with k ≡ r (mod m).
func countCongruent(n, r, m int64) int64 {
	if n <= r {
		return 0
	}
	return (n-r-1)/m + 1
}

// checkEvery is how many slots pace releases in a row between looks at its
// context: often enough to stop within microseconds, rarely enough to cost
// nothing per slot.
const checkEvery = 256

// pace releases this shard's slots in order, each once, no earlier than its
// intended time, in batches: after each wake-up every slot already due is
// released. It returns the next unreleased global slot (≥ end when the plan
// is done) when the plan ends or ctx is cancelled. release must not block for
// long: a slot that cannot start is dropped by it, not queued.
//
// A pacer behind its schedule never sleeps, so within a batch ctx is
// checked every checkEvery releases: cancelling ends pace promptly however
// many slots are due.
func (s schedule) pace(ctx context.Context, c clock, release func(k int64, intended time.Duration)) int64 {
	k := s.shard
	for k < s.end {
		now := c.Now()
		for n := 1; k < s.end; n++ {
			due := s.at(k)
			if due > now {
				break
			}
			release(k, due)
			k += s.shards
			if n%checkEvery == 0 && ctx.Err() != nil {
				return k
			}
		}
		if k >= s.end {
			break
		}
		// Measured again: releasing the batch took time, and the sleep
		// is relative.
		if !c.Sleep(ctx, s.at(k)-c.Now()) {
			break
		}
	}
	return k
}
