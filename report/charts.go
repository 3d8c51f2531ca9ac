package report

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/relayload/relayload/orchestrate"
)

const chartW, chartH = 7 * vg.Inch, 4.2 * vg.Inch

// Charts writes the SVG charts into dir and returns their paths: CPU cores
// against rate, latency percentiles against rate (log scale) and RSS over
// time for each step. A chart with nothing to show is skipped.
func Charts(dir string, rep *orchestrate.Report) ([]string, error) {
	var out []string
	for _, c := range []struct {
		name string
		fn   func(*orchestrate.Report) (*plot.Plot, bool)
	}{
		{CPUChart, cpuChart}, {LatencyChart, latencyChart}, {RSSChart, rssChart},
	} {
		p, ok := c.fn(rep)
		if !ok {
			continue
		}
		path := filepath.Join(dir, c.name)
		if err := p.Save(chartW, chartH, path); err != nil {
			return out, fmt.Errorf("report: %s: %w", c.name, err)
		}
		out = append(out, path)
	}
	return out, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

func buildPoints(rep *orchestrate.Report, build string, f func(*orchestrate.Point) float64, positive bool) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range rep.Summary {
		if pt.Build != build || pt.Verdict == orchestrate.VerdictFailed {
			continue
		}
		v := f(pt)
		if positive && v <= 0 {
			continue
		}
		xys = append(xys, plotter.XY{X: pt.Rate, Y: v})
	}
	return xys
}

// addLinePoints adds xys to p as a line with a marker at each point, in
// colour c with marker shape; false if plotter rejects the points (NaN, Inf).
func addLinePoints(p *plot.Plot, xys plotter.XYs, c color.Color, shape draw.GlyphDrawer) (*plotter.Line, *plotter.Scatter, bool) {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, nil, false
	}
	l.Color, s.Color = c, c
	s.Shape = shape
	p.Add(l, s)
	return l, s, true
}

func cpuChart(rep *orchestrate.Report) (*plot.Plot, bool) {
	proc := who(rep)
	p := newPlot(proc+" CPU against rate", "target envelopes per second", "cores (idle subtracted)")
	any := false
	for i, b := range rep.Setup.Builds {
		xys := buildPoints(rep, b.Name, func(pt *orchestrate.Point) float64 { return pt.NetCores }, false)
		if len(xys) == 0 {
			continue
		}
		any = true
		l, s, ok := addLinePoints(p, xys, plotutil.Color(i), plotutil.Shape(i))
		if !ok {
			continue
		}
		p.Legend.Add(b.Name+" (median)", l, s)
		// Every round as a faint point, so the spread is visible.
		var all plotter.XYs
		for _, st := range rep.Steps {
			if st.Build == b.Name && !st.Failed && st.Verdict != orchestrate.VerdictInterrupted {
				all = append(all, plotter.XY{X: st.Rate, Y: st.CPU.NetCores})
			}
		}
		if rep.Setup.Rounds > 1 && len(all) > 0 {
			sc, err := plotter.NewScatter(all)
			if err == nil {
				sc.Color = fade(plotutil.Color(i))
				sc.Shape = draw.CircleGlyph{}
				p.Add(sc)
			}
		}
		idle := buildPoints(rep, b.Name, func(pt *orchestrate.Point) float64 { return pt.IdleCores }, false)
		if len(idle) > 0 {
			il, err := plotter.NewLine(idle)
			if err == nil {
				il.Color = plotutil.Color(i)
				il.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				p.Add(il)
				p.Legend.Add(b.Name+" idle", il)
			}
		}
	}
	p.Y.Min = 0
	return p, any
}

func latencyChart(rep *orchestrate.Report) (*plot.Plot, bool) {
	p := newPlot("Response latency against rate", "target envelopes per second", "milliseconds (log scale)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	multi := len(rep.Setup.Builds) > 1
	any := false
	qs := []struct {
		name string
		f    func(*orchestrate.Point) float64
	}{
		{"p50", func(pt *orchestrate.Point) float64 { return pt.Latency.P50 }},
		{"p90", func(pt *orchestrate.Point) float64 { return pt.Latency.P90 }},
		{"p99", func(pt *orchestrate.Point) float64 { return pt.Latency.P99 }},
		{"max", func(pt *orchestrate.Point) float64 { return pt.Latency.Max }},
	}
	n := 0
	for _, b := range rep.Setup.Builds {
		for j, q := range qs {
			xys := buildPoints(rep, b.Name, q.f, true)
			if len(xys) == 0 {
				continue
			}
			any = true
			l, s, ok := addLinePoints(p, xys, plotutil.Color(n), plotutil.Shape(j))
			if !ok {
				continue
			}
			name := q.name
			if multi {
				name = b.Name + " " + name
			}
			p.Legend.Add(name, l, s)
			n++
		}
	}
	return p, any
}

func rssChart(rep *orchestrate.Report) (*plot.Plot, bool) {
	p := newPlot(who(rep)+" resident memory during each step", "seconds since blast started", "RSS (MB)")
	p.Legend.Top, p.Legend.Left = false, false // memory grows: the bottom right stays clear
	steps := rep.Steps
	if len(steps) > 12 { // keep the chart readable: first round only
		var first []*orchestrate.Step
		for _, st := range steps {
			if st.Round == 1 {
				first = append(first, st)
			}
		}
		steps = first
	}
	any := false
	for i, st := range steps {
		var xys plotter.XYs
		for _, s := range st.Series {
			xys = append(xys, plotter.XY{X: s.T, Y: s.RSSMB})
		}
		if len(xys) < 2 {
			continue
		}
		any = true
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		p.Add(l)
		label := fmt.Sprintf("#%d %s/s", st.Index, num(st.Rate))
		if len(rep.Setup.Builds) > 1 {
			label = fmt.Sprintf("#%d %s %s/s", st.Index, st.Build, num(st.Rate))
		}
		p.Legend.Add(label, l)
	}
	p.Y.Min = 0
	return p, any
}

func fade(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 90}
}
