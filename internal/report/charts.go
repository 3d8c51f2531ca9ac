package report

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
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
	dc := draw.New(c)
	dc.SetColor(color.White) // the legend's strip too: readable on a dark page
	dc.Fill(dc.Rectangle.Path())
	fn(dc)
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
		leg := takeLegend(p)
		lw := legendWidth(&leg)
		err := saveSVG(path, chartW+lw, chartH, func(dc draw.Canvas) {
			dc = margin(dc)
			pc, lc := splitLegend(dc, lw)
			p.Draw(pc)
			leg.Draw(draw.Crop(lc, 0, 0, 0, -titleHeight(p)))
		})
		if err != nil {
			return out, fmt.Errorf("report: %s: %w", c.name, err)
		}
		out = append(out, path)
	}
	for _, st := range chartedSteps(rep) {
		name := stepChartName(st)
		path := filepath.Join(dir, name)
		panels := stepPanels(rep, st)
		leg := takeLegend(panels[0][0])
		lw := legendWidth(&leg)
		err := saveSVG(path, stepW+lw, stepH, func(dc draw.Canvas) {
			pc, lc := splitLegend(margin(dc), lw)
			t := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4),
				PadLeft: vg.Points(4), PadRight: vg.Points(12), PadY: vg.Points(8)}
			cs := plot.Align(panels, t, pc)
			for j := range panels {
				panels[j][0].Draw(cs[j][0])
			}
			top := lc.Max.Y - cs[0][0].Max.Y + titleHeight(panels[0][0])
			leg.Draw(draw.Crop(lc, 0, 0, 0, -top))
		})
		if err != nil {
			return out, fmt.Errorf("report: %s: %w", name, err)
		}
		out = append(out, path)
	}
	return out, nil
}

// takeLegend removes p's legend and returns it, to be drawn beside the
// plot (splitLegend) rather than over its data.
func takeLegend(p *plot.Plot) plot.Legend {
	leg := p.Legend
	p.Legend = plot.NewLegend()
	leg.Top, leg.Left = true, true // icons first, text after them, from the top
	leg.Padding = vg.Points(2)
	return leg
}

// legendWidth is the strip a legend needs, with room for a viewer whose
// fallback font is wider than gonum's metrics (drawn over the data, text
// laid out for Liberation Sans ran into lines and icons in a wider font):
// none for an empty legend.
func legendWidth(l *plot.Legend) vg.Length {
	w := l.Rectangle(draw.Canvas{}).Size().X
	if w == 0 {
		return 0
	}
	return w*1.15 + vg.Points(16)
}

// splitLegend divides dc into the plot's part and a strip of width w on
// the right for its legend.
func splitLegend(dc draw.Canvas, w vg.Length) (plotC, legendC draw.Canvas) {
	plotC = draw.Crop(dc, 0, -w, 0, 0)
	legendC = draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: dc.Max.X - w + vg.Points(12), Y: dc.Min.Y}, Max: dc.Max}}
	return plotC, legendC
}

// titleHeight is the room p's title takes at the top, so that a legend
// beside p starts level with its data.
func titleHeight(p *plot.Plot) vg.Length {
	if p.Title.Text == "" {
		return 0
	}
	return p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding
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
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.X.Tick.Label.Font,
		&p.Y.Label.TextStyle.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		f.Typeface, f.Variant = chartFont.Typeface, chartFont.Variant
	}
	p.Add(plotter.NewGrid())
	return p
}

