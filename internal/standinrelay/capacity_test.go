package standinrelay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/upstream"
)

func TestPacer(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		capacity float64
		at       []time.Duration // reserve calls, offsets from t0
		want     []time.Duration // waits
	}{
		// 200/s: 5 ms apart; 50 ms of idle credit = 10 envelopes + 1 now.
		{"burst after idle", 200, []time.Duration{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			[]time.Duration{-50 * ms, -45 * ms, -40 * ms, -35 * ms, -30 * ms, -25 * ms, -20 * ms, -15 * ms, -10 * ms, -5 * ms, 0, 5 * ms, 10 * ms}},
		// Arrivals slower than capacity never wait (and keep the full credit).
		{"below capacity", 200, []time.Duration{0, 10 * ms, 20 * ms, 30 * ms}, []time.Duration{-50 * ms, -50 * ms, -50 * ms, -50 * ms}},
		// Once the credit is spent, a steady 2× overload waits ever longer.
		{"above capacity", 100, []time.Duration{100 * ms, 105 * ms, 110 * ms, 115 * ms, 120 * ms, 125 * ms, 130 * ms},
			[]time.Duration{-50 * ms, -45 * ms, -40 * ms, -35 * ms, -30 * ms, -25 * ms, -20 * ms}},
		// 1/s: the credit is one interval (more than capacityBurst).
		{"slow capacity", 1, []time.Duration{0, 0, 0}, []time.Duration{-time.Second, 0, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPacer(tc.capacity)
			p.next = t0.Add(-time.Hour)
			for i, off := range tc.at {
				if got := p.reserve(t0.Add(off)); got != tc.want[i] {
					t.Errorf("reserve %d at +%s: wait %s, want %s", i, off, got, tc.want[i])
				}
			}
		})
	}
	// The overload case above, continued: after 50 ms of credit the waits
	// grow by 5 ms per 10 ms of arrivals.
	p := newPacer(100)
	var last time.Duration
	for i := range 40 {
		last = p.reserve(t0.Add(time.Duration(i) * 5 * ms))
	}
	// 40 envelopes take 390 ms at 100/s, minus 50 ms credit; the last arrives at 195 ms.
	if want := 390*ms - 50*ms - 195*ms; last != want {
		t.Errorf("40th of a 2× overload waits %s, want %s", last, want)
	}
	if newPacer(0) != nil {
		t.Error("capacity 0 is not unlimited")
	}
	if p := newPacer(1e-300); p == nil || p.interval <= 0 {
		t.Errorf("tiny capacity: %+v", p)
	}
}

// capacityRate is the standin.capacity the load test uses: the race
// detector makes the in-process stand-in several times slower, so it gets
// a capacity it can still reach on a loaded 2-core machine.
func capacityRate() float64 {
	if raceEnabled {
		return 25
	}
	return 200
}

// capacityPool is a pool of mixed zstd envelopes for the rig's projects.
func (g *rig) capacityPool(t *testing.T) *pool.Pool {
	t.Helper()
	pl, err := pool.Build(context.Background(), pool.Options{Seed: 5, Size: 400, Projects: g.ps, Encoding: compression.Zstd})
	if err != nil {
		t.Fatal(err)
	}
	return blast.ForSending(pl)
}

// warmUp sends one envelope per project and waits until the upstream has
// them all: the configs are cached and the pacer's idle credit is what
// remains.
func warmUp(t *testing.T, g *rig, s *standin) {
	t.Helper()
	before := g.srv.DataEnvelopes()
	for _, p := range g.ps {
		if status, _, body := s.post(t, p, envelopeOf("", item("check_in"))); status != 200 {
			t.Fatalf("warm-up: %d %s", status, body)
		}
	}
	waitFor(t, 10*time.Second, "warm-up envelopes at the upstream", func() bool {
		return g.srv.DataEnvelopes()-before == int64(len(g.ps))
	})
}

// machineStall describes how the machine stalled during a load window, or
// is "" if it did not: blast's open-loop schedule ran 100 ms late at some
// point, or the window overran by more than 10%. (blast's own validity
// bound, lag p99 ≤ 5 ms, is routinely missed with the stand-in and the
// upstream beside it on 2 cores and says nothing about the stand-in's pace.)
func machineStall(res *blast.Result, window, took time.Duration) string {
	if lag := res.Quantile(blast.MetricLag, 1); lag > 100*time.Millisecond || took > window*110/100 {
		return fmt.Sprintf("the machine stalled (a %s window at %g/s took %s, blast's send lag reached %s)", window, res.Rate, took.Round(time.Millisecond), lag.Round(time.Millisecond))
	}
	return ""
}

