package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/relayload/relayload/orchestrate"
)

// Headline is the report's one-sentence answer, e.g. "Relay kept up with
// about 900 envelopes per second" or "The harness on its own moves 15,900
// envelopes per second".
func Headline(rep *orchestrate.Report) string {
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
		for _, st := range rep.Steps {
			if st.Build == b.Name {
				verdicts[st.Verdict]++
			}
		}
		name := b.Name
		if rep.Harness {
			name = "The harness on its own"
		}
		switch {
		case rate == 0 && len(rep.Steps) == 0:
			lines = append(lines, name+": nothing was measured.")
		case fm != nil && fm.KeptUp == 0 && fm.FellBehind == 0:
			lines = append(lines, fmt.Sprintf("%s: the search for the highest rate stopped before any verdict: %s.", name, fm.Stopped))
		case rate == 0 && verdicts[orchestrate.VerdictHarnessLimited] > 0 && verdicts[orchestrate.VerdictKeptUp] == 0 && verdicts[orchestrate.VerdictFellBehind] == 0:
			lines = append(lines, fmt.Sprintf("%s could not be judged: in every step blast missed its schedule, so the load was not what was asked (1-minute load average %s; see the reasons below).",
				name, loadRange(rep)))
		case rate == 0 && verdicts[orchestrate.VerdictKeptUp] > 0:
			lines = append(lines, fmt.Sprintf("%s kept up in %d of %d steps, but at no rate in every round that could be judged.", name,
				verdicts[orchestrate.VerdictKeptUp], stepsOf(rep, b.Name)))
		case rate == 0:
			low := slices.Min(rep.Setup.Rates)
			lines = append(lines, fmt.Sprintf("%s did not keep up with any rate tried (lowest %s/s).", name, num(low)))
		case rep.Harness:
			lines = append(lines, fmt.Sprintf("The harness on its own moves %s envelopes per second (the highest rate tried that it kept up with).", num(best)))
		case fm != nil && fm.Stopped != "":
			lines = append(lines, fmt.Sprintf("%s kept up with at least %s envelopes per second; the search stopped there: %s.", name, num(rate), fm.Stopped))
		case fm != nil && fm.FellBehind > 0:
			lines = append(lines, fmt.Sprintf("%s kept up with about %s envelopes per second (it fell behind at %s/s).", name, num(rate), num(fm.FellBehind)))
		case fm != nil:
			lines = append(lines, fmt.Sprintf("%s kept up with %s envelopes per second, the upper bound of the search.", name, num(rate)))
		default:
			line := fmt.Sprintf("%s kept up with about %s envelopes per second (the highest rate tried that it kept up with", name, num(rate))
			for _, p := range rep.Summary {
				if p.Build == b.Name && p.Rate > rate && p.Verdict == orchestrate.VerdictHarnessLimited {
					line += "; higher rates were harness-limited, not judged"
					break
				}
			}
			lines = append(lines, line+").")
		}
	}
	return strings.Join(lines, "\n")
}

// Text writes the tables printed on stdout at the end of a run.
func Text(w io.Writer, rep *orchestrate.Report) { body(w, rep, false, nil) }

