package blast

import (
	"context"
	"testing"
	"time"
)

func TestSlotsIn(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		d    time.Duration
		want int64
	}{
		{1000, time.Second, 1000},
		{1000, 0, 0},
		{3, time.Second, 3},
		{3, 1001 * time.Millisecond, 4}, // slot 3 is due at 1 s < 1.001 s
		{20000, 5 * time.Second, 100000},
		{0.5, 10 * time.Second, 5},
		{7, 500 * time.Millisecond, 4}, // 0, 1/7, 2/7, 3/7 s
	} {
		if got := slotsIn(tc.rate, tc.d); got != tc.want {
			t.Errorf("slotsIn(%v, %v) = %d, want %d", tc.rate, tc.d, got, tc.want)
		}
	}
}

func TestCountCongruent(t *testing.T) {
	for n := int64(0); n < 30; n++ {
		for m := int64(1); m < 5; m++ {
			for r := int64(0); r < m; r++ {
				var want int64
				for k := int64(0); k < n; k++ {
					if k%m == r {
						want++
					}
				}
				if got := countCongruent(n, r, m); got != want {
					t.Fatalf("countCongruent(%d,%d,%d) = %d, want %d", n, r, m, got, want)
				}
			}
		}
	}
}

type released struct {
	k        int64
	intended time.Duration
	at       time.Duration // clock when released
}

func paceAll(t *testing.T, s schedule, c *fakeClock, ctx context.Context) ([]released, int64) {
	t.Helper()
	var out []released
	next := s.pace(ctx, c, func(k int64, intended time.Duration) {
		out = append(out, released{k, intended, c.Now()})
	})
	return out, next
}

// The pacer releases every owned slot exactly once, in order, stamped with
// t0 + k/R, never before that time and, with ~1 ms timers, at most one tick
// (plus the timer's own lateness) after it.
func TestPaceFakeClock(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rate          float64
		shard, shards int64
		end           int64
		tick          time.Duration
		extra         func(int) time.Duration
		maxLag        time.Duration
	}{
		{"10k/s 1ms ticks", 10000, 0, 1, 10000, time.Millisecond, nil, time.Millisecond},
		{"20k/s jittery", 20000, 0, 1, 40000, time.Millisecond, func(i int) time.Duration { return time.Duration(i%7) * 50 * time.Microsecond }, 1400 * time.Microsecond},
		{"slow rate", 3, 0, 1, 10, time.Millisecond, nil, time.Millisecond},
		{"shard 1/3", 9000, 1, 3, 9001, time.Millisecond, nil, time.Millisecond},
		{"shard 2/3", 9000, 2, 3, 9001, time.Millisecond, nil, time.Millisecond},
		{"fine timers", 1000, 0, 1, 1000, time.Microsecond, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := schedule{rate: tc.rate, shard: tc.shard, shards: tc.shards, end: tc.end}
			c := &fakeClock{tick: tc.tick, extra: tc.extra}
			got, next := paceAll(t, s, c, context.Background())
			if next < tc.end {
				t.Fatalf("pace returned next %d < end %d", next, tc.end)
			}
			if want := s.owned(0, tc.end); int64(len(got)) != want {
				t.Fatalf("released %d slots, want %d", len(got), want)
			}
			for i, r := range got {
				wantK := tc.shard + int64(i)*tc.shards
				if r.k != wantK {
					t.Fatalf("release %d: slot %d, want %d", i, r.k, wantK)
				}
				if want := time.Duration(float64(r.k) / tc.rate * 1e9); r.intended != want {
					t.Fatalf("slot %d intended %v, want %v", r.k, r.intended, want)
				}
				if r.at < r.intended {
					t.Fatalf("slot %d released at %v before its time %v", r.k, r.at, r.intended)
				}
				if lag := r.at - r.intended; lag > tc.maxLag {
					t.Fatalf("slot %d released %v late, want <= %v", r.k, lag, tc.maxLag)
				}
			}
			// Batching: about one wake-up per tick, not one per slot.
			if dur := s.at(tc.end); tc.tick >= time.Millisecond && c.sleeps > int(dur/tc.tick)+2 {
				t.Errorf("%d sleeps for %v of schedule: not batching", c.sleeps, dur)
			}
		})
	}
}