// TestCapacityBacklog runs the in-process stand-in with standin.capacity N
// against the real fake upstream. Offered 2N/s it answers 200 to every
// envelope, forwards ≈ N/s while the load lasts, holds the rest, and
// forwards that backlog at ≈ N/s after the load stops, as Relay 26.4.0
// was seen to do above its capacity (orchestrate --rates 1200 on this
// 2-core machine: 1,200/s accepted, 276/s forwarded, backlog +900/s, RSS
// +27 MiB/s, still forwarding 20 s after). Offered 0.7N/s nothing waits.
//
// Accounting (every envelope answered 200 and forwarded once) is checked on
// every attempt. The timing checks are retried, up to three attempts, only
// when the machine demonstrably stalled during the attempt.
func TestCapacityBacklog(t *testing.T) {
	n := capacityRate()
	for _, tc := range []struct {
		name    string
		offered float64 // × capacity
	}{
		{"above capacity", 2},
		{"below capacity", 0.7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for attempt := 1; ; attempt++ {
				problems, stalled := capacityAttempt(t, n, tc.offered)
				if len(problems) == 0 {
					return
				}
				if stalled != "" && attempt < 3 {
					t.Logf("attempt %d: %s while %s; trying again", attempt, strings.Join(problems, "; "), stalled)
					continue
				}
				for _, p := range problems {
					t.Error(p)
				}
				if stalled != "" {
					t.Logf("every attempt stalled (last: %s)", stalled)
				}
				return
			}
		})
	}
}

// capacityAttempt is one run of TestCapacityBacklog: a fresh upstream and
// stand-in, offered × n envelopes/s for 3 s.
func capacityAttempt(t *testing.T, n, offeredX float64) (problems []string, stalled string) {
	t.Helper()
	const window = 3 * time.Second
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	g := newRig(t, upstream.Config{})
	s := startStandin(t, g.url, func(c *Config) { c.Capacity = n })
	defer s.stop()
	warmUp(t, g, s)
	pl := g.capacityPool(t)

	offered := offeredX * n
	d0, t0 := g.srv.DataEnvelopes(), time.Now()
	res, err := blast.Run(context.Background(), blast.Config{Target: s.url, Pool: pl, Rate: offered, Duration: window, SDKClient: "standin-test/1.0"})
	if err != nil {
		t.Fatal(err)
	}
	d1, t1 := g.srv.DataEnvelopes(), time.Now()
	if res.OK != res.Sent || res.Dropped != 0 {
		t.Errorf("blast at %g/s: sent %d, 2xx %d, by status %v, errors %v, dropped %d", offered, res.Sent, res.OK, res.ByStatus, res.Errors, res.Dropped)
	}
	elapsed := t1.Sub(t0)
	fwdRate := float64(d1-d0) / elapsed.Seconds()
	backlog := res.OK - (d1 - d0)
	stalled = machineStall(res, window, elapsed)

	waitFor(t, 30*time.Second, "the backlog forwarded", func() bool { return g.srv.DataEnvelopes()-d0 >= res.OK })
	drain := time.Since(t1)
	t.Logf("capacity %g/s, offered %g/s for %s: sent %d in %s, forwarded %.0f/s during the load, backlog %d at its end, forwarded in %s",
		n, offered, window, res.Sent, elapsed.Round(time.Millisecond), fwdRate, backlog, drain.Round(time.Millisecond))
	if offeredX > 1 {
		if fwdRate < 0.85*n || fwdRate > 1.15*n {
			problem("forwarded %.0f/s during the load, want %g/s ±15%%", fwdRate, n)
		}
		if want := (offered - n) * window.Seconds(); float64(backlog) < 0.6*want {
			problem("backlog %d when the load stopped, want ≈ %.0f", backlog, want)
		}
		// The backlog goes out at capacity, not at once.
		want := time.Duration(float64(backlog) / n * float64(time.Second))
		if drain < want*8/10 || drain > 2*want+2*time.Second {
			problem("backlog of %d forwarded in %s, want ≈ %s at %g/s", backlog, drain, want, n)
		}
	} else {
		if sendRate := float64(res.Sent) / elapsed.Seconds(); fwdRate < 0.85*sendRate {
			problem("forwarded %.0f/s during the load, sent %.0f/s", fwdRate, sendRate)
		}
		if drain > time.Second {
			problem("below capacity the last envelopes took %s after the load", drain)
		}
	}
	if got := g.srv.DataEnvelopes() - d0; got != res.OK {
		t.Errorf("upstream got %d data envelopes for %d accepted", got, res.OK)
	}
	return problems, stalled
}
