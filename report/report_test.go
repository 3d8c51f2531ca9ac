package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/orchestrate"
	"github.com/relayload/relayload/upstream"
)

func sample() *orchestrate.Report {
	rep := &orchestrate.Report{
		Started: time.Unix(1700000000, 0), Finished: time.Unix(1700000100, 0),
		Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "today", Bin: "/r1"}, {Name: "fast", Bin: "/r2"}},
			Rates: []float64{200, 500}, Rounds: 2, Mix: "errors=1", Projects: 10, PoolSize: 100, Encoding: "identity"},
		KeptUpWith: map[string]float64{"today": 200, "fast": 500},
	}
	idx := 0
	for _, b := range []string{"today", "fast"} {
		for _, rate := range []float64{200, 500} {
			for round := 1; round <= 2; round++ {
				idx++
				v := orchestrate.VerdictKeptUp
				var reasons []string
				if b == "today" && rate == 500 {
					v, reasons = orchestrate.VerdictFellBehind, []string{"latency p99 2000 ms > 1s"}
				}
				cores := rate / 400
				if b == "fast" {
					cores *= 0.8
				}
				rep.Steps = append(rep.Steps, &orchestrate.Step{
					Index: idx, Build: b, Round: round, Rate: rate, Sent: int64(rate * 30), OK: int64(rate * 30),
					AchievedRate: rate, AcceptedRate: rate, Latency: orchestrate.Quantiles{P50: 1, P90: 3, P99: 9, Max: 40},
					CPU:      orchestrate.CPU{NetCores: cores, MsPerEnv: cores * 1000 / rate, IdleCores: 0.01},
					Memory:   orchestrate.Memory{PeakRSS: 100 << 20},
					Upstream: orchestrate.UpstreamSeen{Envelopes: int64(rate * 30), ItemsByType: map[string]int64{"event": int64(rate * 30)}, Outcomes: []upstream.OutcomeRow{{Outcome: "filtered", Category: "error", Reason: "web-crawlers", Quantity: 3}}},
					Series:   []orchestrate.SeriesPoint{{T: 0, RSSMB: 50}, {T: 1, RSSMB: 80}},
					Verdict:  v, Reasons: reasons, Shutdown: orchestrate.Shutdown{Took: 300 * time.Millisecond},
				})
			}
		}
	}
	rep.Steps = append(rep.Steps, &orchestrate.Step{Index: idx + 1, Build: "fast", Round: 3, Rate: 900, Failed: true,
		Verdict: orchestrate.VerdictFailed, Error: "relay exited with status 101 during the step", LogTail: "thread 'main' panicked"})
	rep.Failed = 1
	rep.Summary = []*orchestrate.Point{
		{Build: "today", Rate: 200, Runs: 2, AchievedRate: 200, AcceptedRate: 200, NetCores: 0.5, MsPerEnv: 2.5, IdleCores: 0.01, Latency: orchestrate.Quantiles{P50: 1, P90: 3, P99: 9, Max: 40}, Verdict: orchestrate.VerdictKeptUp, KeptUpJudged: true},
		{Build: "today", Rate: 500, Runs: 2, AchievedRate: 500, AcceptedRate: 500, NetCores: 1.25, MsPerEnv: 2.5, Latency: orchestrate.Quantiles{P50: 2, P90: 30, P99: 2000, Max: 2500}, Verdict: orchestrate.VerdictFellBehind},
		{Build: "fast", Rate: 200, Runs: 2, AchievedRate: 200, AcceptedRate: 200, NetCores: 0.4, MsPerEnv: 2, Latency: orchestrate.Quantiles{P50: 1, P90: 2, P99: 5, Max: 9}, Verdict: orchestrate.VerdictKeptUp},
		{Build: "fast", Rate: 500, Runs: 2, AchievedRate: 500, AcceptedRate: 499, NetCores: 1, MsPerEnv: 2, Latency: orchestrate.Quantiles{P50: 1, P90: 2, P99: 6, Max: 12}, Verdict: orchestrate.VerdictKeptUp, KeptUpJudged: true},
	}
	rep.Comparisons = []orchestrate.Comparison{{Build: "fast", Baseline: "today", Rate: 200, BaseCores: 0.5, Cores: 0.4, CoresChange: -20, BaseMsPerEnv: 2.5, MsPerEnv: 2, MsPerEnvChange: -20}}
	return rep
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	rep := sample()
	paths, err := Write(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{JSONFile, CSVFile, MarkdownFile, CPUChart, LatencyChart, RSSChart} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(paths) != 6 {
		t.Errorf("paths %v", paths)
	}
	for _, c := range []string{CPUChart, LatencyChart, RSSChart} {
		b, _ := os.ReadFile(filepath.Join(dir, c))
		if !bytes.HasPrefix(b, []byte("<?xml")) || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s is not SVG", c)
		}
	}
	// JSON round trip keeps every step.
	b, _ := os.ReadFile(filepath.Join(dir, JSONFile))
	var back orchestrate.Report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Steps) != len(rep.Steps) {
		t.Errorf("json: %v, %d steps", err, len(back.Steps))
	}
	// CSV: a header and one row per step, all the same width.
	f, _ := os.Open(filepath.Join(dir, CSVFile))
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) != len(rep.Steps)+1 {
		t.Fatalf("csv: %v, %d rows", err, len(rows))
	}
	if rows[1][1] != "today" || rows[1][3] != "200" || rows[1][4] != orchestrate.VerdictKeptUp {
		t.Errorf("csv row 1: %v", rows[1])
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	for _, want := range []string{"# Relay load test", "![cpu](cpu.svg)", "thread 'main' panicked", "−20%", "| fast"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

func TestTextTables(t *testing.T) {
	var b bytes.Buffer
	Text(&b, sample())
	out := b.String()
	if !strings.Contains(out, "today kept up with about 200 envelopes per second") ||
		!strings.Contains(out, "fast kept up with about 500 envelopes per second") {
		t.Errorf("headline:\n%s", out)
	}
	// Every line of a table has the same width.
	var width int
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "|") {
			width = 0
			continue
		}
		n := len([]rune(l))
		if width != 0 && n != width {
			t.Errorf("ragged table line (%d vs %d): %q", n, width, l)
		}
		width = n
	}
	for _, want := range []string{"median of 2 rounds", "filtered", "web-crawlers", "Failed steps", "relay exited with status 101"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q", want)
		}
	}
}

