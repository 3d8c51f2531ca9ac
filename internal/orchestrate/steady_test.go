package orchestrate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/upstream"
)

// relayModel makes the per-second inputs of a step: blast sends rate/s
// for secs seconds, all accepted; Relay forwards at most capacity/s (what
// it cannot, it buffers and forwards later), and drops the share loss of
// what it accepted; its RSS grows by mibPerBacklog per envelope waiting.
func relayModel(rate, capacity, secs, drainSecs int, loss float64) ([]blast.Window, upstream.Timeline, []relayproc.Sample) {
	var ws []blast.Window
	var fwd []int64
	var smp []relayproc.Sample
	backlog := 0.0
	cpu := 0.0
	for s := 0; s < secs+drainSecs; s++ {
		in := 0
		if s < secs {
			in = rate
			ws = append(ws, blast.Window{Second: s, Sent: int64(rate), OK: int64(rate)})
		}
		backlog += float64(in) * (1 - loss)
		out := math.Min(backlog, float64(capacity))
		backlog -= out
		fwd = append(fwd, int64(math.Round(out)))
		for k := range 10 { // 10 Hz, 1 ms per forwarded envelope
			cpu += out / 10 * 0.001
			smp = append(smp, relayproc.Sample{At: time.Duration(s)*time.Second + time.Duration(k+1)*100*time.Millisecond,
				CPU: cpu, RSS: uint64(100<<20 + backlog*(1<<10))})
		}
	}
	return ws, upstream.Timeline{Envelopes: fwd}, smp
}

func TestSecondsSeries(t *testing.T) {
	start := time.Unix(1000, 0)
	ws, tl, smp := relayModel(300, 200, 10, 5, 0)
	tl.Start = start
	pts := secondsSeries(15, ws, start, tl, smp, 0, 1)
	if len(pts) != 15 {
		t.Fatalf("%d points", len(pts))
	}
	for i, p := range pts {
		wantSent := int64(300)
		if i >= 10 {
			wantSent = 0
		}
		wantBacklog := int64(100 * (i + 1)) // 100/s more than Relay forwards
		if i >= 10 {
			wantBacklog = int64(1000 - 200*(i-9)) // then 200/s drained
		}
		if p.T != i || p.Sent != wantSent || p.Accepted != wantSent || p.Backlog != wantBacklog {
			t.Errorf("second %d: %+v, want sent %d backlog %d", i, p, wantSent, wantBacklog)
		}
		if i > 0 && i < 10 && math.Abs(p.Cores-0.2) > 0.001 {
			t.Errorf("second %d: %.3f cores, want 0.2", i, p.Cores)
		}
		if want := float64(100) + float64(p.Backlog)/1024; i < 14 && math.Abs(p.RSSMiB-want) > 0.01 {
			t.Errorf("second %d: RSS %.2f MiB, want %.2f", i, p.RSSMiB, want)
		}
	}
	// A timeline started 2 s before blast (blast's second 0 is its second
	// 2): earlier arrivals fold into second 0.
	tl.Start = start.Add(-2 * time.Second)
	tl.Envelopes = append([]int64{5, 7}, tl.Envelopes...)
	pts = secondsSeries(15, ws, start, tl, smp, 0, 1)
	if pts[0].Forwarded != 5+7+200 || pts[1].Forwarded != 200 {
		t.Errorf("shifted: %+v %+v", pts[0], pts[1])
	}
}

func TestSteadyState(t *testing.T) {
	tests := []struct {
		name           string
		rate, capacity int
		loss           float64
		kept           bool
		fwdRate        float64
		growth         float64
	}{
		{"below capacity", 200, 400, 0, true, 200, 0},
		{"at capacity", 400, 400, 0, true, 400, 0},
		{"above capacity", 800, 400, 0, false, 400, 400},
		{"far above", 1400, 770, 0, false, 770, 630},
		// 92% of what it accepts: the backlog grows by less than one
		// batching interval over the half, but steadily (seen with Relay
		// 26.4.0, transactions at 300/s).
		{"just below what it needs", 300, 277, 0, false, 277, 23},
		// Relay drops 20% on purpose (rate limits inside accepted
		// envelopes): not a backlog once that share is left out.
		{"drops a share", 500, 1000, 0.2, true, 400, 0},
	}
	for _, tc := range tests {
		ws, tl, smp := relayModel(tc.rate, tc.capacity, 20, 0, tc.loss)
		pts := secondsSeries(20, ws, tl.Start, tl, smp, 0, 1)
		sd := steadyState(pts, 2, 20, tc.loss, smp, 0)
		if sd.KeptPace() != tc.kept || math.Abs(sd.ForwardedRate-tc.fwdRate) > 1 || math.Abs(sd.BacklogGrowth-tc.growth) > 1 {
			t.Errorf("%s: kept %v forwarded %.1f/s growth %.1f/s (%+v), want %v %.0f %.0f", tc.name, sd.KeptPace(), sd.ForwardedRate, sd.BacklogGrowth, sd, tc.kept, tc.fwdRate, tc.growth)
		}
		if sd.Seconds != 18 || sd.AcceptedRate != float64(tc.rate) || sd.Allowance != float64(tc.rate) || sd.GrowthSpan != 8 {
			t.Errorf("%s: %+v", tc.name, sd)
		}
		wantRSS := float64(tc.growth) / 1024 // MiB per second, from the model's 1 KiB per waiting envelope
		if math.Abs(sd.RSSSlope-wantRSS) > 0.01 {
			t.Errorf("%s: RSS slope %.3f MiB/s, want %.3f", tc.name, sd.RSSSlope, wantRSS)
		}
		if want := int64(float64(tc.rate-tc.capacity) * 20); tc.capacity < tc.rate && sd.BacklogEnd != want {
			t.Errorf("%s: backlog at end %d, want %d", tc.name, sd.BacklogEnd, want)
		}
	}
	// A backlog that grows steadily by less than 3% of the accepted rate
	// is not falling behind; by 10% (less than one batching interval over
	// the half) or by more than one interval, it is.
	for _, tc := range []struct {
		grow float64
		kept bool
	}{{2, true}, {10, false}, {30, false}} {
		pts := make([]SecondPoint, 20)
		for i := range pts {
			pts[i].Accepted = 100
			pts[i].Forwarded = 100
			if i >= 10 {
				pts[i].Forwarded = 100 - int64(tc.grow)
			}
		}
		// 9 s of growth measured (second-half points 10..19).
		if sd := steadyState(pts, 0, 20, 0, nil, 0); sd.KeptPace() != tc.kept {
			t.Errorf("growing %.0f/s: kept %v (%+v)", tc.grow, sd.KeptPace(), sd)
		}
	}
	// Too short to tell: kept pace by default, and the window is reported.
	if sd := steadyState(make([]SecondPoint, 5), 2, 3, 0, nil, 0); !sd.KeptPace() || sd.Seconds != 1 {
		t.Errorf("one second: %+v", sd)
	}
	if sd := steadyState(nil, 0, 10, 0, nil, 0); sd.Seconds != 0 || sd.CatchUp != -1 {
		t.Errorf("no points: %+v", sd)
	}
}

