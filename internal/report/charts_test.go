package report

import (
	"testing"
	"time"

	"gonum.org/v1/plot"

	"github.com/relayload/relayload/internal/orchestrate"
)

// TestWholeSeconds: a last second the drain's end cut short is left out
// of a step's chart; a whole one, or one of unknown length, stays.
func TestWholeSeconds(t *testing.T) {
	for _, tc := range []struct {
		span time.Duration
		want int
	}{
		{5003 * time.Millisecond, 5}, // the drain ended 3 ms into second 5
		{5900 * time.Millisecond, 5}, // or 900 ms into it
		{6 * time.Second, 6},         // at its end
		{5995 * time.Millisecond, 6}, // within 10 ms of it
		{0, 6},                       // unknown
	} {
		st := &orchestrate.Step{Seconds: seconds(100, 100, 6), CPU: orchestrate.CPU{CostSpan: tc.span}}
		if got := len(wholeSeconds(st)); got != tc.want {
			t.Errorf("span %s: %d seconds, want %d", tc.span, got, tc.want)
		}
	}
	// Drawn: the panels end where the whole seconds do.
	rep := sample()
	st := rep.Steps[0]
	st.CPU.CostSpan = 13400 * time.Millisecond // 14 seconds in the series
	if p := stepPanels(rep, st)[0][0]; p.X.Max != 13 {
		t.Errorf("x axis ends at %v, want 13", p.X.Max)
	}
}

// TestRateCharts: one rate gets an axis around it; a step sent as fast
// as possible is not drawn against a target rate it did not have.
func TestRateCharts(t *testing.T) {
	rep := sample()
	p, ok := cpuChart(rep)
	if !ok || p.X.Min != 200 || p.X.Max != 500 {
		t.Errorf("cpu chart: %v, x from %v to %v, want 200 to 500 (max left out)", ok, p.X.Min, p.X.Max)
	}
	p, ok = latencyChart(rep)
	if !ok || p.X.Min != 200 || p.X.Max != 500 {
		t.Errorf("latency chart: %v, x from %v to %v, want 200 to 500", ok, p.X.Min, p.X.Max)
	}
	var one []*orchestrate.Point
	for _, pt := range rep.Summary {
		if pt.Rate == 200 || pt.Rate == orchestrate.RateMax {
			one = append(one, pt)
		}
	}
	rep.Summary = one
	for name, chart := range map[string]func(*orchestrate.Report) (*plot.Plot, bool){"cpu": cpuChart, "latency": latencyChart} {
		p, ok := chart(rep)
		if !ok || !(p.X.Min < 200 && p.X.Max > 200) {
			t.Errorf("%s chart of one rate: x from %v to %v", name, p.X.Min, p.X.Max)
		}
	}
}
