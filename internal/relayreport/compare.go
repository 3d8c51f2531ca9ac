package relayreport

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/report"
)

// The report of two builds side by side (Options.Compare): the same
// sections, each build's figures beside the other's, every change with
// what it rests on.

// compareHeader is the title and what was compared.
func (c *Card) compareHeader(w io.Writer) {
	a, b := c.Relay, *c.Compared
	fmt.Fprintf(w, "# What Relay costs: %s against %s\n\n", b.Name, a.Name)
	fmt.Fprintf(w, "Measured with relayload on this machine, %s; took %s. The baseline %s is `%s` (%s); %s is `%s` (%s)%s. "+
		"Every figure is measured from the two Relay processes; each section's full report (results.json, charts) is in its own directory.\n",
		c.Started.UTC().Format("2006-01-02 15:04 UTC"), c.Took.Round(time.Second), a.Name, a.Bin, a.Version, b.Name, b.Bin, b.Version, ownSettings(b))
}

// ownSettings says what a compared build sets for itself: its Relay config
// overrides and its fake upstream's inbound filters.
func ownSettings(b orchestrate.Build) string {
	var parts []string
	if kv := flatten("", b.RelayConfig); len(kv) > 0 {
		parts = append(parts, "with its own Relay config `"+strings.Join(kv, "`, `")+"`")
	}
	if f := b.InboundFilters; f != nil {
		state := "off"
		if *f {
			state = "on"
		}
		parts = append(parts, "with its fake upstream's inbound filters "+state)
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, " and ")
}

// flatten writes a config's leaves as "a.b: value", sorted.
func flatten(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			out = append(out, flatten(key, sub)...)
			continue
		}
		if v == nil {
			v = "null"
		}
		out = append(out, fmt.Sprintf("%s: %v", key, v))
	}
	slices.Sort(out)
	return out
}

// kindsCompared is the cost per kind of both builds, from each kind's
// comparison in slices.
func (c *Card) kindsCompared(w io.Writer) {
	if len(c.Kinds) == 0 {
		return
	}
	a, b := c.Relay.Name, c.Compared.Name
	first := c.Kinds[0].Slices
	fmt.Fprintf(w, "\n## Cost per envelope, one kind at a time (%s/s): %s against %s\n\n", report.Num(first.Rate), b, a)
	t := report.NewTable("kind", ">"+a+" CPU per envelope", ">"+b+" CPU per envelope", ">pairs", ">change", ">95% interval", "verdict", "ended by")
	var short []string
	for _, k := range c.Kinds {
		r := k.Slices
		ch := compare.Change{Verdict: compare.VerdictTooFewPairs}
		if len(r.Changes) > 0 {
			ch = r.Changes[0]
		}
		change, interval := "–", "–"
		if ch.Pairs >= 2 {
			change, interval = report.Pct1(ch.Pct), report.Pct1(ch.Low)+" to "+report.Pct1(ch.High)
		}
		t.Add(k.Kind, msCell(sliceMedian(r, a)), msCell(sliceMedian(r, b)), fmt.Sprint(ch.Pairs), change, interval, ch.Verdict, r.Ended)
		if ch.Pairs < 2 && r.Ended == "budget" {
			short = append(short, k.Kind)
		}
	}
	t.Write(w)
	if len(short) > 0 {
		fmt.Fprintf(w, "\n%s: the budget ran out before two pairs, too few for an interval; both Relays' start, warm-up and idle measurement and a first slice of each come out of it: give each kind a larger budget.\n",
			strings.Join(short, ", "))
	}
	fmt.Fprintf(w, "\nEach kind: both builds' Relays started afresh every %s (a block) and warmed, then the traffic sent to one build at a time in slices of %s, "+
		"in pairs whose order alternates (ABBA), until the change was known to the precision asked for or the kind's budget was spent (ended by). "+
		"%s, %s: the median over each build's slices in whole pairs of its CPU per envelope: its Relay's CPU over the whole pair (its slice, and its catch-up while the other build takes the traffic), "+
		"less its idle CPU, per envelope it forwarded in the pair. change: the geometric mean of the per-pair ratios %s/%s; 95%% interval: Student's t on the log ratios. "+
		"A change is lower or higher only when its interval excludes no change; otherwise the run shows no change beyond the interval's half-width, "+
		"the resolution it reached. Each kind's own report (kind-*/report.md) gives the change in cores, p99, peak RSS and forwarded/s too.\n",
		first.Block, first.Slice, a, b, b, a)
}

// sliceMedian is the median CPU per envelope of build's slices in whole
// pairs (the slices the change rests on); 0 for none.
func sliceMedian(r *orchestrate.SliceRun, build string) float64 {
	n := map[int]int{}
	for _, s := range r.Slices {
		n[s.Pair]++
	}
	var v []float64
	for _, s := range r.Slices {
		if s.Build == build && n[s.Pair] == 2 {
			v = append(v, s.MsPerEnv)
		}
	}
	return orchestrate.Median(v)
}

func msCell(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f ms", v)
}

