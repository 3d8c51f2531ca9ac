package report

import (
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/orchestrate"
)

func TestSliceRunText(t *testing.T) {
	run := &orchestrate.SliceRun{Rate: 300, Baseline: "main", Build: "branch", Slice: 10 * time.Second, Block: 2 * time.Minute, Blocks: 4, Prior: compare.Prior{Spread: 0.0125, DF: 1.1, Source: "recorded"}, Ended: "precision", Took: 7 * time.Minute,
		Slices: make([]orchestrate.Slice, 40),
		Changes: []compare.Change{
			{Metric: "ms_per_envelope", Pairs: 20, Blocks: 4, Pct: -4.12, Low: -5.9, High: -2.3, HalfWidth: 1.8, DF: 17.3, Spread: 1.62, RunSpread: 2.1, Verdict: compare.VerdictLower},
			{Metric: "p99_ms", Pairs: 20, Pct: 1.2, Low: -3.1, High: 5.6, HalfWidth: 4.4, Verdict: compare.VerdictNotSignificant},
		}}
	rep := &orchestrate.Report{SliceRuns: []*orchestrate.SliceRun{run}}
	h := Headline(rep)
	want := "branch against main at 300/s: faster: CPU per envelope −4.1% (95% interval −5.9% to −2.3%); 20 pairs of 10s slices on 4 processes per build in 7m0s, ended by precision."
	if h != want {
		t.Errorf("headline\n%s\nwant\n%s", h, want)
	}
	var b strings.Builder
	Text(&b, rep, "")
	for _, s := range []string{"branch against main at 300/s, in slices", "CPU per envelope", "−5.9% to −2.3%", "p99 latency", "not significant (Holm)", "40 slices of 10s on 4 processes per build (both builds' Relays started afresh every 2m0s", "blocks show ±2.10% on 3 df", "prior ±1.25% on 1.1 df (recorded)", "makes ±1.62%", "17 df, resolution ±1.8%", "judged at 5%; the other metrics are judged (Holm-corrected"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, b.String())
		}
	}
	// Too few pairs: no verdict, and says why the run ended.
	run.Changes = []compare.Change{{Metric: "ms_per_envelope", Pairs: 1, Verdict: compare.VerdictTooFewPairs}}
	run.Slices = []orchestrate.Slice{{Pair: 1, Build: "main"}, {Pair: 1, Build: "branch"}, {Pair: 2, Build: "branch"}}
	run.Ended = "failed: relay exited"
	if h := Headline(rep); !strings.Contains(h, "no verdict, 1 whole pairs (failed: relay exited)") {
		t.Errorf("headline %q", h)
	}
}