func TestWindowSeconds(t *testing.T) {
	for _, tc := range []struct {
		warmup, elapsed time.Duration
		from, to        int
	}{
		{2 * time.Second, 30 * time.Second, 2, 32},
		{300 * time.Millisecond, 1500 * time.Millisecond, 1, 1},
		{0, 10 * time.Second, 0, 10},
		{2 * time.Second, 200 * time.Millisecond, 2, 2},
	} {
		from, to := windowSeconds(&blast.Result{Warmup: tc.warmup, Elapsed: tc.elapsed})
		if from != tc.from || to != tc.to {
			t.Errorf("warm-up %s, elapsed %s: [%d, %d), want [%d, %d)", tc.warmup, tc.elapsed, from, to, tc.from, tc.to)
		}
	}
}

func TestTrueCost(t *testing.T) {
	a := relayproc.Sample{At: 10 * time.Second, CPU: 5}
	b := relayproc.Sample{At: 30 * time.Second, CPU: 25.4} // 20 s, 20.4 cpu-s
	ms, span, cpu, n := trueCost(a, b, 0.02, 4000)
	// 20.4 − 0.02 × 20 = 20 cpu-s over 4000 forwarded: 5 ms each.
	if math.Abs(ms-5) > 1e-9 || span != 20*time.Second || math.Abs(cpu-20) > 1e-9 || n != 4000 {
		t.Errorf("cost %v ms, span %v, cpu %v, n %d", ms, span, cpu, n)
	}
	// Above capacity: Relay accepted 3× what it forwarded; the cost is
	// per forwarded envelope, so it is not diluted.
	if ms, _, _, _ := trueCost(a, b, 0.02, 4000); ms != 5 {
		t.Errorf("cost %v", ms)
	}
	if ms, _, _, _ := trueCost(a, relayproc.Sample{}, 0, 10); ms != 0 {
		t.Errorf("no end reading: %v", ms)
	}
	if ms, _, _, _ := trueCost(a, b, 0, 0); ms != 0 {
		t.Errorf("nothing forwarded: %v", ms)
	}
}

func TestCostBelowIdle(t *testing.T) {
	// The CI run that asked for this: 65 envelopes over 3 s, load CPU
	// 0.05 × 3 − idle 0.04 × 3 read as −0.0495 cpu-s.
	low := CPU{IdleCores: 0.04, CostSpan: 3 * time.Second, CostCPUSecs: -0.0495, CostEnvelopes: 65, MsPerEnv: -0.76}
	n := costBelowIdle(low)
	if !strings.HasPrefix(n, NoteCostBelowIdle) || !strings.Contains(n, "(0.024 cores over 3.0 s, idle 0.040)") || !strings.Contains(n, "-0.76 ms") {
		t.Errorf("note %q", n)
	}
	for _, c := range []CPU{
		{IdleCores: 0.04, CostSpan: 3 * time.Second, CostCPUSecs: 0.3, CostEnvelopes: 65, MsPerEnv: 4.6}, // measured
		{CostSpan: 3 * time.Second, CostCPUSecs: -0.1},                                                   // nothing forwarded
		{CostEnvelopes: 10}, // no end reading
	} {
		if n := costBelowIdle(c); n != "" {
			t.Errorf("%+v: %q", c, n)
		}
	}
}

func TestFit(t *testing.T) {
	if s, e := fit([]float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}); math.Abs(s-2) > 1e-12 || e != 0 {
		t.Errorf("slope %v ± %v", s, e)
	}
	// y = x + noise ±1: slope 1, standard error sqrt(Σr²/(n−2))/sqrt(Σ(x−x̄)²).
	s, e := fit([]float64{0, 1, 2, 3}, []float64{1, 0, 3, 2})
	if math.Abs(s-0.6) > 1e-12 || math.Abs(e-math.Sqrt(3.2/2)/math.Sqrt(5)) > 1e-12 {
		t.Errorf("noisy: slope %v ± %v", s, e)
	}
	if s, _ := fit([]float64{1}, []float64{1}); s != 0 {
		t.Error("one point")
	}
	if s, _ := fit([]float64{2, 2}, []float64{1, 5}); s != 0 {
		t.Error("no spread in x")
	}
}
