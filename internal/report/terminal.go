package report

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/orchestrate"
)

// Text writes the summary printed on stdout at the end of a run, no line
// wider than cli.Width: the headline, the per-rate table with the columns
// that answer where Relay stops keeping up, why the rates that did not keep
// up did not, the harness's CPU, comparisons, the gate, failed steps,
// faults and notes. Every table in full is in report.md; reportMD is its
// path ("" when none was written: the summary says how to get one).
func Text(w io.Writer, rep *orchestrate.Report, reportMD string) {
	t := &terminal{w: w, rep: rep}
	if rep.Interrupted {
		t.para("INTERRUPTED: partial report, the sweep did not finish.")
		t.blank()
	}
	for _, line := range strings.Split(Headline(rep), "\n") {
		t.para(line)
	}
	for _, section := range []func(){t.sliceRuns, t.perRate, t.notKeptUp, t.harnessCPU, t.findMax, t.comparisons, t.gate,
		t.failed, t.faults, t.notes} {
		section()
	}
	t.blank()
	if reportMD != "" {
		t.para("Every step, items by type, outcomes, Relay's metrics and the setup: " + reportMD)
	} else {
		t.para("--out DIR writes the full report: report.md (every step, items by type, outcomes, Relay's metrics), results.json, results.csv and charts.")
	}
}

// terminal is one summary being written.
type terminal struct {
	w   io.Writer
	rep *orchestrate.Report
}

func (t *terminal) blank() { fmt.Fprintln(t.w) }

// para writes a paragraph wrapped to cli.Width.
func (t *terminal) para(s string) { fmt.Fprintln(t.w, cli.Wrap(s, cli.Width, "")) }

// head writes a section's title after a blank line.
func (t *terminal) head(s string) {
	t.blank()
	fmt.Fprintln(t.w, s)
}

// item writes "- s" wrapped, its further lines under s.
func (t *terminal) item(s string) {
	fmt.Fprintln(t.w, "- "+strings.ReplaceAll(cli.Wrap(s, cli.Width-2, ""), "\n", "\n  "))
}

// perRate writes the per-rate table, narrowed to the terminal, and what
// its columns mean.
func (t *terminal) perRate() {
	rep := t.rep
	if len(rep.Summary) == 0 {
		return
	}
	multi, rounds, proc := len(rep.Setup.Builds) > 1, rep.Setup.Rounds > 1, who(rep)
	title := "Per rate"
	if rounds {
		title += fmt.Sprintf(" (median of %d rounds)", rep.Setup.Rounds)
	}
	t.head(title)
	var cols []string
	if multi {
		cols = append(cols, "build")
	}
	cols = append(cols, ">target/s", ">accepted/s", ">forwarded/s", ">backlog", ">p99 ms", ">"+proc+" CPU", ">CPU/envelope", ">peak RSS", "verdict")
	tb := NewTable(cols...)
	var senders int
	var partial bool
	for _, p := range rep.Summary {
		var row []string
		if multi {
			row = append(row, p.Build)
		}
		c, e := costCells(p, rounds)
		fwd, backlog := Num(p.ForwardedRate), Num(p.BacklogEnd)
		if p.Verdict == orchestrate.VerdictFailed {
			c, e, fwd, backlog = "–", "–", "–", "–"
		}
		if p.Rate == orchestrate.RateMax {
			for _, st := range pointSteps(rep, p) {
				senders = max(senders, st.Concurrency)
			}
		}
		verdict := p.Verdict
		if p.Partial {
			verdict += " (partial)"
			partial = true
		}
		row = append(row, rateCell(p.Rate), Num(p.AcceptedRate), fwd, backlog, ms(p.Latency.P99), c, e, mb(p.PeakRSS), verdict)
		tb.Add(row...)
	}
	left := tb.WritePlain(t.w, cli.Width, "backlog", "peak RSS", "accepted/s", "p99 ms", "CPU/envelope")
	var legend []string
	if senders > 0 {
		legend = append(legend, fmt.Sprintf("max: sent as fast as possible by %d senders, each waiting for its answer.", senders))
	}
	whose := "Relay's"
	if rep.Harness {
		whose = "the harness's"
	}
	legend = append(legend,
		"forwarded/s: data envelopes that reached the fake upstream per second in the measured window.",
		"backlog: accepted but not forwarded at the window's end.",
		fmt.Sprintf("%s CPU: cores, idle subtracted; CPU/envelope: %s CPU time per envelope forwarded.", proc, whose))
	if rounds {
		legend = append(legend, "±: half the spread between rounds.")
	}
	if partial {
		legend = append(legend, "partial: measured before the interrupt.")
	}
	if len(left) > 0 {
		legend = append(legend, "Left out here to fit: "+strings.Join(left, ", ")+".")
	}
	t.blank()
	t.para(strings.Join(legend, " "))
}

