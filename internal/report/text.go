package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/replay"
)

// Headline is the report's answer, one line per build, e.g. "Relay kept
// up with about 900 envelopes per second" or "The harness on its own moves
// 15,900 envelopes per second", followed by where forwarding hit its
// ceiling ("At 1,400/s it forwarded only 770/s: …") and what a step sent
// as fast as possible did ("Sent as fast as possible (64 senders): …").
func Headline(rep *orchestrate.Report) string {
	if len(rep.SliceRuns) > 0 {
		return sliceHeadline(rep)
	}
	var lines []string
	for _, b := range rep.Setup.Builds {
		best := 0.0
		rate := rep.KeptUpWith[b.Name]
		for _, p := range rep.Summary {
			if p.Build == b.Name && p.Rate == rate && p.KeptUpJudged {
				best = p.AcceptedRate
			}
		}
		var fm *orchestrate.FindMax
		for i := range rep.FindMax {
			if rep.FindMax[i].Build == b.Name {
				fm = &rep.FindMax[i]
			}
		}
		verdicts := map[string]int{}
		var steps, maxSteps int
		for _, st := range rep.Steps {
			if st.Build == b.Name {
				verdicts[st.Verdict]++
				steps++
				if st.Rate == orchestrate.RateMax {
					maxSteps++
				}
			}
		}
		name := b.Name
		if rep.Harness {
			name = "The harness on its own"
		}
		var line string
		switch {
		case rate == 0 && len(rep.Steps) == 0:
			line = name + ": nothing was measured."
		case rate == 0 && rep.Interrupted && verdicts[orchestrate.VerdictKeptUp]+verdicts[orchestrate.VerdictFellBehind]+verdicts[orchestrate.VerdictHarnessLimited] == 0:
			line = name + ": interrupted before any step was judged; no verdict. What was measured is below, marked partial."
		case steps > 0 && verdicts[orchestrate.VerdictFailed] == steps:
			// A failure is not a verdict: say why, not that it fell behind.
			line = fmt.Sprintf("%s: every step failed: %s (see Failed steps).", name, firstError(rep, b.Name))
		case fm != nil && fm.KeptUp == 0 && fm.FellBehind == 0:
			line = fmt.Sprintf("%s: the search for the highest rate stopped before any verdict: %s.", name, fm.Stopped)
		case rate == 0 && steps > 0 && maxSteps == steps:
			// Only sent as fast as possible: maxSentence says it all.
		case rate == 0 && verdicts[orchestrate.VerdictHarnessLimited] > 0 && verdicts[orchestrate.VerdictKeptUp] == 0 && verdicts[orchestrate.VerdictFellBehind] == 0:
			line = fmt.Sprintf("%s could not be judged: in every step blast missed its schedule, so the load was not what was asked (1-minute load average %s; see the reasons below).",
				name, loadRange(rep))
		case rate == 0 && verdicts[orchestrate.VerdictKeptUp] > 0:
			line = fmt.Sprintf("%s kept up in %d of %d steps, but at no rate in every round that could be judged.", name,
				verdicts[orchestrate.VerdictKeptUp], steps)
		case rate == 0 && verdicts[orchestrate.VerdictHarnessLimited] > 0:
			line = fmt.Sprintf("%s kept up at no rate that could be judged: none of its %d steps kept up, and %d were harness-limited (blast missed its schedule), so not judged.",
				name, steps, verdicts[orchestrate.VerdictHarnessLimited])
		case rate == 0:
			line = fmt.Sprintf("%s did not keep up with any rate tried (lowest %s/s); try lower rates.", name, Num(lowestRate(rep)))
		case rep.Harness && fm != nil && fm.FellBehind > 0:
			line = fmt.Sprintf("The harness on its own moves about %s envelopes per second (it fell behind at %s/s): the ceiling for any Relay measurement on this machine.",
				Num(best), Num(fm.FellBehind))
		case rep.Harness && fm != nil && fm.Stopped == "":
			line = fmt.Sprintf("The harness on its own moves at least %s envelopes per second, the upper bound of the search; raise it to find the harness's ceiling.", Num(best))
		case rep.Harness:
			line = fmt.Sprintf("The harness on its own moves %s envelopes per second", Num(best)) + stopsAt(rep, b.Name, rate, "its ceiling")
		case fm != nil && fm.Stopped != "":
			line = fmt.Sprintf("%s kept up with at least %s envelopes per second; the search stopped there: %s.", name, Num(rate), fm.Stopped)
		case fm != nil && fm.FellBehind > 0:
			line = fmt.Sprintf("%s kept up with about %s envelopes per second (it fell behind at %s/s).", name, Num(rate), Num(fm.FellBehind))
		case fm != nil:
			line = fmt.Sprintf("%s kept up with %s envelopes per second, the upper bound of the search; raise it to find where it stops keeping up.", name, Num(rate))
		default:
			line = fmt.Sprintf("%s kept up with about %s envelopes per second", name, Num(rate)) + stopsAt(rep, b.Name, rate, "where it stops keeping up")
		}
		for _, s := range []string{ceilingSentence(rep, b.Name), maxSentence(rep, b.Name)} {
			if s != "" && line != "" {
				line += " "
			}
			line += s
		}
		if line == "" {
			line = name + ": the step sent as fast as possible failed (see Failed steps)."
		} else if n := verdicts[orchestrate.VerdictFailed]; n > 0 && n < steps {
			// A failure is no verdict, but it is no success either: say so
			// beside what the other steps found.
			line += fmt.Sprintf(" %d of %d steps failed: %s (see Failed steps).", n, steps, firstError(rep, b.Name))
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// stopsAt ends the headline's first sentence after "kept up with about
// RATE envelopes per second": where the build fell behind above rate (the
// lowest rate tried above it at which a judged step fell behind) and how
// to narrow it down, or that it never did and what to try to find what,
// or that the higher rates could not be judged.
func stopsAt(rep *orchestrate.Report, build string, rate float64, what string) string {
	next, higher := 0.0, false
	var limited, failed bool
	var limitedAt []float64 // rates above rate with a harness-limited step
	for _, st := range rep.Steps {
		if st.Build != build || st.Rate == orchestrate.RateMax || st.Rate <= rate {
			continue
		}
		if st.Failed {
			failed = true
			continue
		}
		switch st.Verdict {
		case orchestrate.VerdictFellBehind:
			if next == 0 || st.Rate < next {
				next = st.Rate
			}
			higher = true
		case orchestrate.VerdictHarnessLimited:
			limited = true
			if !slices.Contains(limitedAt, st.Rate) {
				limitedAt = append(limitedAt, st.Rate)
			}
		case orchestrate.VerdictKeptUp:
			higher = true
		}
	}
	if next == 0 {
		switch {
		case limited:
			return " (the highest rate tried that it kept up with; higher rates were harness-limited, not judged)."
		case higher:
			return " (the highest rate tried that it kept up with in every round)."
		case failed:
			return " (the highest rate tried that it kept up with; the steps at higher rates failed)."
		}
		return fmt.Sprintf(": it kept up at every rate tried; try higher rates or --find-max to find %s.", what)
	}
	var fell, rounds int
	for _, st := range rep.Steps {
		if st.Build == build && st.Rate == next && !st.Failed && st.Verdict != orchestrate.VerdictInterrupted {
			rounds++
			if st.Verdict == orchestrate.VerdictFellBehind {
				fell++
			}
		}
	}
	s := fmt.Sprintf(" and fell behind at %s/s", Num(next))
	if fell < rounds {
		s += fmt.Sprintf(" in %d of %d rounds", fell, rounds)
	}
	var between []string
	slices.Sort(limitedAt)
	for _, r := range limitedAt {
		if r < next {
			between = append(between, Num(r)+"/s")
		}
	}
	if len(between) > 0 {
		s += fmt.Sprintf(" (%s between could not be judged: harness-limited)", strings.Join(between, ", "))
	}
	return s + fmt.Sprintf("; --find-max --rates %s,%s narrows it down.", strconv.FormatFloat(rate, 'f', -1, 64), strconv.FormatFloat(next, 'f', -1, 64))
}

// firstError is the error of the build's first failed step.
func firstError(rep *orchestrate.Report, build string) string {
	for _, st := range rep.Steps {
		if st.Build == build && st.Failed {
			return st.Error
		}
	}
	return ""
}

// lowestRate is the lowest target rate tried, leaving out RateMax.
func lowestRate(rep *orchestrate.Report) float64 {
	low := 0.0
	for _, r := range rep.Setup.Rates {
		if r != orchestrate.RateMax && (low == 0 || r < low) {
			low = r
		}
	}
	return low
}

// backlogGrew is whether a step's backlog grew over the second half of its
// window by more than the allowance: forwarding fell behind accepting.
func backlogGrew(sd orchestrate.Steady) bool { return !sd.KeptPace() }

// ceilingSentence is the headline's sentence on the highest target rate
// at which the build fell behind with a growing backlog: what it forwarded
// there (median over those rounds) is its throughput ceiling. "" when no
// step did.
func ceilingSentence(rep *orchestrate.Report, build string) string {
	top := -1.0
	var fwd, growth []float64
	for _, st := range rep.Steps {
		if st.Build != build || st.Rate == orchestrate.RateMax || st.Failed ||
			st.Verdict != orchestrate.VerdictFellBehind || !backlogGrew(st.Steady) || st.Rate < top {
			continue
		}
		if st.Rate > top {
			top, fwd, growth = st.Rate, nil, nil
		}
		fwd = append(fwd, st.Steady.ForwardedRate)
		growth = append(growth, st.Steady.BacklogGrowth)
	}
	if top < 0 {
		return ""
	}
	verb, owner := "it forwarded", "Relay's"
	switch {
	case rep.Harness:
		verb, owner = "the fake upstream received", "the harness's"
	case len(rep.Setup.Builds) > 1:
		owner = "its"
	}
	return fmt.Sprintf("At %s/s %s only %s/s: %s ceiling here; the backlog grew %s/s.",
		Num(top), verb, Num(orchestrate.Median(fwd)), owner, Num(orchestrate.Median(growth)))
}

// maxSentence is the headline's sentence on the build's closed-loop step
// (sent as fast as possible): accepted, forwarded, RSS growth and peak, and
// why blast was stopped early. "" without such a step.
func maxSentence(rep *orchestrate.Report, build string) string {
	var p *orchestrate.Point
	for _, pt := range rep.Summary {
		if pt.Build == build && pt.Rate == orchestrate.RateMax && pt.Verdict != orchestrate.VerdictFailed {
			p = pt
		}
	}
	if p == nil {
		return ""
	}
	senders, stopped := 0, ""
	for _, st := range rep.Steps {
		if st.Build == build && st.Rate == orchestrate.RateMax && !st.Failed {
			senders = max(senders, st.Concurrency)
			if stopped == "" {
				stopped = st.StoppedEarly
			}
		}
	}
	s := "Sent as fast as possible"
	if senders > 0 {
		s += fmt.Sprintf(" (%d senders)", senders)
	}
	verb := "forwarded"
	if rep.Harness {
		verb = "the fake upstream received"
	}
	s += fmt.Sprintf(": accepted %s/s, %s %s/s", Num(p.AcceptedRate), verb, Num(p.ForwardedRate))
	if p.PeakRSS > 0 {
		s += fmt.Sprintf(", RSS %s to %s", mibPerSec(p.RSSSlope), mb(p.PeakRSS))
	}
	if stopped != "" {
		s += " (stopped: " + stopped + ")"
	}
	return s + "."
}

// maxTarget is a target rate in the per-rate table: "max (64 senders)"
// for the build's closed-loop step.
func maxTarget(rep *orchestrate.Report, p *orchestrate.Point) string {
	if p.Rate != orchestrate.RateMax {
		return Num(p.Rate)
	}
	for _, st := range pointSteps(rep, p) {
		if st.Concurrency > 0 {
			return fmt.Sprintf("max (%d senders)", st.Concurrency)
		}
	}
	return "max"
}

// pointSteps are the steps a summary point was made of (failed ones left out).
func pointSteps(rep *orchestrate.Report, p *orchestrate.Point) []*orchestrate.Step {
	var out []*orchestrate.Step
	for _, st := range rep.Steps {
		if st.Build == p.Build && st.Rate == p.Rate && !st.Failed && st.Verdict != orchestrate.VerdictInterrupted {
			out = append(out, st)
		}
	}
	return out
}

// pointCatchUp is the catch-up cell of a summary point: the median over
// the rounds when every round settled, else how long the drain waited
// ("> 20 s"), with how many rounds never settled when some did.
func pointCatchUp(rep *orchestrate.Report, p *orchestrate.Point) string {
	steps := pointSteps(rep, p)
	var unsettled int
	var drained time.Duration
	for _, st := range steps {
		if st.Steady.CatchUp < 0 {
			unsettled++
			drained = max(drained, st.Drain.Took)
		}
	}
	switch {
	case unsettled == 0 && p.CatchUp >= 0:
		return catchUp(p.CatchUp, 0)
	case unsettled > 0 && unsettled < len(steps):
		return fmt.Sprintf("%s in %d of %d", catchUp(-1, drained), unsettled, len(steps))
	}
	return catchUp(-1, drained)
}

// Markdown writes report.md; charts are the chart files to link, in the
// directory report.md is written to.
func Markdown(w io.Writer, rep *orchestrate.Report, charts []string) error {
	dir := ""
	if len(charts) > 0 {
		dir = filepath.Dir(charts[0])
	}
	return markdown(w, rep, dir, charts)
}

// markdown writes report.md into dir: files in dir (charts, flame graphs)
// are linked relative to it.
func markdown(w io.Writer, rep *orchestrate.Report, dir string, charts []string) error {
	title := "Relay load test"
	if rep.Harness {
		title = "Harness load test (no Relay)"
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	pg := &page{w: w, rep: rep, dir: dir, charts: charts,
		multi: len(rep.Setup.Builds) > 1, rounds: rep.Setup.Rounds > 1, proc: who(rep)}
	if rep.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: partial report, the sweep did not finish.")
		fmt.Fprintln(w)
	}
	for i, line := range strings.Split(Headline(rep), "\n") {
		if i > 0 {
			fmt.Fprintln(w) // a paragraph per build
		}
		pg.para(line)
	}
	for _, section := range []func(){pg.sliceRuns, pg.perRate, pg.findMax, pg.comparisons, pg.gate, pg.steps, pg.outcomes, pg.statsd,
		pg.canaries, pg.faults, pg.failed, pg.perf, pg.notes, pg.chartSection, pg.setup} {
		section()
	}
	return nil
}

// page is report.md being written.
type page struct {
	w             io.Writer
	rep           *orchestrate.Report
	dir           string   // report.md's directory (for chart links)
	charts        []string // chart files to link
	multi, rounds bool     // several builds; several rounds
	proc          string   // "Relay" or "harness"
}

// h writes a section heading.
func (pg *page) h(s string) { fmt.Fprintf(pg.w, "\n## %s\n\n", s) }

// para writes a paragraph wrapped to cli.Width (Markdown joins its lines).
func (pg *page) para(s string) { fmt.Fprintln(pg.w, cli.Wrap(s, cli.Width, "")) }

// perRate writes the per-rate table (medians over rounds) and what its columns mean.
func (pg *page) perRate() {
	w, rep, multi, rounds, proc := pg.w, pg.rep, pg.multi, pg.rounds, pg.proc
	if len(rep.Steps) == 0 {
		return // a comparison in slices has no steps
	}
	pg.h("Per rate" + map[bool]string{true: fmt.Sprintf(" (median of %d rounds)", rep.Setup.Rounds), false: ""}[rounds])
	cols := []string{}
	if multi {
		cols = append(cols, "build")
	}
	cols = append(cols, ">target/s", ">sent/s", ">accepted/s", ">forwarded/s", ">backlog", ">catch-up", ">p50 ms", ">p99 ms", ">max ms",
		">"+proc+" CPU", ">CPU per envelope", ">peak RSS", ">RSS slope", "verdict")
	t := NewTable(cols...)
	var senders bool
	for _, p := range rep.Summary {
		var row []string
		if multi {
			row = append(row, p.Build)
		}
		c, e := costCells(p, rounds)
		fwd, backlog, cu, slope := Num(p.ForwardedRate), Num(p.BacklogEnd), pointCatchUp(rep, p), mibPerSec(p.RSSSlope)
		if p.Verdict == orchestrate.VerdictFailed {
			c, e, fwd, backlog, cu, slope = "–", "–", "–", "–", "–", "–"
		}
		target := maxTarget(rep, p)
		senders = senders || p.Rate == orchestrate.RateMax
		verdict := p.Verdict
		if p.Partial {
			verdict += " (partial: what was measured before the interrupt)"
		}
		row = append(row, target, Num(p.AchievedRate), Num(p.AcceptedRate), fwd, backlog, cu, ms(p.Latency.P50),
			ms(p.Latency.P99), ms(p.Latency.Max), c, e, mb(p.PeakRSS), slope, verdict)
		t.Add(row...)
	}
	t.Write(w)
	subject, whose := "Relay", "Relay's"
	if rep.Harness {
		subject, whose = "the harness", "the harness's"
	}
	fmt.Fprintln(w)
	var legend []string
	if senders {
		legend = append(legend, "max: sent as fast as possible by that many senders, each waiting for the answer before sending again.")
	}
	legend = append(legend,
		fmt.Sprintf("forwarded/s: data envelopes that reached the fake upstream per second over the measured window; when the backlog grows, that is %s throughput ceiling.", whose),
		"backlog: envelopes accepted but not forwarded yet at the end of the window.",
		fmt.Sprintf("catch-up: from blast's end until the last envelope was forwarded, the time %s needed to work off its backlog (\"> 20 s\": still forwarding when the drain gave up).", subject),
		fmt.Sprintf("%s CPU: cores used, i.e. CPU time (user+system, all threads) over the measured window divided by its length, idle subtracted.", proc),
		fmt.Sprintf("CPU per envelope: %s CPU time from blast's start until forwarding settled, idle subtracted, divided by the envelopes forwarded in that time; "+
			"counted per forwarded envelope, it is not diluted above capacity, where %s accepts more than it processes.", whose, subject),
		fmt.Sprintf("RSS slope: how fast %s resident memory grew over the window.", whose))
	if rounds {
		legend = append(legend, "±: half the spread (max−min) between rounds, in % of the median.")
	}
	pg.para(strings.Join(legend, " "))
}

// gate writes the thresholds held against a baseline run or a comparison.
func (pg *page) gate() {
	g := pg.rep.Gate
	if g == nil {
		return
	}
	pg.h(gateTitle(g))
	for _, sec := range gateSections(g) {
		fmt.Fprintln(pg.w, sec.para)
		if len(sec.items) > 0 {
			fmt.Fprintln(pg.w)
		}
		for _, it := range sec.items {
			fmt.Fprintln(pg.w, "- "+it)
		}
		fmt.Fprintln(pg.w)
	}
}

// gateTitle is the gate section's title: against a baseline run, or the
// thresholds of --fail-on when there is none (limits, or a comparison's
// own intervals).
func gateTitle(g *orchestrate.GateResult) string {
	if g.Baseline != "" {
		return "Against the baseline " + g.Baseline
	}
	return "Thresholds (--fail-on)"
}

// unmeasuredHead introduces the limits AbsoluteGate could not hold.
const unmeasuredHead = "Not held, for want of a figure (neither passed nor crossed):"

// gateSection is a paragraph of the gate's section and its items.
type gateSection struct {
	para  string
	items []string
}

// gateSections say what the gate found: failed comparisons, thresholds
// crossed, thresholds it could not tell (and why), thresholds not in the
// baseline; "no threshold crossed" only when every check was made.
func gateSections(g *orchestrate.GateResult) []gateSection {
	var out []gateSection
	if len(g.Failed) > 0 {
		out = append(out, gateSection{fmt.Sprintf("The gate failed: %d comparison(s) failed, so nothing of them was checked:", len(g.Failed)), g.Failed})
	}
	if len(g.Breaches) > 0 {
		sec := gateSection{para: fmt.Sprintf("%d of %d checks crossed their threshold:", len(g.Breaches), g.Compared)}
		for _, b := range g.Breaches {
			sec.items = append(sec.items, b.String())
		}
		out = append(out, sec)
	}
	if len(g.Inconclusive) > 0 {
		sec := gateSection{para: fmt.Sprintf("%d check(s) could not tell (inconclusive):", len(g.Inconclusive))}
		for _, b := range g.Inconclusive {
			sec.items = append(sec.items, b.String())
		}
		out = append(out, sec)
	}
	if len(g.Unmeasured) > 0 {
		out = append(out, gateSection{unmeasuredHead, g.Unmeasured})
	}
	switch {
	case len(out) > 0:
	case g.Compared == 0:
		out = append(out, gateSection{para: "Nothing was checked."})
	default:
		out = append(out, gateSection{para: fmt.Sprintf("No threshold crossed (%d checks).", g.Compared)})
	}
	if len(g.Passed) > 0 {
		sec := gateSection{para: "Within their thresholds, on these intervals:"}
		for _, b := range g.Passed {
			sec.items = append(sec.items, b.String())
		}
		out = append(out, sec)
	}
	if len(g.Missing) > 0 {
		var rates []string
		for _, r := range g.Missing {
			rates = append(rates, rateCell(r))
		}
		out = append(out, gateSection{para: fmt.Sprintf("Not in the baseline, so not checked: %s.", strings.Join(rates, ", "))})
	}
	return out
}

// noiseCell is a comparison's noise verdict with its p-value.
// pairedCell is a paired change over rounds: the verdict, and the
// interval of a change it calls real.
func pairedCell(c *compare.Change) string {
	if c == nil {
		return "–"
	}
	if c.Verdict == compare.VerdictLower || c.Verdict == compare.VerdictHigher {
		return fmt.Sprintf("%s (%s to %s)", c.Verdict, pct1(c.Low), pct1(c.High))
	}
	return c.Verdict
}

// findMax writes the bisection, when there was one.
func (pg *page) findMax() {
	w, rep := pg.w, pg.rep
	if len(rep.FindMax) > 0 {
		pg.h("Highest rate kept up with (bisection)")
		t := NewTable("build", ">kept up at", ">fell behind at", "probes", "stopped early")
		for _, fm := range rep.FindMax {
			var probes []string
			for _, p := range fm.Probes {
				probes = append(probes, Num(p))
			}
			ku, fb := "–", "–"
			if fm.KeptUp > 0 {
				ku = Num(fm.KeptUp) + "/s"
			}
			if fm.FellBehind > 0 {
				fb = Num(fm.FellBehind) + "/s"
			}
			t.Add(fm.Build, ku, fb, strings.Join(probes, " → "), fm.Stopped)
		}
		t.Write(w)
	}
}

// comparisons writes the other builds against the baseline.
func (pg *page) comparisons() {
	w, rep := pg.w, pg.rep
	if len(rep.Comparisons) > 0 {
		pg.h("Builds compared with " + rep.Comparisons[0].Baseline)
		t := NewTable(">target/s", "build", ">"+rep.Comparisons[0].Baseline+" cores", ">cores", ">change",
			">CPU per envelope", ">change", "CPU per envelope over the rounds", ">p99 change", ">peak RSS change")
		noise := false
		for _, c := range rep.Comparisons {
			t.Add(Num(c.Rate), c.Build, cores(c.BaseCores), cores(c.Cores), pct(c.CoresChange),
				msUnit(c.MsPerEnv), pct(c.MsPerEnvChange), pairedCell(c.MsPerEnvPaired), pct(c.P99Change), pct(c.PeakRSSChange))
			noise = noise || c.MsPerEnvPaired != nil
		}
		t.Write(w)
		fmt.Fprintln(w)
		if noise {
			pg.para("change: of the medians over the rounds. over the rounds: each round ran both builds back to back, so it is a pair; the geometric mean of the per-round ratios with a 95% interval (Student's t on the log ratios); lower or higher only when the interval excludes no change, otherwise no change beyond the interval's half-width. A comparison in slices (--compare-in slices) gets many more pairs in the same time.")
		} else {
			pg.para("A change's interval needs --rounds 2 or more (or --compare-in slices).")
		}
	}
}

// steps writes one row per step.
func (pg *page) steps() {
	w, rep, multi, rounds := pg.w, pg.rep, pg.multi, pg.rounds
	if len(rep.Steps) == 0 {
		return
	}
	pg.h("Steps")
	cols := []string{">#"}
	if multi {
		cols = append(cols, "build")
	}
	if rounds {
		cols = append(cols, ">round")
	}
	cols = append(cols, ">target/s", ">forwarded (total)", ">gap", ">catch-up", "items by type", ">idle CPU")
	if !rep.Harness { // measuring the harness, its CPU is the measured one
		cols = append(cols, ">harness CPU")
	}
	cols = append(cols, ">ready", ">shutdown", ">step took", ">load 1m", "verdict")
	t := NewTable(cols...)
	for _, st := range rep.Steps {
		row := []string{fmt.Sprint(st.Index)}
		if multi {
			row = append(row, st.Build)
		}
		if rounds {
			row = append(row, fmt.Sprint(st.Round))
		}
		shut := secs(st.Shutdown.Took)
		if st.Shutdown.Killed {
			shut += " (killed)"
		}
		if rep.Harness {
			shut = "–"
		}
		ready := "–"
		if st.ReadyAfter > 0 {
			ready = secs(st.ReadyAfter)
		}
		cu := catchUp(st.Steady.CatchUp, st.Drain.Took)
		v := st.Verdict
		if len(st.Reasons) > 0 {
			v += ": " + strings.Join(st.Reasons, "; ")
		}
		if st.Failed {
			v, cu = "failed: "+st.Error, "–"
		}
		harness := "–"
		if st.CPU.HarnessCores > 0 {
			harness = fmt.Sprintf("%s (%.0f%%)", cores(st.CPU.HarnessCores), st.CPU.HarnessShare)
		}
		took := "–"
		if st.Took > 0 {
			took = fmt.Sprintf("%.0f s (%.0f%% outside)", st.Took.Seconds(), st.OutsideWindow)
		}
		row = append(row, rateCell(st.Rate), Num(float64(st.Upstream.Forwarded)), Num(float64(st.Upstream.Gap)), cu, kv(st.Upstream.ItemsByType),
			cores(st.CPU.IdleCores))
		if !rep.Harness {
			row = append(row, harness)
		}
		row = append(row, ready, shut, took, fmt.Sprintf("%.2f→%.2f", st.LoadAvg[0], st.LoadAvg[1]), v)
		t.Add(row...)
	}
	t.Write(w)
	what := "data envelopes (the SDK traffic Relay passed on, not its own metric and outcome envelopes; results.csv has both)"
	if rep.Harness {
		what = "data envelopes"
	}
	legend := []string{
		"forwarded (total): " + what + " the fake upstream received from the start of blast (its warm-up included) until the drain ended;",
		"gap: envelopes blast had accepted minus forwarded (negative when requests blast gave up on, e.g. timeouts, were still accepted and forwarded, or when Relay answered 429 for an envelope of which only some items were rate limited: it forwards the rest);",
		"catch-up: from blast's end until the last data envelope arrived;",
		"idle CPU: " + whoseProc(rep) + " cores before blast started, subtracted from " + pg.proc + " CPU and CPU per envelope;",
	}
	if !rep.Harness {
		legend = append(legend, "harness CPU: the cores orchestrate itself (blast, the fake upstream) used over the measured window, and in % of Relay's CPU in it;")
	}
	legend = append(legend, "step took: the whole step, and the share of it outside the measured window (Relay's start, warm-up, idle, drain, shutdown).")
	fmt.Fprintln(w)
	pg.para(strings.Join(legend, " "))
}

// whoseProc is "Relay's" or "the harness's".
func whoseProc(rep *orchestrate.Report) string {
	if rep.Harness {
		return "the harness's"
	}
	return "Relay's"
}

// outcomes writes the outcomes Relay reported.
func (pg *page) outcomes() {
	w, rep, proc := pg.w, pg.rep, pg.proc
	if hasOutcomes(rep) {
		pg.h("Outcomes " + proc + " reported")
		t := NewTable(">#", ">target/s", "outcome", "category", "reason", ">quantity")
		for _, st := range rep.Steps {
			for _, o := range st.Upstream.Outcomes {
				t.Add(fmt.Sprint(st.Index), rateCell(st.Rate), o.Outcome, o.Category, o.Reason, Num(float64(o.Quantity)))
			}
		}
		t.Write(w)
		fmt.Fprintln(w)
		pg.para("Outcomes are what Relay reported to the upstream about the envelopes and items it rate limited, filtered or dropped, by data category and reason; with --quota they show the quota at work.")
	}
}

// canaries writes what the upstream found of the PII canaries.
func (pg *page) canaries() {
	w, rep := pg.w, pg.rep
	scanned := false
	for _, st := range rep.Steps {
		scanned = scanned || st.Upstream.Canaries.ItemsScanned > 0
	}
	if !scanned {
		return
	}
	pg.h("PII canaries")
	if rep.Harness {
		pg.para("Without a Relay nothing scrubs: the fake upstream receives every canary as blast planted it, so there is nothing to judge here.")
		return
	}
	t := NewTable(">#", ">target/s", ">items scanned", ">scrubbed items", "leaked", "controls kept")
	for _, st := range rep.Steps {
		c := st.Upstream.Canaries
		if c.ItemsScanned == 0 {
			continue
		}
		leaked := "none"
		if len(c.Leaks) > 0 {
			leaked = kv(c.Leaks)
		}
		t.Add(fmt.Sprint(st.Index), rateCell(st.Rate), Num(float64(c.ItemsScanned)), Num(float64(c.ScrubbedItems)), leaked, kv(c.KeptFound))
	}
	t.Write(w)
	fmt.Fprintln(w)
	pg.para("The pool plants values that Relay's default data scrubbing must remove (card numbers, IBANs, passwords, …) and a control it must leave alone (public_note); the fake upstream looks for each in what Relay forwards. leaked: canaries that reached the upstream; controls kept: controls found, as they should be.")
}

// statsd writes Relay's own metrics from the StatsD receiver.
func (pg *page) statsd() {
	w, rep := pg.w, pg.rep
	if hasStatsD(rep) {
		pg.h("Relay's own metrics (StatsD, measured window and drain)")
		t := NewTable(">#", ">target/s", "metric", ">p50", ">p99", ">max", ">count")
		for _, st := range rep.Steps {
			for _, name := range slices.Sorted(maps.Keys(st.StatsD)) {
				q := st.StatsD[name]
				t.Add(fmt.Sprint(st.Index), rateCell(st.Rate), name, ms(q.P50), ms(q.P99), ms(q.Max), "")
			}
			for _, name := range slices.Sorted(maps.Keys(st.StatsDCounters)) {
				t.Add(fmt.Sprint(st.Index), rateCell(st.Rate), name, "", "", "", Num(st.StatsDCounters[name]))
			}
		}
		t.Write(w)
	}
}

// faults writes what happened around each injected fault.
func (pg *page) faults() {
	w, rep := pg.w, pg.rep
	for _, st := range rep.Steps {
		if st.Fault != nil {
			pg.h(fmt.Sprintf("Fault in step %d (%s)", st.Index, rateLabel(st)))
			fmt.Fprintln(w, st.Fault.Summary+".")
		}
	}
}

// failed writes the failed steps with the tail of Relay's log.
func (pg *page) failed() {
	w, rep := pg.w, pg.rep
	var failed []*orchestrate.Step
	for _, st := range rep.Steps {
		if st.Failed {
			failed = append(failed, st)
		}
	}
	if len(failed) > 0 {
		pg.h("Failed steps")
		for _, st := range failed {
			fmt.Fprintf(w, "Step %d (%s, %s): %s\n", st.Index, st.Build, rateLabel(st), st.Error)
			if st.Sent > 0 {
				fmt.Fprintf(w, "Until then blast sent %s requests in the measured window (%s/s), %s accepted; from blast's start (its warm-up included) the fake upstream received %s data envelopes.\n",
					Num(float64(st.Sent)), Num(st.AchievedRate), Num(float64(st.OK)), Num(float64(st.Upstream.Forwarded)))
			}
			if st.LogTail != "" {
				fmt.Fprintf(w, "\n```\n%s\n```\n\n", st.LogTail)
			}
		}
	}
}

// perf writes the perf recordings and where the time went.
func (pg *page) perf() {
	w, rep, dir := pg.w, pg.rep, pg.dir
	var perfs []*orchestrate.PerfRecord
	var plain *orchestrate.PerfRecord // the first recording without a profile
	for _, st := range rep.Steps {
		if st.Perf != nil {
			perfs = append(perfs, st.Perf)
			if st.Perf.Profile == nil && plain == nil {
				plain = st.Perf
			}
		}
	}
	if len(perfs) > 0 {
		pg.h("perf recordings")
		for _, p := range perfs {
			line := fmt.Sprintf("%s: event %s, call graph %s, %s", p.File, p.Event, p.CallGraph, p.Exit)
			if p.Note != "" {
				line += " (" + p.Note + ")"
			}
			fmt.Fprintln(w, "- "+line)
		}
		if plain != nil {
			fmt.Fprintln(w, "\nTo fold one into a flame graph: "+strings.ReplaceAll(orchestrate.FoldHint, "FILE", plain.File))
		}
	}
	if hasProfile(rep) {
		pg.h("Where the time goes")
		profiles(w, rep, dir)
	}
}

// notes writes the run's and the steps' notes.
func (pg *page) notes() {
	w, rep := pg.w, pg.rep
	var notes []string
	notes = append(notes, rep.Notes...)
	for _, st := range rep.Steps {
		for _, n := range st.Notes {
			notes = append(notes, fmt.Sprintf("step %d: %s", st.Index, n))
		}
	}
	if len(notes) > 0 {
		pg.h("Notes")
		for _, n := range notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
}

// chartSection writes links to the charts.
func (pg *page) chartSection() {
	w, rep, charts := pg.w, pg.rep, pg.charts
	if len(charts) > 0 {
		pg.h("Charts")
		chartLinks(w, rep, charts)
	}
}

// userAgents says where the pool's agents came from and how they were
// spread over its envelopes.
func userAgents(s orchestrate.Setup) string {
	out := fmt.Sprintf("%d user agents", s.UserAgents)
	if s.UserAgentsFrom != "" {
		out = fmt.Sprintf("user agents from %s (%d agents)", s.UserAgentsFrom, s.UserAgents)
	}
	switch {
	case !s.UniqueUserAgents:
	case s.UserAgentsFrom == "" || s.UserAgents >= s.PoolSize:
		out += " (every envelope its own)"
	default:
		out += fmt.Sprintf(" (each in turn, about %d envelopes per agent)", int(math.Round(float64(s.PoolSize)/float64(max(s.UserAgents, 1)))))
	}
	return out
}

// setup writes what shaped the numbers: builds, traffic, steps, host.
func (pg *page) setup() {
	w, rep := pg.w, pg.rep
	pg.h("Setup")
	s := rep.Setup
	var builds []string
	for _, b := range s.Builds {
		if b.Bin != "" {
			s := b.Name + "=" + b.Bin
			if b.Version != "" {
				s += " (" + b.Version + ")"
			}
			builds = append(builds, s)
		}
	}
	if len(builds) > 0 {
		fmt.Fprintf(w, "Builds: %s.\n", strings.Join(builds, ", "))
	}
	if c := s.Corpus; c != nil {
		only := ""
		if len(c.Only) > 0 {
			only = fmt.Sprintf(", only %v", c.Only)
		}
		fmt.Fprintf(w, "Traffic: recorded envelopes from `%s` (%d files, %s, %s%s; items by type: %s), re-targeted to %d projects with new ids and timestamps at the time of the run, pool of %d envelopes (%s raw, %s on the wire, %s), seed %d.\n",
			c.Dir, c.Files, mb(float64(c.Bytes)), c.Digest, only, replay.FormatCounts(c.ItemTypes), s.Projects, s.PoolSize,
			mb(float64(s.PoolBytes["raw"])), mb(float64(s.PoolBytes["encoded"])), s.Encoding, s.Seed)
	} else {
		fmt.Fprintf(w, "Traffic: mix %s, %d projects (Zipf), pool of %d envelopes (%s raw, %s on the wire, %s), %s, seed %d.\n",
			s.Mix, s.Projects, s.PoolSize, mb(float64(s.PoolBytes["raw"])), mb(float64(s.PoolBytes["encoded"])), s.Encoding,
			userAgents(s), s.Seed)
	}
	if len(rep.SliceRuns) > 0 {
		fmt.Fprintf(w, "Each comparison, in blocks of %s: per build a fake upstream and a Relay started afresh, warm-up, %s idle, a slice of traffic to each (discarded), then pairs of %s slices in alternating order; until %s.",
			rep.SliceRuns[0].Block, s.Idle, s.Slice, sliceStop(s))
	} else {
		fmt.Fprintf(w, "Each step: fresh fake upstream and %s, warm-up, %s idle, %s blast warm-up (discarded), %s measured, drain, shutdown.",
			map[bool]string{true: "no Relay (blast → fake upstream)", false: "Relay"}[rep.Harness], s.Idle, s.Warmup, s.Duration)
	}
	if s.RelayCPUs != "" {
		fmt.Fprintf(w, " Relay pinned to CPUs %s", s.RelayCPUs)
		if s.HarnessCPUs != "" {
			fmt.Fprintf(w, ", blast and the fake upstream to CPUs %s", s.HarnessCPUs)
		}
		fmt.Fprint(w, ".")
	} else if !rep.Harness {
		fmt.Fprintf(w, " Relay not pinned: it shares the CPUs with blast and the fake upstream (GOMAXPROCS=%d).", s.HarnessProcs)
	}
	if s.HarnessSysmon != "" {
		fmt.Fprintf(w, " Harness runtime: sysmon %s.", s.HarnessSysmon)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Host: %d CPUs (%s), Linux %s, %s. Started %s, took %s.\n", rep.Host.CPUs, rep.Host.CPUModel, rep.Host.Kernel,
		rep.Host.GoVersion, rep.Started.UTC().Format("2006-01-02 15:04 UTC"), rep.Finished.Sub(rep.Started).Round(1e9))
}

func hasOutcomes(rep *orchestrate.Report) bool {
	for _, st := range rep.Steps {
		if len(st.Upstream.Outcomes) > 0 {
			return true
		}
	}
	return false
}

func hasStatsD(rep *orchestrate.Report) bool {
	for _, st := range rep.Steps {
		if len(st.StatsD) > 0 || len(st.StatsDCounters) > 0 {
			return true
		}
	}
	return false
}

// loadRange is the range of 1-minute load averages seen around the steps.
func loadRange(rep *orchestrate.Report) string {
	lo, hi := -1.0, -1.0
	for _, st := range rep.Steps {
		for _, v := range st.LoadAvg {
			if v < 0 {
				continue
			}
			if lo < 0 || v < lo {
				lo = v
			}
			if v > hi {
				hi = v
			}
		}
	}
	if lo < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f–%.1f on %d CPUs", lo, hi, rep.Host.CPUs)
}

// rateLabel is a step's rate in sentences: "500/s", "max (64 senders)".
func rateLabel(st *orchestrate.Step) string {
	if st.Rate != orchestrate.RateMax {
		return Num(st.Rate) + "/s"
	}
	if st.Concurrency > 0 {
		return fmt.Sprintf("max (%d senders)", st.Concurrency)
	}
	return "max"
}

// inDir is path relative to dir, with slashes, if path is inside dir.
func inDir(dir, path string) (string, bool) {
	if dir == "" || path == "" {
		return "", false
	}
	ad, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	ap, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(ad, ap)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// chartLinks writes report.md's Charts section: the sweep's charts, then
// one chart per step under its caption.
func chartLinks(w io.Writer, rep *orchestrate.Report, charts []string) {
	byName := map[string]*orchestrate.Step{}
	withSeconds := 0
	for _, st := range rep.Steps {
		byName[stepChartName(st)] = st
		if len(st.Seconds) > 0 {
			withSeconds++
		}
	}
	var steps []string
	for _, c := range charts {
		name := filepath.Base(c)
		if byName[name] != nil {
			steps = append(steps, name)
			continue
		}
		fmt.Fprintf(w, "![%s](%s)\n\n", strings.TrimSuffix(name, ".svg"), name)
	}
	if slices.ContainsFunc(rep.Summary, func(p *orchestrate.Point) bool { return p.Rate == orchestrate.RateMax }) &&
		slices.ContainsFunc(charts, func(c string) bool { b := filepath.Base(c); return b == CPUChart || b == LatencyChart }) {
		fmt.Fprint(w, cli.Wrap("The charts against rate leave out the steps sent as fast as possible: they had no target rate (their figures are in the tables above).", cli.Width, "")+"\n\n")
	}
	if len(steps) == 0 {
		return
	}
	fmt.Fprint(w, "### Each step second by second\n\n")
	caption := "From blast's start to the end of the drain: envelopes per second blast sent, Relay accepted and forwarded; the backlog (accepted − forwarded, of the accepted only those Relay is expected to forward); Relay's RSS. "
	if rep.Harness {
		caption = "From blast's start to the end of the drain: envelopes per second blast sent, had accepted and the fake upstream received; the backlog (accepted − received, of the accepted only those that carry data); the harness's RSS. "
	}
	caption += "The shaded band is the measured window, the dashed line blast's end; a last second cut short by the drain's end is left out."
	if len(steps) < withSeconds {
		caption += fmt.Sprintf(" %d of the %d steps are shown: the first round only, at most %d.", len(steps), withSeconds, maxStepCharts)
	}
	fmt.Fprint(w, cli.Wrap(caption, cli.Width, "")+"\n\n")
	for _, name := range steps {
		st := byName[name]
		caption := fmt.Sprintf("Step %d: %s, %s", st.Index, st.Build, rateLabel(st))
		if rep.Setup.Rounds > 1 {
			caption += fmt.Sprintf(", round %d", st.Round)
		}
		fmt.Fprintf(w, "%s (%s)\n\n![step %d](%s)\n\n", caption, st.Verdict, st.Index, name)
	}
}

// costCells are a point's Relay CPU and CPU per envelope, each with its
// spread over the rounds when there were several.
func costCells(p *orchestrate.Point, rounds bool) (cpu, perEnvelope string) {
	cpu, perEnvelope = cores(p.NetCores), msUnit(p.MsPerEnv)
	if rounds && p.Runs > 1 {
		cpu += fmt.Sprintf(" ±%.0f%%", p.CoresSpread/2)
		perEnvelope += fmt.Sprintf(" ±%.0f%%", p.MsPerEnvSpread/2)
	}
	return cpu, perEnvelope
}
