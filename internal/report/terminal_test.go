package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/orchestrate"
)

// recorded reads a results.json recorded in testdata (its per-second
// series left out: the summary does not read them).
func recorded(t *testing.T, name string) *orchestrate.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var rep orchestrate.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return &rep
}

// summaryOf is Text's output for rep.
func summaryOf(rep *orchestrate.Report, reportMD string) string {
	var b bytes.Buffer
	Text(&b, rep, reportMD)
	return b.String()
}

// TestTextFits: the summary of real sweeps (a harness sweep and a stand-in
// relay's sweep of two builds over three rounds, recorded), of the sample
// with every optional section, and of builds with the longest names
// allowed has no line wider than cli.Width, and keeps what it must say.
func TestTextFits(t *testing.T) {
	long := richSample()
	names := map[string]string{"today": strings.Repeat("t", 40), "fast": "f" + strings.Repeat("-long", 7) + "-name"}
	for i, b := range long.Setup.Builds {
		long.Setup.Builds[i].Name = names[b.Name]
	}
	for _, st := range long.Steps {
		st.Build = names[st.Build]
	}
	for _, p := range long.Summary {
		p.Build = names[p.Build]
	}
	for i := range long.Comparisons {
		long.Comparisons[i].Build, long.Comparisons[i].Baseline = names["fast"], names["today"]
	}
	long.Summary[1].Verdict = "mixed: 1 kept up, 1 fell behind"
	for _, tc := range []struct {
		name string
		rep  *orchestrate.Report
		want []string
	}{
		{"harness sweep", recorded(t, "harness-sweep.json"), []string{
			"The harness on its own moves", "it kept up at every rate tried; try higher rates or --find-max",
			"target/s", "forwarded/s", "harness CPU", "CPU/envelope", "2,000", "4,000", "kept up"}},
		{"stand-in sweep", recorded(t, "standin-sweep.json"), []string{
			"main kept up with about 150 envelopes per second and fell behind at 400/s in 2 of 3 rounds; --find-max --rates 150,400 narrows it down.",
			"pr kept up with about 150 envelopes per second and fell behind at 400/s; --find-max --rates 150,400 narrows it down.",
			"Per rate (median of 3 rounds)", "build", "Relay CPU", "fell behind", "Why not kept up",
			"main at 400/s (3 of 3 rounds; round 1): fell behind: forwarded 300/s of 400/s accepted",
			"steps 1–14, 16–18, e.g. step 1: 3710 PII canaries that Relay's default scrubbing must remove reached the upstream",
			"harness CPU (blast and the fake upstream, beside Relay):", "Builds compared with main", "over the rounds"}},
		{"sample", richSample(), []string{
			"today kept up with about 200 envelopes per second and fell behind at 500/s",
			"max: sent as fast as possible by 64 senders", "today at max: fell behind: " + maxStopped,
			"harness CPU (blast and the fake upstream, beside Relay): 0.040 cores, 8% of Relay's CPU.",
			"Against the baseline old/results.json", "1 of 2 checks crossed their threshold",
			"- today at 500/s: 3 → 3.3 (+10.0%), threshold cpu_ms_per_envelope>+5%",
			"Failed steps", "step 10 (fast, 900/s): relay exited with status 101 during the step",
			"Fault in step 1 (200/s)", "upstream answered envelope 503×42",
			"Notes", "recording the software event cpu-clock", "Every step, items by type, outcomes, Relay's metrics and the setup: out/report.md"}},
		{"long build names", long, []string{"Left out here to fit:", "mixed: 1 kept up, 1 fell behind"}},
	} {
		out := summaryOf(tc.rep, "out/report.md")
		for i, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > cli.Width {
				t.Errorf("%s: line %d is %d wide: %q", tc.name, i+1, n, l)
			}
		}
		for _, want := range tc.want {
			if !strings.Contains(flat(out), want) {
				t.Errorf("%s: summary lacks %q:\n%s", tc.name, want, out)
			}
		}
		// The full tables stay in report.md.
		if strings.Contains(out, "|") || strings.Contains(out, "\nSteps\n") || strings.Contains(out, "\nSetup\n") {
			t.Errorf("%s: a table of report.md in the summary:\n%s", tc.name, out)
		}
	}
}