// notKeptUp says, for each rate that did not keep up, why: the reasons of
// its first round that did not (every round's are in report.md).
func (t *terminal) notKeptUp() {
	var lines []string
	multi := len(t.rep.Setup.Builds) > 1
	for _, p := range t.rep.Summary {
		if p.Verdict == orchestrate.VerdictKeptUp || p.Verdict == orchestrate.VerdictFailed {
			continue
		}
		var first *orchestrate.Step
		var judged, not int
		for _, st := range pointSteps(t.rep, p) {
			judged++
			if st.Verdict != orchestrate.VerdictKeptUp && len(st.Reasons) > 0 {
				not++
				if first == nil {
					first = st
				}
			}
		}
		if first == nil {
			continue
		}
		label := rateCell(p.Rate)
		if p.Rate != orchestrate.RateMax {
			label += "/s"
		}
		if multi {
			label = p.Build + " at " + label
		}
		if judged > 1 {
			label += fmt.Sprintf(" (%d of %d rounds; round %d)", not, judged, first.Round)
		}
		lines = append(lines, label+": "+first.Verdict+": "+strings.Join(first.Reasons, "; "))
	}
	if len(lines) == 0 {
		return
	}
	t.head("Why not kept up")
	for _, l := range lines {
		t.item(l)
	}
}

// harnessCPU states the harness's CPU beside Relay: median and range over
// the steps, in cores and in % of Relay's CPU.
func (t *terminal) harnessCPU() {
	if t.rep.Harness {
		return
	}
	var c, share []float64
	for _, st := range t.rep.Steps {
		if !st.Failed && st.CPU.HarnessCores > 0 {
			c = append(c, st.CPU.HarnessCores)
			share = append(share, st.CPU.HarnessShare)
		}
	}
	if len(c) == 0 {
		return
	}
	rng := func(v []float64, f func(float64) string) string {
		lo, hi := f(slices.Min(v)), f(slices.Max(v))
		if lo == hi {
			return lo
		}
		return lo + "–" + hi
	}
	t.blank()
	t.para(fmt.Sprintf("harness CPU (blast and the fake upstream, beside Relay): %s cores, %s%% of Relay's CPU.",
		rng(c, cores), rng(share, func(v float64) string { return fmt.Sprintf("%.0f", v) })))
}

// findMax writes the bisection in a sentence per build.
func (t *terminal) findMax() {
	if len(t.rep.FindMax) == 0 {
		return
	}
	t.head("Highest rate kept up with (bisection)")
	for _, fm := range t.rep.FindMax {
		var probes []string
		for _, p := range fm.Probes {
			probes = append(probes, Num(p))
		}
		s := fm.Build + ": "
		switch {
		case fm.KeptUp > 0 && fm.FellBehind > 0:
			s += fmt.Sprintf("kept up at %s/s, fell behind at %s/s", Num(fm.KeptUp), Num(fm.FellBehind))
		case fm.KeptUp > 0:
			s += fmt.Sprintf("kept up at %s/s", Num(fm.KeptUp))
		case fm.FellBehind > 0:
			s += fmt.Sprintf("fell behind at %s/s", Num(fm.FellBehind))
		default:
			s += "no verdict"
		}
		s += "; probes " + strings.Join(probes, " → ")
		if fm.Stopped != "" {
			s += "; stopped early: " + fm.Stopped
		}
		t.item(s + ".")
	}
}

