package relayreport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/report"
	"github.com/relayload/relayload/internal/testutil"
)

// squash makes a padded table row comparable with runs of spaces as one.
var squash = regexp.MustCompile(` +`)

// sliceRun is a comparison in slices of builds a and b whose CPU per
// envelope per pair is as given, with its change.
func sliceRun(rate float64, ended string, a, b []float64, change compare.Change) *orchestrate.SliceRun {
	r := &orchestrate.SliceRun{Rate: rate, Baseline: "main", Build: "branch", Slice: 10 * time.Second, Ended: ended, Changes: []compare.Change{change}}
	for i := range a {
		r.Slices = append(r.Slices, orchestrate.Slice{Build: "main", Pair: i + 1, MsPerEnv: a[i]})
		if i < len(b) {
			r.Slices = append(r.Slices, orchestrate.Slice{Build: "branch", Pair: i + 1, MsPerEnv: b[i]})
		}
	}
	return r
}

// TestCompareMarkdown renders cards of two builds and checks what each
// side-by-side table says: per kind both builds' medians and the change
// with its interval; per build its bracket and what the brackets allow.
func TestCompareMarkdown(t *testing.T) {
	on := true
	fm := func(build string, ku, fb float64, probes ...float64) orchestrate.FindMax {
		return orchestrate.FindMax{Build: build, KeptUp: ku, FellBehind: fb, Probes: probes}
	}
	capacity := func(fms ...orchestrate.FindMax) *orchestrate.Report {
		rep := &orchestrate.Report{FindMax: fms, KeptUpWith: map[string]float64{},
			Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "main"}, {Name: "branch"}}, FindMax: true}}
		for _, f := range fms {
			rep.KeptUpWith[f.Build] = f.KeptUp
			for _, p := range f.Probes {
				v := orchestrate.VerdictKeptUp
				if p > f.KeptUp {
					v = orchestrate.VerdictFellBehind
				}
				rep.Steps = append(rep.Steps, &orchestrate.Step{Build: f.Build, Rate: p, Verdict: v, Probe: true,
					CPU: orchestrate.CPU{MsPerEnv: 2.5}, Steady: orchestrate.Steady{AcceptedRate: p, ForwardedRate: min(p, f.KeptUp)}})
			}
		}
		return rep
	}
	// stopped is a search that ended early, unless it found a bracket.
	stopped := func(f orchestrate.FindMax) orchestrate.FindMax {
		if f.FellBehind == 0 {
			f.Stopped = "the step at 200/s was harness-limited"
		}
		return f
	}
	kinds := []KindCost{
		{Kind: "errors", Slices: sliceRun(300, "budget", []float64{3.0, 3.2, 3.4}, []float64{2.6, 2.8, 3.0},
			compare.Change{Metric: "ms_per_envelope", Pairs: 3, Pct: -12.34, Low: -15.04, High: -9.46, HalfWidth: 2.9, Verdict: compare.VerdictLower})},
		{Kind: "transactions", Slices: sliceRun(300, "precision", []float64{7.5, 7.4, 7.6, 7.5}, []float64{7.6, 7.4, 7.5, 7.7},
			compare.Change{Metric: "ms_per_envelope", Pairs: 4, Pct: 0.52, Low: -3.6, High: 4.8, HalfWidth: 4.1, Verdict: "no change beyond ±4.1%"})},
		// One pair whole, one slice of the next: no interval, and the
		// medians are of the whole pair only.
		{Kind: "logs", Slices: sliceRun(300, "failed: relay exited", []float64{1.0, 9.0}, []float64{1.2},
			compare.Change{Metric: "ms_per_envelope", Pairs: 1, Verdict: compare.VerdictTooFewPairs})},
		// No pair fitted in the budget.
		{Kind: "sessions", Slices: sliceRun(300, "budget", nil, nil, compare.Change{Metric: "ms_per_envelope", Verdict: compare.VerdictTooFewPairs})},
	}
	for _, tc := range []struct {
		name     string
		capacity *orchestrate.Report
		want     []string
		not      []string
	}{
		{"higher capacity", capacity(fm("main", 800, 1000, 200, 2000, 630, 1000, 800, 890), fm("branch", 1100, 1300, 200, 2000, 630, 1100, 1300)), []string{
			"# What Relay costs: branch against main",
			"The baseline main is `/r/relay` (relay 26.4.0); branch is `/r/relay` (relay 26.4.0), with its own Relay config `limits.max_thread_count: 2`, `processing.enabled: false` and with its fake upstream's inbound filters on.",
			"## Cost per envelope, one kind at a time (300/s): branch against main",
			"| kind | main CPU per envelope | branch CPU per envelope | pairs | change | 95% interval | verdict | ended by |",
			"| errors | 3.20 ms | 2.80 ms | 3 | −12.3% | −15.0% to −9.5% | lower | budget |",
			"| transactions | 7.50 ms | 7.55 ms | 4 | +0.5% | −3.6% to +4.8% | no change beyond ±4.1% | precision |",
			"| logs | 1.00 ms | 1.20 ms | 1 | – | – | too few pairs | failed: relay exited |",
			"| sessions | – | – | 0 | – | – | too few pairs | budget |",
			"sessions: the budget ran out before two pairs, too few for an interval",
			"slices of 10s",
			"## Mixed traffic: the highest rate each build keeps up with",
			"| build | kept up with | fell behind at | kept-up rate against main | probes | stopped early |",
			"| main | 800/s | 1,000/s | – | 200 → 2,000 → 630 → 1,000 → 800 → 890 | |",
			"| branch | 1,100/s | 1,300/s | +37.5% | 200 → 2,000 → 630 → 1,100 → 1,300 | |",
			"branch's capacity is higher: it kept up with 1,100/s, where main fell behind (1,000/s); by the brackets, between +10.0% and +62.5% of main's.",
			"not a 95% interval",
			"| branch | 1,300 | 1,300 | 1,100 |",
		}, nil},
		{"lower capacity", capacity(fm("main", 800, 890), fm("branch", 500, 630)), []string{
			"| branch | 500/s | 630/s | −37.5% |",
			"branch's capacity is lower: it fell behind at 630/s, where main kept up (800/s); by the brackets, between −43.8% and −21.3% of main's.",
		}, []string{"capacity is higher"}},
		{"overlapping brackets", capacity(fm("main", 800, 890), fm("branch", 855, 950)), []string{
			"| branch | 855/s | 950/s | +6.9% |",
			"The brackets overlap: by them branch's capacity is between −3.9% and +18.8% of main's, and the search cannot tell the two apart.",
		}, nil},
		{"upper bound kept up", capacity(fm("main", 2000, 0), fm("branch", 2000, 0)), []string{
			"| main | 2,000/s | – | – |",
			"| branch | 2,000/s | – | ±0.0% |",
			"Neither build was seen to fall behind: the search cannot tell their capacities apart.",
		}, nil},
		{"no rate kept up", capacity(fm("main", 800, 890), fm("branch", 0, 200, 200)), []string{
			"No change of capacity can be stated: branch kept up with no rate the search tried.",
		}, []string{"brackets overlap"}},
		{"searches stopped", capacity(stopped(fm("main", 0, 0, 200)), stopped(fm("branch", 0, 200, 200))), []string{
			"| main | – | – | – | 200 | the step at 200/s was harness-limited |",
			"No change of capacity can be stated: main's search stopped before any rate was kept up with (stopped early); branch kept up with no rate the search tried.",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			card := &Card{
				Relay: orchestrate.Build{Name: "main", Bin: "/r/relay", Version: "relay 26.4.0"},
				Compared: &orchestrate.Build{Name: "branch", Bin: "/r/relay", Version: "relay 26.4.0", InboundFilters: &on,
					RelayConfig: relayconfig.Config{"limits": map[string]any{"max_thread_count": 2}, "processing": map[string]any{"enabled": false}}},
				Started: time.Unix(1780000000, 0), Kinds: kinds, Capacity: tc.capacity,
			}
			var b bytes.Buffer
			card.Markdown(&b)
			md := squash.ReplaceAllString(b.String(), " ")
			for _, want := range tc.want {
				if !strings.Contains(md, squash.ReplaceAllString(want, " ")) {
					t.Errorf("report.md lacks %q\n%s", want, md)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(md, s) {
					t.Errorf("report.md has %q\n%s", s, md)
				}
			}
		})
	}
}