// Markdown writes report.md; charts are the chart files to link.
func Markdown(w io.Writer, rep *orchestrate.Report, charts []string) error {
	title := "Relay load test"
	if rep.Harness {
		title = "Harness load test (no Relay)"
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	body(w, rep, true, charts)
	return nil
}

func body(w io.Writer, rep *orchestrate.Report, md bool, charts []string) {
	h := func(s string) {
		if md {
			fmt.Fprintf(w, "\n## %s\n\n", s)
		} else {
			fmt.Fprintf(w, "\n%s\n\n", s)
		}
	}
	if rep.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: partial report, the sweep did not finish.")
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, Headline(rep))
	multi := len(rep.Setup.Builds) > 1
	rounds := rep.Setup.Rounds > 1
	proc := who(rep)

	h("Per rate" + map[bool]string{true: fmt.Sprintf(" (median of %d rounds)", rep.Setup.Rounds), false: ""}[rounds])
	cols := []string{}
	if multi {
		cols = append(cols, "build")
	}
	cols = append(cols, ">target/s", ">sent/s", ">accepted/s", ">p50 ms", ">p90 ms", ">p99 ms", ">max ms",
		">"+proc+" cores", ">CPU per envelope", ">peak RSS", "verdict")
	t := newTable(cols...)
	for _, p := range rep.Summary {
		var row []string
		if multi {
			row = append(row, p.Build)
		}
		c, e := cores(p.NetCores), ms(p.MsPerEnv)+" ms"
		if rounds && p.Runs > 1 {
			c += fmt.Sprintf(" ±%.0f%%", p.CoresSpread/2)
			e += fmt.Sprintf(" ±%.0f%%", p.MsPerEnvSpread/2)
		}
		if p.Verdict == orchestrate.VerdictFailed {
			c, e = "–", "–"
		}
		row = append(row, num(p.Rate), num(p.AchievedRate), num(p.AcceptedRate), ms(p.Latency.P50), ms(p.Latency.P90),
			ms(p.Latency.P99), ms(p.Latency.Max), c, e, mb(p.PeakRSS), p.Verdict)
		t.add(row...)
	}
	t.write(w)
	fmt.Fprintf(w, "\n%s cores: CPU time (user+system, all threads) over the measured window divided by its length, idle subtracted.", proc)
	if rounds {
		fmt.Fprint(w, " ±: half the spread (max−min) between rounds, in % of the median.")
	}
	fmt.Fprintln(w)

	if len(rep.FindMax) > 0 {
		h("Highest rate kept up with (bisection)")
		t := newTable("build", ">kept up at", ">fell behind at", "probes", "stopped early")
		for _, fm := range rep.FindMax {
			var probes []string
			for _, p := range fm.Probes {
				probes = append(probes, num(p))
			}
			ku, fb := "–", "–"
			if fm.KeptUp > 0 {
				ku = num(fm.KeptUp) + "/s"
			}
			if fm.FellBehind > 0 {
				fb = num(fm.FellBehind) + "/s"
			}
			t.add(fm.Build, ku, fb, strings.Join(probes, " → "), fm.Stopped)
		}
		t.write(w)
	}

	if len(rep.Comparisons) > 0 {
		h("Builds compared with " + rep.Comparisons[0].Baseline)
		t := newTable(">target/s", "build", ">"+rep.Comparisons[0].Baseline+" cores", ">cores", ">change",
			">CPU per envelope", ">change", ">p99 change", ">peak RSS change")
		for _, c := range rep.Comparisons {
			t.add(num(c.Rate), c.Build, cores(c.BaseCores), cores(c.Cores), pct(c.CoresChange),
				ms(c.MsPerEnv)+" ms", pct(c.MsPerEnvChange), pct(c.P99Change), pct(c.PeakRSSChange))
		}
		t.write(w)
	}

	h("Steps")
	cols = []string{">#"}
	if multi {
		cols = append(cols, "build")
	}
	if rounds {
		cols = append(cols, ">round")
	}
	cols = append(cols, ">target/s", ">forwarded", ">gap", "items by type", ">idle cores", ">ready", ">shutdown", ">load 1m", "verdict")
	t = newTable(cols...)
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
		v := st.Verdict
		if len(st.Reasons) > 0 {
			v += ": " + strings.Join(st.Reasons, "; ")
		}
		if st.Failed {
			v = "failed: " + st.Error
		}
		row = append(row, num(st.Rate), num(float64(st.Upstream.Envelopes)), num(float64(st.Upstream.Gap)), kv(st.Upstream.ItemsByType),
			cores(st.CPU.IdleCores), ready, shut, fmt.Sprintf("%.2f→%.2f", st.LoadAvg[0], st.LoadAvg[1]), v)
		t.add(row...)
	}
	t.write(w)
	fmt.Fprintln(w, "\nforwarded: envelopes the fake upstream received from the start of blast (its warm-up included) until the drain ended; gap: envelopes blast had accepted minus forwarded (negative when requests blast gave up on, e.g. timeouts, were still accepted and forwarded, or when Relay answered 429 for an envelope of which only some items were rate limited: it forwards the rest).")

	if hasOutcomes(rep) {
		h("Outcomes " + proc + " reported")
		t := newTable(">#", "outcome", "category", "reason", ">quantity")
		for _, st := range rep.Steps {
			for _, o := range st.Upstream.Outcomes {
				t.add(fmt.Sprint(st.Index), o.Outcome, o.Category, o.Reason, num(float64(o.Quantity)))
			}
		}
		t.write(w)
	}

	if hasStatsD(rep) {
		h("Relay's own metrics (StatsD, measured window and drain)")
		t := newTable(">#", ">target/s", "metric", ">p50", ">p99", ">max", ">count")
		for _, st := range rep.Steps {
			for _, name := range sortedNames(st.StatsD) {
				q := st.StatsD[name]
				t.add(fmt.Sprint(st.Index), num(st.Rate), name, ms(q.P50), ms(q.P99), ms(q.Max), "")
			}
			for _, name := range sortedNames(st.StatsDCounters) {
				t.add(fmt.Sprint(st.Index), num(st.Rate), name, "", "", "", num(st.StatsDCounters[name]))
			}
		}
		t.write(w)
	}

	for _, st := range rep.Steps {
		if st.Fault != nil {
			h(fmt.Sprintf("Fault in step %d (%s/s)", st.Index, num(st.Rate)))
			fmt.Fprintln(w, st.Fault.Summary+".")
		}
	}

	var failed []*orchestrate.Step
	for _, st := range rep.Steps {
		if st.Failed {
			failed = append(failed, st)
		}
	}
	if len(failed) > 0 {
		h("Failed steps")
		for _, st := range failed {
			fmt.Fprintf(w, "Step %d (%s, %s/s): %s\n", st.Index, st.Build, num(st.Rate), st.Error)
			if st.LogTail != "" {
				if md {
					fmt.Fprintf(w, "\n```\n%s\n```\n\n", st.LogTail)
				} else {
					fmt.Fprintln(w, "  "+strings.ReplaceAll(st.LogTail, "\n", "\n  "))
				}
			}
		}
	}

	var perfs []*orchestrate.PerfRecord
	for _, st := range rep.Steps {
		if st.Perf != nil {
			perfs = append(perfs, st.Perf)
		}
	}
	if len(perfs) > 0 {
		h("perf recordings")
		for _, p := range perfs {
			line := fmt.Sprintf("%s: event %s, call graph %s, %s", p.File, p.Event, p.CallGraph, p.Exit)
			if p.Note != "" {
				line += " (" + p.Note + ")"
			}
			fmt.Fprintln(w, "- "+line)
		}
		fmt.Fprintln(w, "\nTo fold one into a flame graph: "+strings.ReplaceAll(orchestrate.FoldHint, "FILE", perfs[0].File))
	}

	var notes []string
	notes = append(notes, rep.Notes...)
	for _, st := range rep.Steps {
		for _, n := range st.Notes {
			notes = append(notes, fmt.Sprintf("step %d: %s", st.Index, n))
		}
	}
	if len(notes) > 0 {
		h("Notes")
		for _, n := range notes {
			fmt.Fprintln(w, "- "+n)
		}
	}

	if md && len(charts) > 0 {
		h("Charts")
		for _, c := range charts {
			name := c[strings.LastIndex(c, "/")+1:]
			fmt.Fprintf(w, "![%s](%s)\n\n", strings.TrimSuffix(name, ".svg"), name)
		}
	}

	h("Setup")
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
	fmt.Fprintf(w, "Traffic: mix %s, %d projects (Zipf), pool of %d envelopes (%s raw, %s on the wire, %s), %d user agents%s, seed %d.\n",
		s.Mix, s.Projects, s.PoolSize, mb(float64(s.PoolBytes["raw"])), mb(float64(s.PoolBytes["encoded"])), s.Encoding,
		s.UserAgents, map[bool]string{true: " (every envelope its own)", false: ""}[s.UniqueUserAgents], s.Seed)
	fmt.Fprintf(w, "Each step: fresh fake upstream and %s, warm-up, %s idle, %s blast warm-up (discarded), %s measured, drain, shutdown.",
		map[bool]string{true: "no Relay (blast → fake upstream)", false: "Relay"}[rep.Harness], s.Idle, s.Warmup, s.Duration)
	if s.RelayCPUs != "" {
		fmt.Fprintf(w, " Relay pinned to CPUs %s", s.RelayCPUs)
		if s.HarnessCPUs != "" {
			fmt.Fprintf(w, ", blast and the fake upstream to CPUs %s", s.HarnessCPUs)
		}
		fmt.Fprint(w, ".")
	} else if !rep.Harness {
		fmt.Fprint(w, " Relay not pinned: it shares the CPUs with blast and the fake upstream.")
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

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
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

func stepsOf(rep *orchestrate.Report, build string) int {
	n := 0
	for _, st := range rep.Steps {
		if st.Build == build {
			n++
		}
	}
	return n
}
