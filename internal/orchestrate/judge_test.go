package orchestrate

import (
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/pool"
)

// Relay stopped for 5 s (SIGSTOP) and resumed: requests that timed out at
// the client were accepted and forwarded after all (the gap is negative),
// and the reason says so instead of calling them not accepted.
func TestJudgeTimeoutsAcceptedLater(t *testing.T) {
	cfg := Config{MaxP99: 10 * time.Second, MaxCatchUp: 3 * time.Second}
	for _, tc := range []struct {
		name    string
		errors  map[string]int64
		status  map[string]int64
		gap     int64
		settled bool
		want    string
	}{
		{"every timeout accepted later", map[string]int64{"timeout": 9}, nil, -9, true,
			"9 of 2000 requests timed out at the client (timeout×9), yet were accepted and forwarded later: the upstream received 9 more envelopes than blast saw accepted"},
		{"some of them", map[string]int64{"timeout": 9}, map[string]int64{"503": 3}, -4, true,
			"12 of 2000 requests not answered 2xx in time (503×3, timeout×9); 4 of the timeouts were accepted and forwarded later: the upstream received 4 more envelopes than blast saw accepted"},
		{"timeouts never forwarded", map[string]int64{"timeout": 9}, nil, 0, true, "9 of 2000 requests not accepted (timeout×9)"},
		{"not settled: nothing known", map[string]int64{"timeout": 9}, nil, -9, false, "9 of 2000 requests not accepted (timeout×9)"},
	} {
		var failed int64
		for _, n := range tc.errors {
			failed += n
		}
		for _, n := range tc.status {
			failed += n
		}
		st := &Step{Rate: 200, Sent: 2000, OK: 2000 - failed, Failures: failed, AchievedRate: 200, Errors: tc.errors, ByStatus: tc.status,
			Drain: Drain{Settled: tc.settled}, Upstream: UpstreamSeen{Gap: tc.gap}, Steady: Steady{Seconds: 10, Allowance: 200}}
		judge(st, cfg, false)
		if st.Verdict != VerdictFellBehind || !strings.Contains(strings.Join(st.Reasons, "|"), tc.want) {
			t.Errorf("%s: %s %q, want %q", tc.name, st.Verdict, st.Reasons, tc.want)
		}
	}
}

// A step whose load generator fell behind its schedule (what blast calls
// INVALID) is never the ceiling, measuring the harness or a Relay: the
// bisection of make demo once judged such a step "kept up".
func TestFindMaxLagIsNeverTheCeiling(t *testing.T) {
	cfg := Config{MaxP99: time.Second, MaxCatchUp: 3 * time.Second, Rates: []float64{5000, 60000}, FindMaxProbes: 6}
	for _, harness := range []bool{true, false} {
		r := &runner{cfg: cfg}
		fm := r.findMax(t.Context(), Build{Name: "x"}, func(_ Build, _ int, rate float64, _ bool) *Step {
			// In this model blast keeps to its schedule up to a rate and lags above it.
			lag := 1.0
			if rate > 15000 {
				lag = 7.9
			}
			st := &Step{Rate: rate, Sent: int64(rate) * 3, OK: int64(rate) * 3, AchievedRate: rate, AcceptedRate: rate, LagP99: lag,
				Drain: Drain{Settled: true}, Steady: Steady{ForwardedRate: rate, AcceptedRate: rate, Allowance: rate, Seconds: 3}}
			judge(st, cfg, harness)
			return st
		})
		if fm.KeptUp > 15000 || fm.KeptUp == 0 {
			t.Errorf("harness %v: %+v: a step blast lagged on was taken as kept up with", harness, fm)
		}
		if !harness && !strings.Contains(fm.Stopped, "the load generator fell behind its schedule") {
			t.Errorf("with a Relay: %+v, want the search stopped at the harness-limited step", fm)
		}
	}
}

// TestNeverForwarded: envelopes of a replayed kind of which no item reached
// the upstream (Relay 26.4.0 drops trace_metric items without an outcome)
// are left out of what Relay is expected to forward, and named; kinds that
// arrived, the pool's own kinds and client reports are not.
func TestNeverForwarded(t *testing.T) {
	kinds := []pool.Kind{pool.KindError, "trace_metric", "client_report", "feedback"}
	p := &pool.Pool{}
	for i := range 40 {
		p.Entries = append(p.Entries, pool.Entry{Kind: kinds[i%len(kinds)]})
	}
	res := &blast.Result{OKByKind: map[pool.Kind]int64{pool.KindError: 100, "trace_metric": 100, "client_report": 100, "feedback": 100}}
	for _, tc := range []struct {
		name   string
		corpus bool
		items  map[string]int64
		want   int64
		note   string
	}{
		{"generated pool", false, map[string]int64{"event": 100}, 0, ""},
		{"every kind arrived", true, map[string]int64{"event": 100, "trace_metric": 100, "feedback": 100}, 0, ""},
		// 100 measured plus a quarter of 40 warm-up envelopes.
		{"trace_metric dropped", true, map[string]int64{"event": 100, "feedback": 100}, 110, "110 trace_metric envelopes"},
		{"two dropped", true, map[string]int64{"event": 100}, 220, "110 feedback, 110 trace_metric envelopes"},
	} {
		r := &runner{pool: p}
		if tc.corpus {
			r.kindShare = kindShares(p)
		}
		n, note := r.neverForwarded(res, 40, tc.items)
		if n != tc.want || !strings.Contains(note, tc.note) {
			t.Errorf("%s: %d, %q; want %d, %q", tc.name, n, note, tc.want, tc.note)
		}
	}
}
