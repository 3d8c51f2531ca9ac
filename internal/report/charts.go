package report

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/relayload/relayload/internal/orchestrate"
)

const (
	chartW, chartH = 7 * vg.Inch, 4.2 * vg.Inch
	// A step chart's three panels share its width.
	stepW, stepH = 7 * vg.Inch, 7.5 * vg.Inch
)

// maxStepCharts bounds the per-step charts: beyond it, the first round
// only, and at most this many of those.
const maxStepCharts = 24

// FontFamily is what the SVG charts ask for. Their text is laid out with
// gonum's Liberation Sans; a viewer without it takes a sans-serif font of
// about the same widths instead of its default serif.
const FontFamily = "Liberation Sans, DejaVu Sans, Arial, sans-serif"

// chartFont is the typeface of every chart's text (gonum's own copy of
// Liberation, sans variant) and svgFamily the family name vgsvg writes for it.
var chartFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

const svgFamily = "Liberation Sans"

// saveSVG draws an SVG of w×h with fn into path, asking for FontFamily
// wherever vgsvg wrote the font's own name.
func saveSVG(path string, w, h vg.Length, fn func(draw.Canvas)) error {
	c := vgsvg.New(w, h)
	fn(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	b := bytes.ReplaceAll(buf.Bytes(), []byte("font-family:"+svgFamily+";"), []byte("font-family:"+FontFamily+";"))
	return WriteFile(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// Charts writes the SVG charts into dir and returns their paths: CPU cores
// against rate, latency percentiles against rate (log scale), RSS over
// time for each step, and one chart per step second by second (StepChart).
// A chart with nothing to show is skipped.
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
		if err := saveSVG(path, chartW, chartH, func(dc draw.Canvas) { p.Draw(margin(dc)) }); err != nil {
			return out, fmt.Errorf("report: %s: %w", c.name, err)
		}
		out = append(out, path)
	}
	for _, st := range chartedSteps(rep) {
		name := stepChartName(st)
		path := filepath.Join(dir, name)
		panels := stepPanels(rep, st)
		err := saveSVG(path, stepW, stepH, func(dc draw.Canvas) {
			t := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4),
				PadLeft: vg.Points(4), PadRight: vg.Points(12), PadY: vg.Points(8)}
			cs := plot.Align(panels, t, margin(dc))
			for j := range panels {
				panels[j][0].Draw(cs[j][0])
			}
		})
		if err != nil {
			return out, fmt.Errorf("report: %s: %w", name, err)
		}
		out = append(out, path)
	}
	return out, nil
}

// margin leaves room around a chart so that nothing is drawn at the
// image's edge: the last tick label of the x axis ran off the canvas, and
// the y axis's label touched its left edge.
func margin(dc draw.Canvas) draw.Canvas {
	return draw.Crop(dc, vg.Points(6), -vg.Points(22), vg.Points(6), -vg.Points(6))
}

// rateTicks are gonum's default ticks labelled with thousands separators:
// "10,000" reads as ten thousand where "10000" was misread (and a font
// without gonum's metrics once drew it as "1000").
type rateTicks struct{ plot.DefaultTicks }