// buildPoints are f of the build's points against their target rate. A
// step sent as fast as possible has none: drawn at the rate accepted, it
// squeezed every target rate into a corner (Relay accepts far faster than
// it forwards), so it is left to the tables.
func buildPoints(rep *orchestrate.Report, build string, f func(*orchestrate.Point) float64, positive bool) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range rep.Summary {
		if pt.Build != build || pt.Verdict == orchestrate.VerdictFailed || pt.Rate == orchestrate.RateMax {
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

// rateAxis makes the x axis of a chart against rate readable when every
// point sits at one rate: that rate in the middle, half of it either side
// (gonum would draw a range of zero width).
func rateAxis(p *plot.Plot, xs []float64) {
	if len(xs) == 0 {
		return
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	if lo == hi && lo > 0 {
		p.X.Min, p.X.Max = lo/2, lo*3/2
	}
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
	var xs []float64
	netCores := func(pt *orchestrate.Point) float64 { return pt.NetCores }
	for i, b := range rep.Setup.Builds {
		xys := buildPoints(rep, b.Name, netCores, false)
		if len(xys) == 0 {
			continue
		}
		any = true
		for _, xy := range xys {
			xs = append(xs, xy.X)
		}
		l, s, ok := addLinePoints(p, xys, plotutil.Color(i), plotutil.Shape(i))
		if !ok {
			continue
		}
		p.Legend.Add(b.Name+" (median)", l, s)
		// Every round as a faint point, so the spread is visible.
		var all plotter.XYs
		for _, st := range rep.Steps {
			if st.Build == b.Name && !st.Failed && st.Verdict != orchestrate.VerdictInterrupted && st.Rate != orchestrate.RateMax {
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
	p.Y.Max *= 1.1 // no marker on the frame
	rateAxis(p, xs)
	return p, any
}

func latencyChart(rep *orchestrate.Report) (*plot.Plot, bool) {
	p := newPlot("Response latency against rate", "target envelopes per second", "ms (log scale)")
	p.X.Tick.Marker = rateTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
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
	// A quantile keeps its colour and marker across builds; a build is
	// told by its line's dashes.
	var xs []float64
	for i, b := range rep.Setup.Builds {
		for j, q := range qs {
			xys := buildPoints(rep, b.Name, q.f, true)
			if len(xys) == 0 {
				continue
			}
			any = true
			for _, xy := range xys {
				xs = append(xs, xy.X)
			}
			l, s, ok := addLinePoints(p, xys, plotutil.Color(j), plotutil.Shape(j))
			if !ok {
				continue
			}
			l.Dashes = plotutil.Dashes(i)
			name := q.name
			if multi {
				name = b.Name + " " + name
			}
			p.Legend.Add(name, l, s)
		}
	}
	rateAxis(p, xs)
	if any {
		// Room above and below, so that no marker sits on the frame.
		p.Y.Min, p.Y.Max = p.Y.Min/1.5, p.Y.Max*1.5
	}
	return p, any
}

// secondTicks label a time axis in whole seconds, every 1, 2, 5, 10, 20,
// 30 or 60 s (at most ten labels), with an unlabelled tick every second
// between them up to 10 s apart.
type secondTicks struct{}

// Ticks implements plot.Ticker.
func (secondTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	if !(max > min) {
		return ts
	}
	step := 60.0
	for _, s := range []float64{1, 2, 5, 10, 20, 30, 60} {
		if (max-min)/s <= 10 {
			step = s
			break
		}
	}
	for v := math.Ceil(min); v <= max; v++ {
		switch {
		case math.Mod(v, step) == 0:
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
		case step <= 10:
			ts = append(ts, plot.Tick{Value: v})
		}
	}
	return ts
}

// logTicks label a log axis at 1, 2 and 5 times the powers of ten in its
// range, with unlabelled ticks at the other whole multiples: gonum's
// powers of ten alone left a range within one decade with one label.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	if !(min > 0) || !(max > min) {
		return ts
	}
	for e := math.Floor(math.Log10(min)); e <= math.Ceil(math.Log10(max)); e++ {
		pow := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			v := m * pow
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
				if v >= 1000 {
					t.Label = Num(v)
				}
			}
			ts = append(ts, t)
		}
	}
	return ts
}

func rssChart(rep *orchestrate.Report) (*plot.Plot, bool) {
	p := newPlot(who(rep)+" resident memory during each step", "seconds since blast started", "RSS (MiB)")
	p.X.Tick.Marker = secondTicks{}
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
		label := fmt.Sprintf("#%d %s", st.Index, rateLabel(st))
		if len(rep.Setup.Builds) > 1 {
			label = fmt.Sprintf("#%d %s %s", st.Index, st.Build, rateLabel(st))
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

// wholeSeconds are the step's seconds without a last one the drain's end
// cut short: counted over part of a second, its rates would read as a
// collapse. The series spans CPU.CostSpan (blast's start to the drain's
// end) when that is known.
func wholeSeconds(st *orchestrate.Step) []orchestrate.SecondPoint {
	secs := st.Seconds
	span := st.CPU.CostSpan.Seconds()
	if n := len(secs); n > 1 && span > 0 && span < float64(n)-0.01 {
		secs = secs[:n-1]
	}
	return secs
}

// stepPanels are a step's chart, second by second from blast's start to
// the end of the drain (whole seconds: wholeSeconds), as three panels
// stacked on one x axis: envelopes per second (sent, accepted,
// forwarded), the backlog, and RSS. Each panel shades the measured window
// and marks blast's end. Rates are drawn at the middle of their second,
// the backlog and RSS at its end.
func stepPanels(rep *orchestrate.Report, st *orchestrate.Step) [][]*plot.Plot {
	proc := who(rep)
	seconds := wholeSeconds(st)
	n := float64(len(seconds))
	from := rep.Setup.Warmup.Seconds()
	to := from + rep.Setup.Duration.Seconds()
	end := to
	if st.Elapsed > 0 {
		end = from + st.Elapsed.Seconds()
	} else {
		for _, s := range seconds {
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
	rates.Y.Tick.Marker, backlog.Y.Tick.Marker = rateTicks{}, rateTicks{}
	for _, p := range []*plot.Plot{rates, backlog, rss} {
		p.X.Tick.Marker = secondTicks{}
	}

	var sent, acc, fwd, bl, mem plotter.XYs
	bl = append(bl, plotter.XY{X: 0, Y: 0})
	for _, s := range seconds {
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
		p.Y.Max *= 1.08 // a line at the top stays off the frame
	}
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