// capacityCompared is each build's bisection side by side, and what the
// two brackets say about the change.
func (c *Card) capacityCompared(w io.Writer) {
	rep := c.Capacity
	a, b := c.Relay.Name, c.Compared.Name
	fmt.Fprintln(w, "\n## Mixed traffic: the highest rate each build keeps up with")
	fmt.Fprintln(w)
	fmt.Fprintln(w, report.Headline(rep))
	fmt.Fprintln(w)
	base, cmp := findMaxOf(rep, a), findMaxOf(rep, b)
	t := report.NewTable("build", ">kept up with", ">fell behind at", ">kept-up rate against "+a, "probes", "stopped early")
	for _, fm := range []*orchestrate.FindMax{base, cmp} {
		if fm == nil {
			continue
		}
		var probes []string
		for _, p := range fm.Probes {
			probes = append(probes, report.Num(p))
		}
		change := "–"
		if fm == cmp && base != nil && base.KeptUp > 0 && cmp.KeptUp > 0 {
			change = report.Pct1(100 * (cmp.KeptUp/base.KeptUp - 1))
		}
		t.Add(fm.Build, rateOrDash(fm.KeptUp), rateOrDash(fm.FellBehind), change, strings.Join(probes, " → "), fm.Stopped)
	}
	t.Write(w)
	if base != nil && cmp != nil {
		fmt.Fprintln(w)
		fmt.Fprintln(w, bracketChange(*base, *cmp))
	}
	fmt.Fprintln(w)
	t = report.NewTable("build", ">target/s", ">accepted/s", ">forwarded/s", ">backlog at end", ">backlog growth", ">CPU per envelope", ">RSS slope", "verdict")
	for _, st := range rep.Steps {
		t.Add(st.Build, report.Num(st.Rate), report.Num(st.Steady.AcceptedRate), report.Num(st.Steady.ForwardedRate), report.Num(float64(st.Steady.BacklogEnd)),
			fmt.Sprintf("%+.0f/s", st.Steady.BacklogGrowth), fmt.Sprintf("%.2f ms", st.CPU.MsPerEnv), fmt.Sprintf("%+.1f MiB/s", st.Steady.RSSSlope), st.Verdict)
	}
	t.Write(w)
	for _, name := range []string{a, b} {
		st := firstBehind(rep, name)
		if st == nil {
			continue
		}
		fmt.Fprintf(w, "\nThe backlog of %s at %s/s, second by second (accepted − forwarded since blast started, of the accepted only those Relay is expected to forward):\n\n", name, report.Num(st.Rate))
		t := report.NewTable(">s", ">accepted", ">forwarded", ">backlog", ">RSS MiB")
		for _, p := range st.Seconds {
			if p.T%2 == 0 || p.T == len(st.Seconds)-1 {
				t.Add(fmt.Sprint(p.T), report.Num(float64(p.Accepted)), report.Num(float64(p.Forwarded)), report.Num(float64(p.Backlog)), fmt.Sprintf("%.0f", p.RSSMiB))
			}
		}
		t.Write(w)
	}
}

// bracketChange says what the two bisections' brackets tell about the
// change of capacity: each build's capacity lies between the rate it kept
// up with and the rate it fell behind at (or above the search's upper
// bound), so the change lies between the ratios of the brackets' ends.
func bracketChange(base, cmp orchestrate.FindMax) string {
	const caveat = " Each probe is one step of one build: a bracket from single steps, not a 95% interval."
	switch {
	case base.KeptUp == 0 || cmp.KeptUp == 0:
		var why []string
		for _, fm := range []orchestrate.FindMax{base, cmp} {
			switch {
			case fm.KeptUp > 0:
			case fm.Stopped != "":
				why = append(why, fmt.Sprintf("%s's search stopped before any rate was kept up with (stopped early)", fm.Build))
			default:
				why = append(why, fmt.Sprintf("%s kept up with no rate the search tried", fm.Build))
			}
		}
		return fmt.Sprintf("No change of capacity can be stated: %s.", strings.Join(why, "; "))
	case base.FellBehind > 0 && cmp.KeptUp >= base.FellBehind:
		return fmt.Sprintf("%s's capacity is higher: it kept up with %s/s, where %s fell behind (%s/s); by the brackets, %s of %s's.%s",
			cmp.Build, report.Num(cmp.KeptUp), base.Build, report.Num(base.FellBehind), bounds(base, cmp), base.Build, caveat)
	case cmp.FellBehind > 0 && cmp.FellBehind <= base.KeptUp:
		return fmt.Sprintf("%s's capacity is lower: it fell behind at %s/s, where %s kept up (%s/s); by the brackets, %s of %s's.%s",
			cmp.Build, report.Num(cmp.FellBehind), base.Build, report.Num(base.KeptUp), bounds(base, cmp), base.Build, caveat)
	case base.FellBehind == 0 && cmp.FellBehind == 0:
		return "Neither build was seen to fall behind: the search cannot tell their capacities apart."
	}
	return fmt.Sprintf("The brackets overlap: by them %s's capacity is %s of %s's, and the search cannot tell the two apart.%s",
		cmp.Build, bounds(base, cmp), base.Build, caveat)
}

// bounds is the range the brackets allow for cmp's capacity against
// base's, e.g. "between −8.3% and +20.0%" or "at least +10.0%"; one of
// them fell behind.
func bounds(base, cmp orchestrate.FindMax) string {
	var low, high string
	if base.FellBehind > 0 {
		low = report.Pct1(100 * (cmp.KeptUp/base.FellBehind - 1))
	}
	if cmp.FellBehind > 0 {
		high = report.Pct1(100 * (cmp.FellBehind/base.KeptUp - 1))
	}
	switch {
	case low != "" && high != "":
		return "between " + low + " and " + high
	case low != "":
		return "at least " + low
	}
	return "at most " + high
}

func findMaxOf(rep *orchestrate.Report, build string) *orchestrate.FindMax {
	for i := range rep.FindMax {
		if rep.FindMax[i].Build == build {
			return &rep.FindMax[i]
		}
	}
	return nil
}

func rateOrDash(r float64) string {
	if r == 0 {
		return "–"
	}
	return report.Num(r) + "/s"
}
