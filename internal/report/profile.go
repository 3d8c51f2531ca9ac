package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/orchestrate"
)

// maxTopRows bounds the functions listed per profile.
const maxTopRows = 15

// maxNameLen bounds a function's name in the table (Rust's are long):
// longer ones keep their start and end.
const maxNameLen = 100

func hasProfile(rep *orchestrate.Report) bool {
	for _, st := range rep.Steps {
		if st.Perf != nil && st.Perf.Profile != nil {
			return true
		}
	}
	return false
}

// profiles writes "Where the time goes": for each step with a perf
// profile, how many samples had a usable stack, the top functions with
// their inclusive and self shares, the named groups' shares, and where the
// folded stacks and the flame graph are (the flame graph as an image when
// it is inside dir, report.md's directory).
func profiles(w io.Writer, rep *orchestrate.Report, dir string) {
	for _, st := range rep.Steps {
		if st.Perf == nil || st.Perf.Profile == nil {
			continue
		}
		pp := st.Perf.Profile
		head := fmt.Sprintf("Step %d (%s, %s)", st.Index, st.Build, rateLabel(st))
		fmt.Fprintf(w, "### %s\n\n", head)
		if pp.Samples > 0 {
			fmt.Fprintf(w, "%s samples, %.0f%% of them with a usable stack", Num(float64(pp.Samples)), pp.Unwound)
			if pp.Unwound < 99.5 {
				fmt.Fprint(w, " (the rest count for no function)")
			}
			fmt.Fprint(w, ".")
		} else {
			fmt.Fprint(w, "no samples.")
		}
		if pp.Note != "" {
			fmt.Fprint(w, " "+strings.TrimSuffix(pp.Note, ".")+".")
		}
		fmt.Fprint(w, "\n\n")
		if len(pp.Top) > 0 {
			t := NewTable("function", ">inclusive", ">self")
			for _, f := range pp.Top[:min(len(pp.Top), maxTopRows)] {
				name := "`" + strings.ReplaceAll(shortName(f.Name), "|", `\|`) + "`"
				t.Add(name, share(f.Inclusive), share(f.Self))
			}
			t.Write(w)
			fmt.Fprintln(w)
		}
		groups := slices.Clone(pp.Groups)
		slices.SortStableFunc(groups, func(a, b orchestrate.GroupShare) int { return cmp.Compare(b.Share, a.Share) })
		var gs []string
		for _, g := range groups {
			if g.Share > 0 {
				gs = append(gs, g.Name+" "+share(g.Share))
			}
		}
		if len(gs) > 0 {
			fmt.Fprintf(w, "By kind of work (samples with any frame in the group): %s.\n\n", strings.Join(gs, ", "))
		}
		var files []string
		if pp.Folded != "" {
			files = append(files, "folded stacks "+fileRef(pp.Folded, dir))
		}
		if pp.Flame != "" {
			files = append(files, "flame graph "+fileRef(pp.Flame, dir))
		}
		if len(files) > 0 {
			fmt.Fprintf(w, "Files: %s.\n\n", strings.Join(files, ", "))
		}
		if rel, ok := inDir(dir, pp.Flame); ok {
			fmt.Fprintf(w, "![flame graph of step %d](%s)\n\n", st.Index, rel)
		}
	}
	cmd := "`inferno-flamegraph < FILE.folded > flame.svg`"
	fmt.Fprintln(w, cli.Wrap("Shares are in % of all samples: inclusive counts the samples with the function anywhere on the stack, self those with it on top. "+
		"The folded stacks open in speedscope (https://www.speedscope.app) or inferno ("+cmd+").", cli.Width, ""))
}

// fileRef names a file: a link relative to dir when it is inside dir,
// else its path.
func fileRef(path string, dir string) string {
	if rel, ok := inDir(dir, path); ok {
		return fmt.Sprintf("[%s](%s)", rel, rel)
	}
	return "`" + path + "`"
}

// share formats a percentage of samples.
func share(v float64) string { return fmt.Sprintf("%.1f%%", v) }

// shortName cuts a function's name to maxNameLen runes, keeping its
// start and its end.
func shortName(s string) string {
	r := []rune(s)
	if len(r) <= maxNameLen {
		return s
	}
	head := maxNameLen * 3 / 5
	return string(r[:head]) + "…" + string(r[len(r)-(maxNameLen-head-1):])
}