// shortOfPairs says which kind's comparison the budget ended with fewer
// than two pairs, or "".
func shortOfPairs(card *Card) string {
	for _, k := range card.Kinds {
		if r := k.Slices; r != nil && r.Ended == "budget" && r.Pairs() < 2 {
			return fmt.Sprintf("%s: %d pair(s) in %s", k.Kind, r.Pairs(), r.Took.Round(time.Second))
		}
	}
	return ""
}

func TestCompareOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		compare orchestrate.Build
		want    string
	}{
		{"no binary", orchestrate.Build{Name: "b"}, `Compare: build "b" has no binary`},
		{"no name", orchestrate.Build{Bin: "/bin/true"}, "Compare: the build has no name"},
		{"baseline's name", orchestrate.Build{Name: "relay", Bin: "/bin/true"}, "Compare: the build's name is BaselineName's"},
		// orchestrate's own checks, before anything runs.
		{"bad name", orchestrate.Build{Name: "my branch", Bin: "/bin/true"}, `build name "my branch": letters, digits`},
		{"not executable", orchestrate.Build{Name: "b", Bin: "/nonexistent/relay"}, "build b: /nonexistent/relay is not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			out := t.TempDir()
			b := tc.compare
			card, err := Run(context.Background(), Options{RelayBin: "/bin/true", Out: out, Compare: &b, Log: &log})
			if card != nil || !errors.Is(err, orchestrate.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("card %v, err %v, want %q", card != nil, err, tc.want)
			}
			if ents, _ := os.ReadDir(out); len(ents) > 0 || log.Len() > 0 {
				t.Errorf("something ran: %d entries in Out, log %q", len(ents), log.String())
			}
		})
	}
}

