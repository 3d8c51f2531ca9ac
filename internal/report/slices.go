package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/orchestrate"
)

// metricLabels name a paired change's metric for a reader.
var metricLabels = map[string]string{
	"ms_per_envelope": "CPU per envelope", "cores": "cores", "p99_ms": "p99 latency",
	"peak_rss": "peak RSS", "forwarded_per_s": "forwarded/s",
	"instructions_per_envelope": "instructions per envelope",
}

// pct1 is a change in percent with one decimal and its sign.
func pct1(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	switch {
	case v > 0:
		return "+" + s + "%"
	case strings.HasPrefix(s, "-"):
		return "−" + s[1:] + "%"
	}
	return "±" + s + "%"
}

// changeVerdict says a paired change in words: lower or higher with its
// interval, or the resolution the run reached.
func changeVerdict(c compare.Change) string {
	switch c.Verdict {
	case compare.VerdictLower, compare.VerdictHigher:
		return fmt.Sprintf("%s: %s (95%% interval %s to %s)", c.Verdict, pct1(c.Pct), pct1(c.Low), pct1(c.High))
	}
	return c.Verdict
}

// sliceHeadline is the headline of a comparison in slices: per rate, the
// change in CPU per envelope, how many pairs, and what ended the run.
func sliceHeadline(rep *orchestrate.Report) string {
	var lines []string
	for _, r := range rep.SliceRuns {
		head := fmt.Sprintf("%s against %s at %s/s: ", r.Build, r.Baseline, Num(r.Rate))
		if len(r.Changes) == 0 || r.Changes[0].Pairs < 2 {
			lines = append(lines, head+fmt.Sprintf("no verdict, %d whole pairs (%s).", r.Pairs(), r.Ended))
			continue
		}
		c := r.Changes[0]
		// Less CPU per envelope is faster.
		verdict := "CPU per envelope " + changeVerdict(c)
		switch c.Verdict {
		case compare.VerdictLower:
			verdict = fmt.Sprintf("faster: CPU per envelope %s (95%% interval %s to %s)", pct1(c.Pct), pct1(c.Low), pct1(c.High))
		case compare.VerdictHigher:
			verdict = fmt.Sprintf("slower: CPU per envelope %s (95%% interval %s to %s)", pct1(c.Pct), pct1(c.Low), pct1(c.High))
		}
		lines = append(lines, head+fmt.Sprintf("%s; %d pairs of %s slices on %s in %s, ended by %s.",
			verdict, c.Pairs, r.Slice, processes(r.Blocks), r.Took.Round(1e9), r.Ended))
	}
	return strings.Join(lines, "\n")
}

// sliceRuns writes each comparison in slices into report.md.
func (pg *page) sliceRuns() { writeSliceRuns(pg.w, pg.rep, pg.h, pg.para) }

// sliceRuns writes each comparison in slices into the terminal summary.
func (t *terminal) sliceRuns() { writeSliceRuns(t.w, t.rep, t.head, t.para) }

// writeSliceRuns writes, for each comparison in slices, every metric's
// paired change and what the figures mean, with head for its title and
// para for its paragraphs.
func writeSliceRuns(w io.Writer, rep *orchestrate.Report, head, para func(string)) {
	for _, r := range rep.SliceRuns {
		head(fmt.Sprintf("%s against %s at %s/s, in slices", r.Build, r.Baseline, Num(r.Rate)))
		t := NewTable("metric", ">pairs", ">change", ">95% interval", "verdict")
		for _, c := range r.Changes {
			iv := "–"
			if c.Pairs >= 2 {
				iv = pct1(c.Low) + " to " + pct1(c.High)
			}
			t.Add(metricLabels[c.Metric], strconv.Itoa(c.Pairs), pct1(c.Pct), iv, c.Verdict)
		}
		t.Write(w)
		fmt.Fprintln(w)
		para(compare.Rule("CPU per envelope"))
		para(fmt.Sprintf("%d slices of %s on %s (both builds' Relays started afresh every %s, the first build of each drawn at random); ended by %s after %s. "+
			"change: the geometric mean of the per-pair ratios %s/%s, each pair the two builds back to back in alternating order; "+
			"95%% interval: Student's t on the log ratios, on the degrees of freedom its variance rests on, holding what the blocks' processes differ by; "+
			"a change is lower or higher only when its interval excludes no change, otherwise the run shows no change beyond the interval's half-width. "+
			"CPU per envelope: each build's Relay's CPU over the whole pair (its slice, and its catch-up while the other build takes the traffic), less its idle CPU, per envelope it forwarded in the pair.",
			len(r.Slices), r.Slice, processes(r.Blocks), r.Block, r.Ended, r.Took.Round(1e9), r.Build, r.Baseline))
		if len(r.Changes) > 0 && r.Changes[0].Pairs >= 2 {
			para(spreadNote(r))
		}
		if r.Counters != "instructions" && r.Counters != "" {
			para(fmt.Sprintf("Instructions retired were not counted (%s).", r.Counters))
		}
	}
}

// spreadNote says what the interval of CPU per envelope holds for the
// processes: the run's own spread, the prior, and what they make together.
func spreadNote(r *orchestrate.SliceRun) string {
	c := r.Changes[0]
	prior := fmt.Sprintf("the prior ±%.2f%% on %.1f df (%s)", 100*r.Prior.Spread, r.Prior.DF, r.Prior.Source)
	if r.Prior.DF == 0 {
		prior = "no prior"
	}
	own := "one block, so nothing of its own"
	if c.Blocks >= 2 {
		own = fmt.Sprintf("±%.2f%% on %d df", c.RunSpread, c.Blocks-1)
	}
	return fmt.Sprintf("What two processes of one binary differ by, which pairs on the same processes cannot shrink: this run's blocks show %s; with %s that makes ±%.2f%%, "+
		"shared out over the blocks by their pairs (CPU per envelope: %.0f df, resolution ±%.1f%%). The other metrics rest on the blocks alone.",
		own, prior, c.Spread, c.DF, c.HalfWidth)
}

// processes says how many processes per build a comparison ran.
func processes(blocks int) string {
	if blocks <= 1 {
		return "one process per build"
	}
	return fmt.Sprintf("%d processes per build", blocks)
}

// sliceStop says what ends a comparison in slices.
func sliceStop(s orchestrate.Setup) string {
	if s.Precision > 0 {
		return fmt.Sprintf("the 95%% interval of the change in CPU per envelope is within ±%g%% or %s is spent", 100*s.Precision, s.Budget)
	}
	return fmt.Sprintf("%s is spent", s.Budget)
}