// comparisons writes the other builds against the baseline, narrowed.
func (t *terminal) comparisons() {
	cs := t.rep.Comparisons
	if len(cs) == 0 {
		return
	}
	t.head("Builds compared with " + cs[0].Baseline)
	tb := NewTable(">target/s", "build", ">CPU/envelope", ">change", "over the rounds", ">Relay CPU change", ">p99 change", ">peak RSS change")
	noise := false
	for _, c := range cs {
		tb.Add(rateCell(c.Rate), c.Build, msUnit(c.MsPerEnv), pct(c.MsPerEnvChange), pairedCell(c.MsPerEnvPaired),
			pct(c.CoresChange), pct(c.P99Change), pct(c.PeakRSSChange))
		noise = noise || c.MsPerEnvPaired != nil
	}
	left := tb.WritePlain(t.w, cli.Width, "peak RSS change", "p99 change", "Relay CPU change")
	t.blank()
	s := "Changes are against " + cs[0].Baseline + "."
	if noise {
		s += " over the rounds: each round a pair, the change with its 95% interval; lower or higher only when the interval excludes no change (report.md says more)."
	} else {
		s += " A change's interval needs --rounds 2 or more (or --compare-in slices)."
	}
	if len(left) > 0 {
		s += " Left out here to fit: " + strings.Join(left, ", ") + "."
	}
	t.para(s)
}

// gate writes the thresholds crossed: changes against a baseline run,
// and absolute limits.
func (t *terminal) gate() {
	g := t.rep.Gate
	if g == nil {
		return
	}
	t.head(gateTitle(g))
	if len(g.Breaches) == 0 {
		t.para(fmt.Sprintf("No threshold crossed (%d checks).", g.Compared))
	} else {
		t.para(fmt.Sprintf("%d of %d checks crossed their threshold:", len(g.Breaches), g.Compared))
		for _, b := range g.Breaches {
			t.item(b.String())
		}
	}
	if len(g.Unmeasured) > 0 {
		t.para(unmeasuredHead)
		for _, u := range g.Unmeasured {
			t.item(u)
		}
	}
	if len(g.Missing) > 0 {
		var rates []string
		for _, r := range g.Missing {
			rates = append(rates, rateCell(r))
		}
		t.para(fmt.Sprintf("Not in the baseline, so not checked: %s.", strings.Join(rates, ", ")))
	}
}

// failed writes each failed step's error (Relay's log tail is in report.md
// and was printed as the step failed).
func (t *terminal) failed() {
	var lines []string
	for _, st := range t.rep.Steps {
		if st.Failed {
			lines = append(lines, fmt.Sprintf("step %d (%s, %s): %s", st.Index, st.Build, rateLabel(st), st.Error))
		}
	}
	if len(lines) == 0 {
		return
	}
	t.head("Failed steps")
	for _, l := range lines {
		t.item(l)
	}
}

// faults writes what happened around each injected fault.
func (t *terminal) faults() {
	for _, st := range t.rep.Steps {
		if st.Fault != nil {
			t.head(fmt.Sprintf("Fault in step %d (%s)", st.Index, rateLabel(st)))
			t.para(st.Fault.Summary + ".")
		}
	}
}

// noteShape is a note with its figures left out: notes of the same shape
// say the same of different steps.
var noteShape = regexp.MustCompile(`[0-9][0-9.,]*`)

// notes writes the run's notes, then the steps' notes, those of the same
// shape once: "steps 1–3, 5, e.g. step 1: …" (each step's are in
// report.md).
func (t *terminal) notes() {
	type group struct {
		note  string // the first step's
		steps []int
	}
	var groups []*group
	byShape := map[string]*group{}
	for _, st := range t.rep.Steps {
		for _, n := range st.Notes {
			shape := noteShape.ReplaceAllString(n, "#")
			g := byShape[shape]
			if g == nil {
				g = &group{note: n}
				byShape[shape] = g
				groups = append(groups, g)
			}
			if !slices.Contains(g.steps, st.Index) {
				g.steps = append(g.steps, st.Index)
			}
		}
	}
	if len(t.rep.Notes) == 0 && len(groups) == 0 {
		return
	}
	t.head("Notes")
	for _, n := range t.rep.Notes {
		t.item(n)
	}
	for _, g := range groups {
		if len(g.steps) == 1 {
			t.item(fmt.Sprintf("step %d: %s", g.steps[0], g.note))
			continue
		}
		t.item(fmt.Sprintf("steps %s, e.g. step %d: %s", indexList(g.steps), g.steps[0], g.note))
	}
}

// indexList writes ascending step numbers with runs as ranges: "1–3, 5".
func indexList(ix []int) string {
	var parts []string
	for i := 0; i < len(ix); {
		j := i
		for j+1 < len(ix) && ix[j+1] == ix[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, fmt.Sprint(ix[i]))
		case j == i+1:
			parts = append(parts, fmt.Sprint(ix[i]), fmt.Sprint(ix[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d–%d", ix[i], ix[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