// Ticks implements plot.Ticker.
func (t rateTicks) Ticks(min, max float64) []plot.Tick {
	ts := t.DefaultTicks.Ticks(min, max)
	for i := range ts {
		if ts[i].Label == "" {
			continue
		}
		if v, err := strconv.ParseFloat(ts[i].Label, 64); err == nil && v == math.Trunc(v) {
			ts[i].Label = Num(v)
		}
	}
	return ts
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.X.Tick.Label.Font,
		&p.Y.Label.TextStyle.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		f.Typeface, f.Variant = chartFont.Typeface, chartFont.Variant
	}
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
	p.X.Tick.Marker = rateTicks{}
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
	p.X.Tick.Marker = rateTicks{}
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
	p := newPlot(who(rep)+" resident memory during each step", "seconds since blast started", "RSS (MiB)")
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
		label := fmt.Sprintf("#%d %s/s", st.Index, Num(st.Rate))
		if len(rep.Setup.Builds) > 1 {
			label = fmt.Sprintf("#%d %s %s/s", st.Index, st.Build, Num(st.Rate))
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

// stepChartName is the file name of a step's chart.
func stepChartName(st *orchestrate.Step) string { return fmt.Sprintf(StepChart, st.Index) }

// chartedSteps are the steps that get a chart of their own: those with a
// per-second series; beyond maxStepCharts the first round only, and at
// most maxStepCharts of them.
func chartedSteps(rep *orchestrate.Report) []*orchestrate.Step {
	var all, first []*orchestrate.Step
	for _, st := range rep.Steps {
		if len(st.Seconds) == 0 {
			continue
		}
		all = append(all, st)
		if st.Round <= 1 {
			first = append(first, st)
		}
	}
	if len(all) <= maxStepCharts {
		return all
	}
	return first[:min(len(first), maxStepCharts)]
}

// stepPanels are a step's chart, second by second from blast's start to
// the end of the drain, as three panels stacked on one x axis: envelopes
// per second (sent, accepted, forwarded), the backlog, and RSS. Each
// panel shades the measured window and marks blast's end. Rates are drawn
// at the middle of their second, the backlog and RSS at its end.
func stepPanels(rep *orchestrate.Report, st *orchestrate.Step) [][]*plot.Plot {
	proc := who(rep)
	n := float64(len(st.Seconds))
	from := rep.Setup.Warmup.Seconds()
	to := from + rep.Setup.Duration.Seconds()
	end := to
	if st.Elapsed > 0 {
		end = from + st.Elapsed.Seconds()
	} else {
		for _, s := range st.Seconds {
			if s.Sent > 0 {
				end = float64(s.T + 1)
			}
		}
	}
	if st.StoppedEarly != "" {
		to = min(to, end) // the window ended when blast was stopped
	}
	window := band{x0: min(from, n), x1: min(to, n), color: color.NRGBA{R: 70, G: 110, B: 200, A: 28}}
	blastEnd := vline{x: end, style: draw.LineStyle{Color: color.Gray{Y: 60}, Width: vg.Points(1),
		Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}}

	title := fmt.Sprintf("Step %d: %s, %s", st.Index, st.Build, rateLabel(st))
	if rep.Setup.Rounds > 1 {
		title += fmt.Sprintf(", round %d", st.Round)
	}
	if st.Verdict != "" {
		title += " (" + st.Verdict + ")"
	}
	rates := newPlot(title, "", "envelopes per second")
	backlog := newPlot("", "", "backlog (envelopes)")
	rss := newPlot("", "seconds since blast started", proc+" RSS (MiB)")

	var sent, acc, fwd, bl, mem plotter.XYs
	bl = append(bl, plotter.XY{X: 0, Y: 0})
	for _, s := range st.Seconds {
		x := float64(s.T)
		sent = append(sent, plotter.XY{X: x + 0.5, Y: float64(s.Sent)})
		acc = append(acc, plotter.XY{X: x + 0.5, Y: float64(s.Accepted)})
		fwd = append(fwd, plotter.XY{X: x + 0.5, Y: float64(s.Forwarded)})
		bl = append(bl, plotter.XY{X: x + 1, Y: float64(s.Backlog)})
		if s.RSSMiB > 0 {
			mem = append(mem, plotter.XY{X: x + 1, Y: s.RSSMiB})
		}
	}
	for _, p := range []*plot.Plot{rates, backlog, rss} {
		p.Add(window, blastEnd)
	}
	rates.Legend.Top, rates.Legend.Left = true, false
	rates.Legend.TextStyle.Font.Size = vg.Points(9)
	for i, l := range []struct {
		name string
		xys  plotter.XYs
	}{{"sent", sent}, {"accepted", acc}, {"forwarded", fwd}} {
		if line := addLine(rates, l.xys, plotutil.Color(i)); line != nil {
			line.Dashes = plotutil.Dashes(i)
			rates.Legend.Add(l.name, line)
		}
	}
	rates.Legend.Add("measured window", window)
	rates.Legend.Add("blast's end", blastEnd)
	addLine(backlog, bl, plotutil.Color(3))
	addLine(rss, mem, plotutil.Color(4))

	for _, p := range []*plot.Plot{rates, backlog, rss} {
		p.X.Min, p.X.Max = 0, n
		p.Y.Min = math.Min(p.Y.Min, 0)
		if p.Y.Max <= p.Y.Min {
			p.Y.Max = p.Y.Min + 1 // no data: an empty panel
		}
	}
	rates.Y.Max *= 1.7 // room for the legend above the lines
	return [][]*plot.Plot{{rates}, {backlog}, {rss}}
}

// addLine adds xys to p as a plain line (no glyphs) in colour c; nil
// when there are fewer than two points or plotter rejects them.
func addLine(p *plot.Plot, xys plotter.XYs, c color.Color) *plotter.Line {
	if len(xys) < 2 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil
	}
	l.Color = c
	p.Add(l)
	return l
}

// band shades the x range [x0, x1] over a panel's whole height. It has no
// data range, so it does not stretch the axes.
type band struct {
	x0, x1 float64
	color  color.Color
}

// Plot implements plot.Plotter.
func (b band) Plot(c draw.Canvas, p *plot.Plot) {
	if b.x1 <= b.x0 {
		return
	}
	trX, _ := p.Transforms(&c)
	r := vg.Rectangle{Min: vg.Point{X: trX(b.x0), Y: c.Min.Y}, Max: vg.Point{X: trX(b.x1), Y: c.Max.Y}}
	c.SetColor(b.color)
	c.Fill(r.Path())
}

// Thumbnail implements plot.Thumbnailer.
func (b band) Thumbnail(c *draw.Canvas) {
	c.SetColor(b.color)
	c.Fill(c.Rectangle.Path())
}

// vline is a vertical line at x over a panel's whole height.
type vline struct {
	x     float64
	style draw.LineStyle
}

// Plot implements plot.Plotter.
func (l vline) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x := trX(l.x)
	if x < c.Min.X || x > c.Max.X {
		return
	}
	c.StrokeLine2(l.style, x, c.Min.Y, x, c.Max.Y)
}

// Thumbnail implements plot.Thumbnailer.
func (l vline) Thumbnail(c *draw.Canvas) {
	x := (c.Min.X + c.Max.X) / 2
	c.StrokeLine2(l.style, x, c.Min.Y, x, c.Max.Y)
}