// TestTextOptionalSections: perf recordings with the flame-graph hint, a
// fault's summary, StatsD metrics, load averages, peak RSS and gap appear
// when the steps have them.
func TestTextOptionalSections(t *testing.T) {
	rep := sample()
	st := rep.Steps[0]
	st.Perf = &orchestrate.PerfRecord{File: "/tmp/relay-1.data", Event: "cpu-clock", CallGraph: "dwarf", Exit: "ok"}
	st.Fault = &orchestrate.FaultSeen{Spec: "outage=10s", Summary: "outage for 10s: upstream answered envelope 503×42"}
	st.StatsD = map[string]orchestrate.Quantiles{"event.processing_time": {P50: 1.25, P99: 7.5, Max: 9}}
	st.StatsDCounters = map[string]float64{"event.accepted": 6000}
	st.LoadAvg = [2]float64{0.42, 1.37}
	st.Upstream.Gap = 17
	rep.Summary[0].PeakRSS = 100 << 20
	rep.Notes = []string{"perf: no hardware cycle counter on this machine; recording the software event cpu-clock instead"}
	var b bytes.Buffer
	Text(&b, rep)
	out := b.String()
	for _, want := range []string{
		"perf recordings", "/tmp/relay-1.data: event cpu-clock, call graph dwarf, ok",
		"perf script -i /tmp/relay-1.data | inferno-collapse-perf",
		"Fault in step 1", "upstream answered envelope 503×42",
		"event.processing_time", "7.5", "event.accepted", "6,000",
		"0.42→1.37", "100.0 MB", "recording the software event cpu-clock",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	var gapRow bool
	for _, l := range strings.Split(out, "\n") {
		if cells := strings.Split(l, "|"); len(cells) > 6 && strings.TrimSpace(cells[1]) == "1" && strings.TrimSpace(cells[6]) == "17" {
			gapRow = true
		}
	}
	if !gapRow {
		t.Errorf("step 1's row lacks its gap 17:\n%s", out)
	}
}

func TestHeadlineHarness(t *testing.T) {
	rep := &orchestrate.Report{Harness: true, Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "harness"}}, Rates: []float64{1000, 5000}},
		KeptUpWith: map[string]float64{"harness": 5000},
		Steps:      []*orchestrate.Step{{}},
		Summary:    []*orchestrate.Point{{Build: "harness", Rate: 5000, AcceptedRate: 4998, Verdict: orchestrate.VerdictKeptUp, KeptUpJudged: true}}}
	if h := Headline(rep); h != "The harness on its own moves 4,998 envelopes per second (the highest rate tried that it kept up with)." {
		t.Errorf("headline %q", h)
	}
	rep.KeptUpWith["harness"] = 0
	if h := Headline(rep); !strings.Contains(h, "did not keep up with any rate tried (lowest 1,000/s)") {
		t.Errorf("headline %q", h)
	}
}

// BenchmarkWrite measures building every output file for a 10-step sweep
// (target: 2 s or less).
func BenchmarkWrite(b *testing.B) {
	rep := sample()
	for i := range rep.Steps {
		for j := range 300 {
			rep.Steps[i].Series = append(rep.Steps[i].Series, orchestrate.SeriesPoint{T: float64(j) / 10, RSSMB: 100 + float64(j%7)})
		}
	}
	dir := b.TempDir()
	for b.Loop() {
		if _, err := Write(dir, rep); err != nil {
			b.Fatal(err)
		}
	}
}
