package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

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
func changeVerdict(c orchestrate.Change) string {
	switch c.Verdict {
	case orchestrate.VerdictLower, orchestrate.VerdictHigher:
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
		case orchestrate.VerdictLower:
			verdict = fmt.Sprintf("faster: CPU per envelope %s (95%% interval %s to %s)", pct1(c.Pct), pct1(c.Low), pct1(c.High))
		case orchestrate.VerdictHigher:
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
		para(fmt.Sprintf("%d slices of %s on %s (both builds' Relays started afresh every %s); ended by %s after %s. "+
			"change: the geometric mean of the per-pair ratios %s/%s, each pair the two builds back to back in alternating order; "+
			"95%% interval: Student's t on the log ratios; a change is lower or higher only when its interval excludes no change, "+
			"otherwise the run shows no change beyond the interval's half-width. "+
			"CPU per envelope: each build's Relay's CPU over the whole pair (its slice, and its catch-up while the other build takes the traffic), less its idle CPU, per envelope it forwarded in the pair. "+
			"Every metric's interval also holds what its blocks show the processes differing by, where they show more than it adds.",
			len(r.Slices), r.Slice, processes(r.Blocks), r.Block, r.Ended, r.Took.Round(1e9), r.Build, r.Baseline))
		if r.ProcessNoise > 0 {
			spread := ""
			if r.Blocks >= 3 {
				spread = fmt.Sprintf(" This run's own blocks show ±%.2f%%", 100*r.BlockSpread)
				if r.BlockSpread > r.ProcessNoise {
					spread += ", more than that, which its intervals hold"
				}
				spread += "."
			}
			para(fmt.Sprintf("The intervals of CPU per envelope and cores also hold ±%.1f%% (a spread set with --process-noise) "+
				"for what two processes of one binary differ by over their whole life, which pairs on the same processes cannot shrink; "+
				"each block's processes are a fresh draw, so it is shared out over the blocks by their pairs.%s",
				100*r.ProcessNoise, spread))
		}
		if r.Counters != "instructions" && r.Counters != "" {
			para(fmt.Sprintf("Instructions retired were not counted (%s).", r.Counters))
		}
	}
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