// After a stall (GC pause, descheduled VM) every overdue slot is released at
// once, each keeping its own intended time: lag is recorded, not hidden.
func TestPaceStall(t *testing.T) {
	s := schedule{rate: 1000, shard: 0, shards: 1, end: 1000}
	c := &fakeClock{tick: time.Millisecond, extra: func(i int) time.Duration {
		if i == 100 {
			return 250 * time.Millisecond
		}
		return 0
	}}
	got, _ := paceAll(t, s, c, context.Background())
	if len(got) != 1000 {
		t.Fatalf("released %d, want 1000", len(got))
	}
	burst := 0
	var maxLag time.Duration
	for _, r := range got {
		if r.intended != time.Duration(r.k)*time.Millisecond {
			t.Fatalf("slot %d intended %v", r.k, r.intended)
		}
		if lag := r.at - r.intended; lag > maxLag {
			maxLag = lag
		}
		if r.at == got[100].at {
			burst++
		}
	}
	if maxLag < 240*time.Millisecond || maxLag > 252*time.Millisecond {
		t.Errorf("max lag %v, want about 250ms", maxLag)
	}
	if burst < 240 {
		t.Errorf("burst after stall released %d slots together, want ~250", burst)
	}
}

func TestPaceCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := schedule{rate: 1000, shard: 0, shards: 1, end: 1 << 40}
	c := &fakeClock{tick: time.Millisecond, cancelAt: 50, cancel: cancel}
	got, next := paceAll(t, s, c, ctx)
	if c.sleeps != 50 {
		t.Fatalf("kept sleeping after cancel: %d sleeps", c.sleeps)
	}
	if int64(len(got)) != next || next < 45 || next > 55 {
		t.Fatalf("released %d, next %d: want ~50 and equal", len(got), next)
	}
}

// Shards of one schedule partition its slots: together they release each
// slot exactly once with the same intended time as one unsharded pacer.
func TestPaceShardsPartition(t *testing.T) {
	const n, end = 4, 10007
	seen := make(map[int64]time.Duration)
	for i := int64(0); i < n; i++ {
		s := schedule{rate: 5000, shard: i, shards: n, end: end}
		got, _ := paceAll(t, s, &fakeClock{tick: time.Millisecond}, context.Background())
		for _, r := range got {
			if _, dup := seen[r.k]; dup {
				t.Fatalf("slot %d released twice", r.k)
			}
			seen[r.k] = r.intended
		}
	}
	one := schedule{rate: 5000, shard: 0, shards: 1, end: end}
	for k := int64(0); k < end; k++ {
		if d, ok := seen[k]; !ok || d != one.at(k) {
			t.Fatalf("slot %d: %v %v, want %v", k, d, ok, one.at(k))
		}
	}
}

// A pacer whose every slot is already due (far behind, or a rate beyond any
// clock) never sleeps; cancelling must still end it within a few releases,
// not after the whole plan (issue 33: --rate 1e300 spun for minutes and
// ignored SIGTERM).
func TestPaceCancelWhileBehind(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rate   float64
		shards int64
		now    time.Duration // the clock, frozen: every slot before it is due
	}{
		{"every slot due at once", 1e300, 1, 0},
		{"an hour behind at the top rate", MaxRate, 1, time.Hour},
		{"an hour behind, one of three shards", MaxRate, 3, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const cancelAfter = 1000
			s := schedule{rate: tc.rate, shard: tc.shards - 1, shards: tc.shards, end: 1 << 60}
			var n int64
			next := s.pace(ctx, &fakeClock{now: tc.now, tick: time.Millisecond}, func(k int64, _ time.Duration) {
				n++
				if n == cancelAfter {
					cancel()
				}
				if n > cancelAfter+10*checkEvery {
					t.Fatalf("still releasing slots %d releases after the cancel", n-cancelAfter)
				}
			})
			if n < cancelAfter || n > cancelAfter+checkEvery || next != s.shard+n*s.shards {
				t.Fatalf("released %d, next %d: want %d..%d releases, then next slot", n, next, cancelAfter, cancelAfter+checkEvery)
			}
		})
	}
}