// TestCompareWithStandin reports two builds of the stand-in relay side by
// side (the second with its own config), with short slices: each kind's
// row holds both builds' medians and the change with its interval, and
// the capacity table a bracket per build. The interval needs two pairs; a
// loaded machine that fits fewer in the budget gets one more run with
// twice the budget.
func TestCompareWithStandin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two comparisons in slices and 6 steps")
	}
	bin := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	compared := orchestrate.Build{Name: "b", Bin: bin, RelayConfig: relayconfig.Config{"limits": map[string]any{"max_concurrent_requests": 50}}}
	kinds := []pool.Kind{pool.KindError, pool.KindTransaction}
	var out string
	var card *Card
	// Room, after both relays' start, warm-up and a warm slice each, for a
	// few pairs of 1 s slices.
	for _, budget := range []time.Duration{18 * time.Second, 36 * time.Second} {
		out = t.TempDir()
		start := time.Now()
		var err error
		card, err = Run(context.Background(), Options{RelayBin: bin, BaselineName: "a", Compare: &compared, Out: out,
			Duration: time.Second, Warmup: 300 * time.Millisecond, Idle: 500 * time.Millisecond,
			KindRate: 50, MinRate: 50, MaxRate: 100, PoolSize: 300, Kinds: kinds,
			Slice: time.Second, CompareBudget: budget,
			RelayConfig: relayconfig.Config{"limits": map[string]any{"shutdown_timeout": 0}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("budget %s: took %s", budget, time.Since(start).Round(time.Second))
		short := shortOfPairs(card)
		if short == "" {
			break
		}
		t.Logf("%s within a %s budget", short, budget)
	}
	if card.Compared == nil || card.Compared.Name != "b" || len(card.Kinds) != len(kinds) || card.Capacity == nil || card.Max == nil {
		t.Fatalf("card: compared %+v, %d kinds, capacity %v, max %v; notes %v", card.Compared, len(card.Kinds), card.Capacity != nil, card.Max != nil, card.Notes)
	}
	var b bytes.Buffer
	card.Markdown(&b)
	md := squash.ReplaceAllString(b.String(), " ")
	t.Log("\n" + b.String())
	for _, k := range card.Kinds {
		r := k.Slices
		if r == nil || r.Pairs() < 2 || len(r.Changes) == 0 {
			t.Fatalf("%s: %+v", k.Kind, r)
		}
		c := r.Changes[0]
		if c.Metric != "ms_per_envelope" || c.Pairs < 2 || !(c.Low <= c.Pct && c.Pct <= c.High) || c.HalfWidth <= 0 {
			t.Errorf("%s: change %+v", k.Kind, c)
		}
		// The row: both medians, the pairs, the change and its interval as
		// the run computed them, and a verdict that agrees with the interval.
		verdict := "no change beyond ±" + strconv.FormatFloat(c.HalfWidth, 'f', 1, 64) + "%"
		switch {
		case c.Low > 0:
			verdict = "higher"
		case c.High < 0:
			verdict = "lower"
		}
		// Each build's median over the pairs the change rests on.
		var a, b []float64
		for _, sl := range r.Slices {
			if sl.Pair <= r.Pairs() && sl.Build == "a" {
				a = append(a, sl.MsPerEnv)
			} else if sl.Pair <= r.Pairs() {
				b = append(b, sl.MsPerEnv)
			}
		}
		if len(a) != r.Pairs() || len(b) != r.Pairs() {
			t.Errorf("%s: slices %+v", k.Kind, r.Slices)
		}
		row := regexp.MustCompile(fmt.Sprintf(`\| %s \| %.2f ms \| %.2f ms \| %d \| %s \| %s to %s \| %s \| (budget|precision) \|`,
			k.Kind, orchestrate.Median(a), orchestrate.Median(b), c.Pairs, regexp.QuoteMeta(report.Pct1(c.Pct)), regexp.QuoteMeta(report.Pct1(c.Low)), regexp.QuoteMeta(report.Pct1(c.High)), regexp.QuoteMeta(verdict)))
		if !row.MatchString(md) {
			t.Errorf("%s: no row matching %s", k.Kind, row)
		}
		if _, err := os.Stat(filepath.Join(out, "kind-"+k.Kind, "results.json")); err != nil {
			t.Error(err)
		}
	}
	// Each build's bracket as its bisection found it.
	if len(card.Capacity.FindMax) != 2 {
		t.Fatalf("find max %+v", card.Capacity.FindMax)
	}
	for _, fm := range card.Capacity.FindMax {
		var probes []string
		for _, p := range fm.Probes {
			probes = append(probes, report.Num(p))
		}
		row := fmt.Sprintf("| %s | %s | %s | ", fm.Build, rateOrDash(fm.KeptUp), rateOrDash(fm.FellBehind))
		if !strings.Contains(md, row) || !strings.Contains(md, " | "+strings.Join(probes, " → ")+" | ") || len(probes) == 0 {
			t.Errorf("no row %q with probes %v", row, probes)
		}
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\| build \| kept up with \| fell behind at \| kept-up rate against a \| probes \| stopped early \|`),
		regexp.MustCompile(`(capacity is (higher|lower)|The brackets overlap|Neither build was seen to fall behind|No change of capacity can be stated)`),

		regexp.MustCompile(`# What Relay costs: b against a`),
		regexp.MustCompile("b is `[^`]+` \\(standin-relay .*\\), with its own Relay config `limits.max_concurrent_requests: 50`\\."),
		regexp.MustCompile(`\| kind \| a CPU per envelope \| b CPU per envelope \| pairs \| change \| 95% interval \| verdict \| ended by \|`),
		regexp.MustCompile(`- a: 64 senders, back to back`),
		regexp.MustCompile(`- b: 64 senders, back to back`),
	} {
		if !want.MatchString(md) {
			t.Errorf("report.md has nothing matching %s", want)
		}
	}
}