// TestTextPerRate: the summary's per-rate table has a row per point with
// its figures under the right headers.
func TestTextPerRate(t *testing.T) {
	out := summaryOf(sample(), "")
	rows := plainTableAfter(t, out, "Per rate (median of 2 rounds)")
	// Two builds and the spread between rounds leave no room for backlog.
	want := [][]string{
		{"build", "target/s", "accepted/s", "forwarded/s", "p99 ms", "Relay CPU", "CPU/envelope", "peak RSS", "verdict"},
		{"today", "200", "200", "200", "9.00", "0.500 ±0%", "2.50 ms ±0%", "–", "kept up"},
		{"today", "500", "500", "350", "2,000", "1.250 ±0%", "2.50 ms ±0%", "–", "fell behind"},
		{"today", "max", "11,770", "360", "8.00", "1.900", "4.10 ms", "3.9 GiB", "fell behind"},
		{"fast", "200", "200", "200", "5.00", "0.400 ±0%", "2.00 ms ±0%", "–", "kept up"},
		{"fast", "500", "499", "499", "6.00", "1.000 ±0%", "2.00 ms ±0%", "–", "kept up"},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %q", rows)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d: %q, want %q", i, rows[i], want[i])
		}
	}
	if !strings.Contains(flat(out), "Left out here to fit: backlog.") || !strings.Contains(out, "--out DIR writes the full report") {
		t.Errorf("no report written and the summary does not say how:\n%s", out)
	}
}

// plainTableAfter reads the plain table under the line title: cells are
// separated by two or more spaces (none of this table's cells has two).
func plainTableAfter(t *testing.T, out, title string) [][]string {
	t.Helper()
	i := strings.Index(out, "\n"+title+"\n")
	if i < 0 {
		t.Fatalf("no %q in:\n%s", title, out)
	}
	var rows [][]string
	for _, l := range strings.Split(out[i+len(title)+2:], "\n") {
		if strings.TrimSpace(l) == "" {
			break
		}
		if strings.HasPrefix(strings.TrimSpace(l), "---") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.TrimSpace(l), "  ") {
			if c = strings.TrimSpace(c); c != "" {
				cells = append(cells, c)
			}
		}
		rows = append(rows, cells)
	}
	return rows
}

// TestWritePlain: columns are left out in the order given until the
// table fits, then the last column is wrapped under itself.
func TestWritePlain(t *testing.T) {
	tb := NewTable("name", ">a", ">b", "verdict")
	tb.Add("x", "1", "22", "kept up")
	tb.Add("yy", "333", "4", "fell behind: latency p99 2000 ms > 1s; backlog grew")
	var b bytes.Buffer
	if left := tb.WritePlain(&b, 200); len(left) != 0 {
		t.Errorf("wide enough, left out %v", left)
	}
	want := "name    a   b  verdict\n" +
		"----  ---  --  ---------------------------------------------------\n" +
		"x       1  22  kept up\n" +
		"yy    333   4  fell behind: latency p99 2000 ms > 1s; backlog grew\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	left := tb.WritePlain(&b, 30, "b", "name")
	want = "name    a  verdict\n" +
		"----  ---  -------------------\n" +
		"x       1  kept up\n" +
		"yy    333  fell behind:\n" +
		"           latency p99 2000 ms\n" +
		"           > 1s; backlog grew\n"
	if strings.Join(left, ",") != "b" || b.String() != want {
		t.Errorf("left out %v, got\n%s\nwant\n%s", left, b.String(), want)
	}
}
