package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/upstream"
)

// maxStopped is the sample's reason for stopping its RateMax step early.
const maxStopped = "Relay's RSS passed 3.5 GiB (3584.0 MiB) 6.0 s after blast started; blast was stopped there"

// seconds is a step's per-second series: blast's warm-up and window at
// rate, then a drain of two seconds, with forwarding at fwd per second.
func seconds(rate, fwd float64, n int) []orchestrate.SecondPoint {
	var pts []orchestrate.SecondPoint
	var backlog int64
	for i := range n {
		p := orchestrate.SecondPoint{T: i, RSSMiB: 50 + float64(i)}
		if i < n-2 {
			p.Sent, p.Accepted = int64(rate), int64(rate)
		}
		p.Forwarded = min(int64(fwd), backlog+p.Accepted)
		backlog += p.Accepted - p.Forwarded
		p.Backlog = backlog
		pts = append(pts, p)
	}
	return pts
}

func sample() *orchestrate.Report {
	rep := &orchestrate.Report{
		Started: time.Unix(1700000000, 0), Finished: time.Unix(1700000100, 0),
		Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "today", Bin: "/r1"}, {Name: "fast", Bin: "/r2"}},
			Rates: []float64{200, 500, orchestrate.RateMax}, Rounds: 2, Mix: "errors=1", Projects: 10, PoolSize: 100, Encoding: "identity",
			Warmup: 2 * time.Second, Duration: 10 * time.Second, PoolBytes: map[string]int64{"raw": 3 << 30, "encoded": 5 << 20}},
		KeptUpWith: map[string]float64{"today": 200, "fast": 500},
	}
	idx := 0
	for _, b := range []string{"today", "fast"} {
		for _, rate := range []float64{200, 500} {
			for round := 1; round <= 2; round++ {
				idx++
				v := orchestrate.VerdictKeptUp
				var reasons []string
				steady := orchestrate.Steady{ForwardedRate: rate, AcceptedRate: rate, BacklogEnd: int64(rate / 10), BacklogGrowth: 0.5,
					GrowthSpan: 4, Allowance: rate, CatchUp: 400 * time.Millisecond, RSSSlope: 0.02, Seconds: 10}
				drain := orchestrate.Drain{Took: 2 * time.Second, Settled: true, LastForward: 400 * time.Millisecond}
				if b == "today" && rate == 500 {
					v, reasons = orchestrate.VerdictFellBehind, []string{"latency p99 2000 ms > 1s"}
					// Forwarded 340/s and 360/s: median 350/s; growth 160 and 140/s: median 150/s.
					fwd := 340 + 20*float64(round-1)
					steady = orchestrate.Steady{ForwardedRate: fwd, AcceptedRate: rate, BacklogEnd: 1500, BacklogGrowth: rate - fwd,
						GrowthSpan: 4, Allowance: rate, CatchUp: -1, RSSSlope: 1.5, Seconds: 10}
					drain = orchestrate.Drain{Took: 20 * time.Second}
				}
				cores := rate / 400
				if b == "fast" {
					cores *= 0.8
				}
				sent := int64(rate * 30)
				rep.Steps = append(rep.Steps, &orchestrate.Step{
					Index: idx, Build: b, Round: round, Rate: rate, Sent: sent, OK: sent, Elapsed: 10 * time.Second,
					AchievedRate: rate, AcceptedRate: rate, Latency: orchestrate.Quantiles{P50: 1, P90: 3, P99: 9, Max: 40},
					CPU: orchestrate.CPU{NetCores: cores, MsPerEnv: cores * 1000 / rate, IdleCores: 0.01,
						CostSpan: 14 * time.Second, CostCPUSecs: cores * 14, CostEnvelopes: sent,
						HarnessCores: 0.04, HarnessShare: 8,
						HarnessSplit: &orchestrate.HarnessSplit{BlastCores: 0.01, UpstreamCores: 0.02, SchedulerCores: 0.008, OtherCores: 0.002, Samples: 500}},
					Memory: orchestrate.Memory{PeakRSS: 100 << 20},
					Upstream: orchestrate.UpstreamSeen{Envelopes: sent + 40, Forwarded: sent, ItemsByType: map[string]int64{"event": sent},
						Outcomes: []upstream.OutcomeRow{{Outcome: "filtered", Category: "error", Reason: "web-crawlers", Quantity: 3}}},
					Steady:  steady,
					Drain:   drain,
					Series:  []orchestrate.SeriesPoint{{T: 0, RSSMB: 50}, {T: 1, RSSMB: 80}},
					Seconds: seconds(rate, steady.ForwardedRate, 14),
					Verdict: v, Reasons: reasons, Shutdown: orchestrate.Shutdown{Took: 300 * time.Millisecond},
				})
			}
		}
	}
	// today, sent as fast as possible until Relay's RSS passed the bound.
	rep.Steps = append(rep.Steps, &orchestrate.Step{Index: idx + 1, Build: "today", Round: 1, Rate: orchestrate.RateMax, Concurrency: 64,
		Sent: 47200, OK: 47080, Elapsed: 4 * time.Second, AchievedRate: 11800, AcceptedRate: 11770,
		Latency:  orchestrate.Quantiles{P50: 5, P90: 6, P99: 8, Max: 30},
		CPU:      orchestrate.CPU{NetCores: 1.9, MsPerEnv: 4.1, CostSpan: 26 * time.Second, CostCPUSecs: 49.4, CostEnvelopes: 12050},
		Memory:   orchestrate.Memory{PeakRSS: 39 << 30 / 10},
		Upstream: orchestrate.UpstreamSeen{Envelopes: 12100, Forwarded: 12050, Gap: 35030},
		Steady: orchestrate.Steady{ForwardedRate: 360, AcceptedRate: 11770, BacklogEnd: 45640, BacklogGrowth: 11410, GrowthSpan: 2,
			Allowance: 11770, CatchUp: -1, RSSSlope: 260, Seconds: 4},
		Drain: orchestrate.Drain{Took: 20 * time.Second}, StoppedEarly: maxStopped,
		Seconds: seconds(11770, 360, 8), Verdict: orchestrate.VerdictFellBehind, Reasons: []string{maxStopped}})
	rep.Steps = append(rep.Steps, &orchestrate.Step{Index: idx + 2, Build: "fast", Round: 3, Rate: 900, Failed: true,
		Verdict: orchestrate.VerdictFailed, Error: "relay exited with status 101 during the step", LogTail: "thread 'main' panicked"})
	rep.Failed = 1
	rep.Summary = []*orchestrate.Point{
		{Build: "today", Rate: 200, Runs: 2, AchievedRate: 200, AcceptedRate: 200, ForwardedRate: 200, BacklogEnd: 20, CatchUp: 400 * time.Millisecond, RSSSlope: 0.02,
			NetCores: 0.5, MsPerEnv: 2.5, IdleCores: 0.01, Latency: orchestrate.Quantiles{P50: 1, P90: 3, P99: 9, Max: 40}, Verdict: orchestrate.VerdictKeptUp, KeptUpJudged: true},
		{Build: "today", Rate: 500, Runs: 2, AchievedRate: 500, AcceptedRate: 500, ForwardedRate: 350, BacklogEnd: 1500, CatchUp: -1, RSSSlope: 1.5,
			NetCores: 1.25, MsPerEnv: 2.5, Latency: orchestrate.Quantiles{P50: 2, P90: 30, P99: 2000, Max: 2500}, Verdict: orchestrate.VerdictFellBehind},
		{Build: "today", Rate: orchestrate.RateMax, Runs: 1, AchievedRate: 11800, AcceptedRate: 11770, ForwardedRate: 360, BacklogEnd: 45640, CatchUp: -1, RSSSlope: 260,
			NetCores: 1.9, MsPerEnv: 4.1, PeakRSS: 39 << 30 / 10, Latency: orchestrate.Quantiles{P50: 5, P90: 6, P99: 8, Max: 30}, Verdict: orchestrate.VerdictFellBehind},
		{Build: "fast", Rate: 200, Runs: 2, AchievedRate: 200, AcceptedRate: 200, ForwardedRate: 200, BacklogEnd: 20, CatchUp: 400 * time.Millisecond, RSSSlope: 0.02,
			NetCores: 0.4, MsPerEnv: 2, Latency: orchestrate.Quantiles{P50: 1, P90: 2, P99: 5, Max: 9}, Verdict: orchestrate.VerdictKeptUp},
		{Build: "fast", Rate: 500, Runs: 2, AchievedRate: 500, AcceptedRate: 499, ForwardedRate: 499, BacklogEnd: 50, CatchUp: 400 * time.Millisecond, RSSSlope: 0.02,
			NetCores: 1, MsPerEnv: 2, Latency: orchestrate.Quantiles{P50: 1, P90: 2, P99: 6, Max: 12}, Verdict: orchestrate.VerdictKeptUp, KeptUpJudged: true},
	}
	rep.Comparisons = []orchestrate.Comparison{{Build: "fast", Baseline: "today", Rate: 200, BaseCores: 0.5, Cores: 0.4, CoresChange: -20, BaseMsPerEnv: 2.5, MsPerEnv: 2, MsPerEnvChange: -20}}
	return rep
}

// withProfile gives step 2 a perf recording with a profile whose files
// are under dir (when dir is not empty): 20 functions, one with a very
// long name, and three groups, one of them empty.
func withProfile(rep *orchestrate.Report, dir string) *orchestrate.PerfProfile {
	pp := &orchestrate.PerfProfile{Samples: 12345, Unwound: 61.5,
		Groups: []orchestrate.GroupShare{{Name: "PII scrubbing", Share: 11.5}, {Name: "JSON", Share: 0}, {Name: "user-agent parsing", Share: 24}},
		Folded: filepath.Join(dir, "perf", "relay.folded"), Flame: filepath.Join(dir, "perf", "flame-relay.svg")}
	for i := 1; i <= 20; i++ {
		pp.Top = append(pp.Top, orchestrate.FunctionShare{Name: fmt.Sprintf("relay_server::fn_%02d", i), Inclusive: 90 - float64(i), Self: float64(i) / 10})
	}
	pp.Top[2].Name = "relay_event_normalization::" + strings.Repeat("very_long_module::", 10) + "normalize_user_agent"
	rep.Steps[1].Perf = &orchestrate.PerfRecord{File: filepath.Join(dir, "perf", "relay.data"), Event: "cycles", CallGraph: "dwarf", Exit: "ok", Profile: pp}
	return pp
}

// tableAfter is the first table after the heading title (## or ###) in
// the Markdown out: its header and rows, each as trimmed cells.
func tableAfter(t *testing.T, out, title string) [][]string {
	t.Helper()
	i := strings.Index(out, "\n## "+title+"\n")
	if i < 0 {
		i = strings.Index(out, "\n### "+title+"\n")
	}
	if i < 0 {
		t.Fatalf("no heading %q in:\n%s", title, out)
	}
	i++
	var rows [][]string
	for _, l := range strings.Split(out[i+strings.Index(out[i:], "\n")+1:], "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		if strings.HasPrefix(l, "| --") || strings.HasPrefix(l, "| -:") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(l, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

// full is report.md for rep (no charts).
func full(t *testing.T, rep *orchestrate.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := markdown(&b, rep, "", nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// flat is s with every run of white space one space: prose wrapped over
// lines reads as one line.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// rowWith is the first row whose first cells are want.
func rowWith(rows [][]string, want ...string) []string {
	for _, r := range rows {
		if len(r) >= len(want) && slices.Equal(r[:len(want)], want) {
			return r
		}
	}
	return nil
}

// cell is row's cell under the column named col.
func cell(t *testing.T, rows [][]string, row []string, col string) string {
	t.Helper()
	i := slices.Index(rows[0], col)
	if i < 0 || row == nil || i >= len(row) {
		t.Fatalf("no column %q in %v (row %v)", col, rows[0], row)
	}
	return row[i]
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	rep := sample()
	withProfile(rep, dir)
	paths, err := Write(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	var stepCharts []string
	for _, st := range rep.Steps {
		if len(st.Seconds) > 0 {
			stepCharts = append(stepCharts, fmt.Sprintf("step-%02d.svg", st.Index))
		}
	}
	if len(stepCharts) != 9 {
		t.Fatalf("sample has %d steps with seconds", len(stepCharts))
	}
	files := append([]string{JSONFile, CSVFile, MarkdownFile, CPUChart, LatencyChart, RSSChart}, stepCharts...)
	for _, name := range files {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(paths) != len(files) {
		t.Errorf("paths %v", paths)
	}
	for _, c := range append([]string{CPUChart, LatencyChart, RSSChart}, stepCharts...) {
		b, _ := os.ReadFile(filepath.Join(dir, c))
		if !bytes.HasPrefix(b, []byte("<?xml")) || !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s is not SVG", c)
		}
		// Every text asks for a sans-serif stack, none for the serif font.
		if !bytes.Contains(b, []byte("font-family:"+FontFamily+";")) || bytes.Contains(b, []byte("Liberation Serif")) ||
			bytes.Count(b, []byte("font-family:")) != bytes.Count(b, []byte("font-family:"+FontFamily+";")) {
			t.Errorf("%s: text does not ask for %q", c, FontFamily)
		}
	}
	rss, _ := os.ReadFile(filepath.Join(dir, RSSChart))
	if !bytes.Contains(rss, []byte("RSS (MiB)")) || bytes.Contains(rss, []byte("(MB)")) {
		t.Errorf("rss.svg's axis is not in MiB")
	}
	// One step chart: three panels on one x axis, the window and blast's end marked, small.
	b, _ := os.ReadFile(filepath.Join(dir, "step-03.svg"))
	for _, want := range []string{"Step 3: today, 500/s, round 1 (fell behind)", "envelopes per second", "sent", "accepted", "forwarded",
		"backlog (envelopes)", "Relay RSS (MiB)", "seconds since blast started", "measured window", "blast&#39;s end"} {
		if !bytes.Contains(b, []byte(">"+want+"<")) {
			t.Errorf("step-03.svg lacks %q", want)
		}
	}
	if n := bytes.Count(b, []byte("seconds since blast started")); n != 1 {
		t.Errorf("step-03.svg: x axis labelled %d times, want once (shared)", n)
	}
	if len(b) > 80<<10 {
		t.Errorf("step-03.svg is %d bytes", len(b))
	}
	// JSON round trip keeps every step.
	b, _ = os.ReadFile(filepath.Join(dir, JSONFile))
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
	// The columns that were there keep their places; the new ones follow.
	if rows[0][16] != "envelopes" || rows[1][16] != "6040" || rows[0][32] != "error" || rows[0][33] != "forwarded" {
		t.Errorf("csv header %v, row 1 %v", rows[0], rows[1])
	}
	col := func(row int, name string) string {
		i := slices.Index(rows[0], name)
		if i < 0 {
			t.Fatalf("csv lacks column %q", name)
		}
		return rows[row][i]
	}
	for name, want := range map[string]string{
		"forwarded": "6000", "forwarded_rate": "200.00", "backlog_end": "20", "backlog_growth_per_s": "0.50", "catch_up_s": "0.400",
		"rss_slope_mib_per_s": "0.020", "cost_span_s": "14.000", "cost_cpu_s": "7.0000", "cost_envelopes": "6000", "stopped_early": "", "concurrency": "0",
		"harness_cores": "0.0400", "harness_share_pct": "8.00", "harness_blast_cores": "0.0100", "harness_upstream_cores": "0.0200",
		"harness_scheduler_cores": "0.0080", "harness_other_cores": "0.0020",
	} {
		if got := col(1, name); got != want {
			t.Errorf("csv row 1 %s = %q, want %q", name, got, want)
		}
	}
	max := len(rep.Steps) - 1 // the RateMax step
	for name, want := range map[string]string{
		"target_rate": "0", "catch_up_s": "-1", "stopped_early": maxStopped, "concurrency": "64", "forwarded_rate": "360.00",
		"rss_slope_mib_per_s": "260.000", "backlog_end": "45640",
	} {
		if got := col(max, name); got != want {
			t.Errorf("csv max row %s = %q, want %q", name, got, want)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	for _, want := range []string{"# Relay load test", "![cpu](cpu.svg)", "thread 'main' panicked", "−20%", "| fast",
		"### Each step second by second", "Step 3: today, 500/s, round 1 (fell behind)\n\n![step 3](step-03.svg)", "![step 9](step-09.svg)",
		"The charts against rate leave out the steps sent as fast as possible",
		"## Where the time goes", "### Step 2 (today, 200/s)", "![flame graph of step 2](perf/flame-relay.svg)",
		"[perf/relay.folded](perf/relay.folded)", "| `relay_server::fn_01`"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if strings.Contains(string(md), "![step-03]") {
		t.Errorf("report.md links step charts as plain charts")
	}
}

// TestMarkdownFlameOutsideDir: a flame graph outside the output directory
// is named by its path, not shown.
func TestMarkdownFlameOutsideDir(t *testing.T) {
	rep := sample()
	withProfile(rep, "/elsewhere")
	var b bytes.Buffer
	if err := markdown(&b, rep, t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "flame graph `/elsewhere/perf/flame-relay.svg`") || strings.Contains(out, "![flame graph") {
		t.Errorf("report.md:\n%s", out)
	}
}

func TestMarkdownTables(t *testing.T) {
	rep := sample()
	rep.Steps[0].CPU.HarnessCores, rep.Steps[0].CPU.HarnessShare = 0.21, 12
	rep.Steps[0].Took, rep.Steps[0].OutsideWindow = 39*time.Second, 23
	out := full(t, rep)
	head := strings.Split(strings.SplitN(out, "\n## ", 2)[0], "\n\n")[1:]
	wantToday := "today kept up with about 200 envelopes per second and fell behind at 500/s; --find-max --rates 200,500 narrows it down. " +
		"At 500/s it forwarded only 350/s: its ceiling here; the backlog grew 150/s. " +
		"Sent as fast as possible (64 senders): accepted 11,770/s, forwarded 360/s, RSS +260 MiB/s to 3.9 GiB (stopped: " + maxStopped + ")."
	// Its step at 900/s failed: not "kept up at every rate tried".
	wantFast := "fast kept up with about 500 envelopes per second (the highest rate tried that it kept up with; the steps at higher rates failed). " +
		"1 of 5 steps failed: relay exited with status 101 during the step (see Failed steps)."
	if len(head) < 2 || flat(head[0]) != wantToday || flat(head[1]) != wantFast {
		t.Errorf("headline:\n%q\nwant\n%s\n%s", head, wantToday, wantFast)
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
	for _, want := range []string{"median of 2 rounds", "filtered", "web-crawlers", "Failed steps", "relay exited with status 101",
		"0.210 (12%)", "39 s (23% outside)", "harness CPU: the cores orchestrate itself (blast, the fake upstream) used", "step took: the whole step",
		"A change's interval needs --rounds 2 or more (or --compare-in slices).",
		"backlog: envelopes accepted but not forwarded yet at the end of the window",
		"catch-up: from blast's end until the last envelope was forwarded",
		"CPU per envelope: Relay's CPU time from blast's start until forwarding settled",
		"it is not diluted above capacity", "max: sent as fast as possible by that many senders",
		"Outcomes are what Relay reported to the upstream about the envelopes and items it rate limited, filtered or dropped",
		"with --quota they show the quota at work",
		"forwarded (total): data envelopes (the SDK traffic Relay passed on, not its own metric and outcome envelopes",
		"pool of 100 envelopes (3.0 GiB raw, 5.0 MiB on the wire",
	} {
		if !strings.Contains(flat(out), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if strings.Contains(out, " MB") {
		t.Errorf("text says MB:\n%s", out)
	}

	rates := tableAfter(t, out, "Per rate (median of 2 rounds)")
	wantCols := []string{"build", "target/s", "sent/s", "accepted/s", "forwarded/s", "backlog", "catch-up", "p50 ms", "p99 ms", "max ms",
		"Relay CPU", "CPU per envelope", "peak RSS", "RSS slope", "verdict"}
	if !slices.Equal(rates[0], wantCols) {
		t.Fatalf("per-rate columns %v, want %v", rates[0], wantCols)
	}
	behind := rowWith(rates, "today", "500")
	for col, want := range map[string]string{"forwarded/s": "350", "backlog": "1,500", "catch-up": "> 20 s", "RSS slope": "+1.5 MiB/s", "p99 ms": "2,000"} {
		if got := cell(t, rates, behind, col); got != want {
			t.Errorf("today at 500/s: %s = %q, want %q", col, got, want)
		}
	}
	kept := rowWith(rates, "today", "200")
	for col, want := range map[string]string{"forwarded/s": "200", "backlog": "20", "catch-up": "0.4 s", "RSS slope": "0.0 MiB/s", "CPU per envelope": "2.50 ms ±0%"} {
		if got := cell(t, rates, kept, col); got != want {
			t.Errorf("today at 200/s: %s = %q, want %q", col, got, want)
		}
	}
	maxRow := rowWith(rates, "today", "max (64 senders)")
	for col, want := range map[string]string{"accepted/s": "11,770", "forwarded/s": "360", "backlog": "45,640", "peak RSS": "3.9 GiB", "RSS slope": "+260 MiB/s", "catch-up": "> 20 s"} {
		if got := cell(t, rates, maxRow, col); got != want {
			t.Errorf("max: %s = %q, want %q", col, got, want)
		}
	}

	steps := tableAfter(t, out, "Steps")
	for _, c := range []string{"forwarded (total)", "gap", "catch-up", "shutdown", "harness CPU", "idle CPU"} {
		if !slices.Contains(steps[0], c) {
			t.Errorf("steps table lacks %q: %v", c, steps[0])
		}
	}
	for idx, want := range map[string][2]string{"1": {"6,000", "0.4 s"}, "3": {"15,000", "> 20 s"}, "9": {"12,050", "> 20 s"}, "10": {"0", "–"}} {
		row := rowWith(steps, idx)
		if got := [2]string{cell(t, steps, row, "forwarded (total)"), cell(t, steps, row, "catch-up")}; got != want {
			t.Errorf("step %s: forwarded, catch-up = %v, want %v", idx, got, want)
		}
	}
	if got := cell(t, steps, rowWith(steps, "9"), "target/s"); got != "max" {
		t.Errorf("step 9's target %q", got)
	}
	outcomes := tableAfter(t, out, "Outcomes Relay reported")
	if !slices.Equal(outcomes[0], []string{"#", "target/s", "outcome", "category", "reason", "quantity"}) ||
		!slices.Equal(rowWith(outcomes, "1"), []string{"1", "200", "filtered", "error", "web-crawlers", "3"}) {
		t.Errorf("outcomes table %v", outcomes)
	}
}

// TestHeadlineCeiling: one build says "Relay's ceiling"; a sweep of only
// RateMax says what it did without a rate it kept up with; the lowest
// rate tried leaves RateMax out.
func TestHeadlineCeiling(t *testing.T) {
	rep := sample()
	rep.Setup.Builds = rep.Setup.Builds[:1]
	if h := Headline(rep); !strings.Contains(h, "At 500/s it forwarded only 350/s: Relay's ceiling here; the backlog grew 150/s.") {
		t.Errorf("headline %q", h)
	}
	// A step that fell behind without a growing backlog is no ceiling.
	for _, st := range rep.Steps {
		st.Steady.BacklogGrowth = 1
	}
	if h := Headline(rep); strings.Contains(h, "ceiling") {
		t.Errorf("headline %q", h)
	}
	rep.KeptUpWith["today"] = 0
	for _, st := range rep.Steps {
		st.Verdict = orchestrate.VerdictFellBehind
	}
	if h := Headline(rep); !strings.Contains(h, "did not keep up with any rate tried (lowest 200/s); try lower rates.") {
		t.Errorf("headline %q", h)
	}
	// Below the rate it fell behind at, blast missed its schedule: no
	// verdict, and no advice to try lower rates.
	for _, st := range rep.Steps {
		if st.Build == "today" && st.Rate == 200 {
			st.Verdict = orchestrate.VerdictHarnessLimited
		}
	}
	if h := Headline(rep); !strings.HasPrefix(h, "today kept up at no rate that could be judged: none of its 5 steps kept up, and 2 were harness-limited") {
		t.Errorf("headline %q", h)
	}
	var only []*orchestrate.Step
	for _, st := range rep.Steps {
		if st.Build == "today" && st.Rate == orchestrate.RateMax {
			only = append(only, st)
		}
	}
	rep.Steps, rep.Setup.Rates = only, []float64{orchestrate.RateMax}
	if h := Headline(rep); !strings.HasPrefix(h, "Sent as fast as possible (64 senders): accepted 11,770/s") {
		t.Errorf("headline %q", h)
	}
	// Between the rate it kept up with and the one it fell behind at,
	// one was harness-limited: the headline says so.
	rep2 := sample()
	for _, st := range rep2.Steps {
		if st.Build == "fast" && st.Rate == 500 {
			st.Rate = 800
			st.Verdict = orchestrate.VerdictFellBehind
		}
	}
	rep2.Steps = append(rep2.Steps, &orchestrate.Step{Build: "fast", Rate: 400, Verdict: orchestrate.VerdictHarnessLimited})
	rep2.KeptUpWith["fast"] = 200
	if h := Headline(rep2); !strings.Contains(h, "fast kept up with about 200 envelopes per second and fell behind at 800/s (400/s between could not be judged: harness-limited); --find-max --rates 200,800 narrows it down.") {
		t.Errorf("headline %q", h)
	}
}

// richSample is sample with every optional section: a noise verdict, a
// gate with a breach, a perf recording, a fault, StatsD metrics, load
// averages, a gap, a canary leak and a note.
func richSample() *orchestrate.Report {
	rep := sample()
	rep.Comparisons[0].MsPerEnvPaired = &compare.Change{Metric: "ms_per_envelope", Pairs: 3, Pct: 1.2, Low: -3.4, High: 6.0, HalfWidth: 4.8, Verdict: "no change beyond ±4.8%"}
	th, _ := orchestrate.ParseThresholds("cpu_ms_per_envelope>+5%")
	rep.Gate = &orchestrate.GateResult{Baseline: "old/results.json", Compared: 2, Missing: []float64{900},
		Breaches: []orchestrate.Breach{{Threshold: th[0], Build: "today", Rate: 500, Baseline: 3, Value: 3.3, Change: 10}}}
	st := rep.Steps[0]
	st.Perf = &orchestrate.PerfRecord{File: "/tmp/relay-1.data", Event: "cpu-clock", CallGraph: "dwarf", Exit: "ok"}
	st.Fault = &orchestrate.FaultSeen{Spec: "outage=10s", Summary: "outage for 10s: upstream answered envelope 503×42"}
	st.StatsD = map[string]orchestrate.Quantiles{"event.processing_time": {P50: 1.25, P99: 7.5, Max: 9}}
	st.StatsDCounters = map[string]float64{"event.accepted": 6000}
	st.LoadAvg = [2]float64{0.42, 1.37}
	st.Upstream.Gap = 17
	st.Upstream.Canaries = upstream.Canaries{ItemsScanned: 6000, ScrubbedItems: 5900, Leaks: map[string]int64{"password": 1},
		KeptFound: map[string]int64{"public_note": 50}}
	rep.Summary[0].PeakRSS = 100 << 20
	rep.Notes = []string{"perf: no hardware cycle counter on this machine; recording the software event cpu-clock instead"}
	return rep
}

// TestMarkdownOptionalSections: perf recordings with the flame-graph hint,
// a fault's summary, StatsD metrics, load averages, peak RSS and gap
// appear when the steps have them.
func TestMarkdownOptionalSections(t *testing.T) {
	rep := richSample()
	out := full(t, rep)
	for _, want := range []string{
		"perf recordings", "/tmp/relay-1.data: event cpu-clock, call graph dwarf, ok",
		"perf script -i /tmp/relay-1.data | inferno-collapse-perf",
		"Fault in step 1", "upstream answered envelope 503×42",
		"event.processing_time", "7.5", "event.accepted", "6,000",
		"0.42→1.37", "100.0 MiB", "recording the software event cpu-clock",
		"PII canaries", "password=1", "public_note=50", "5,900", "a control it must leave alone",
		"no change beyond ±4.8%", "Student's t on the log ratios",
		"Against the baseline old/results.json", "1 of 2 checks crossed their threshold", "- today at 500/s: 3 → 3.3 (+10.0%), threshold cpu_ms_per_envelope>+5%",
		"Not in the baseline, so not checked: 900.",
	} {
		if !strings.Contains(flat(out), want) {
			t.Errorf("report.md lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Where the time goes") || strings.Contains(out, "speedscope") {
		t.Errorf("a recording without a profile has a profile section:\n%s", out)
	}
	steps := tableAfter(t, out, "Steps")
	if got := cell(t, steps, rowWith(steps, "1"), "gap"); got != "17" {
		t.Errorf("step 1's gap %q", got)
	}
}

// TestProfileSection: where the time goes, per step with a profile: the
// unwound share, at most maxTopRows functions, the groups by share, the
// files; the fold hint only for recordings without a profile.
func TestProfileSection(t *testing.T) {
	rep := sample()
	withProfile(rep, "/out")
	rep.Steps[0].Perf = &orchestrate.PerfRecord{File: "/tmp/relay-1.data", Event: "cpu-clock", CallGraph: "dwarf", Exit: "ok"}
	out := full(t, rep)
	for _, want := range []string{
		"\n## Where the time goes\n",
		"### Step 2 (today, 200/s)\n\n12,345 samples, 62% of them with a usable stack (the rest count for no function).",
		"By kind of work (samples with any frame in the group): user-agent parsing 24.0%, PII scrubbing 11.5%.",
		"Files: folded stacks `/out/perf/relay.folded`, flame graph `/out/perf/flame-relay.svg`.",
		"speedscope", "inferno",
		"perf script -i /tmp/relay-1.data | inferno-collapse-perf", // the hint, for step 1's recording
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report.md lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "JSON 0.0%") {
		t.Errorf("an empty group is listed")
	}
	top := tableAfter(t, out, "Step 2 (today, 200/s)")
	if !slices.Equal(top[0], []string{"function", "inclusive", "self"}) || len(top) != 1+maxTopRows {
		t.Fatalf("top functions table %v", top)
	}
	if !slices.Equal(top[1], []string{"`relay_server::fn_01`", "89.0%", "0.1%"}) || rowWith(top, "`relay_server::fn_15`") == nil || rowWith(top, "`relay_server::fn_16`") != nil {
		t.Errorf("top functions %v", top)
	}
	if long := strings.Trim(top[3][0], "`"); len([]rune(long)) != maxNameLen || !strings.HasPrefix(long, "relay_event_normalization::") ||
		!strings.HasSuffix(long, "normalize_user_agent") || !strings.Contains(long, "…") {
		t.Errorf("long name %q", long)
	}
	// With a profile for every recording, no fold hint.
	rep.Steps[0].Perf = nil
	if out := full(t, rep); strings.Contains(out, "inferno-collapse-perf") || !strings.Contains(out, "speedscope") {
		t.Errorf("fold hint with every recording profiled:\n%s", out)
	}
}

// TestStepChartsCapped: at most maxStepCharts step charts, the first
// round only beyond that.
func TestStepChartsCapped(t *testing.T) {
	rep := &orchestrate.Report{Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "b"}}, Rounds: 2}}
	for i := range 30 {
		rep.Steps = append(rep.Steps, &orchestrate.Step{Index: i + 1, Build: "b", Round: 1 + i%2, Rate: 100, Seconds: seconds(100, 100, 5)})
	}
	rep.Steps = append(rep.Steps, &orchestrate.Step{Index: 31, Build: "b", Round: 1, Rate: 100}) // no series
	got := chartedSteps(rep)
	if len(got) != 15 || got[0].Index != 1 || got[1].Index != 3 {
		t.Errorf("charted %d steps", len(got))
	}
	for _, st := range rep.Steps {
		st.Round = 1
	}
	if got := chartedSteps(rep); len(got) != maxStepCharts || got[maxStepCharts-1].Index != maxStepCharts {
		t.Errorf("charted %d steps", len(got))
	}
	rep.Steps = rep.Steps[:maxStepCharts]
	for _, st := range rep.Steps {
		st.Round = 1 + st.Index%2
	}
	if got := chartedSteps(rep); len(got) != maxStepCharts {
		t.Errorf("charted %d of %d steps", len(got), maxStepCharts)
	}
}

func TestUnits(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{mb(100 << 20), "100.0 MiB"}, {mb(1 << 30), "1.0 GiB"}, {mb(39 << 30 / 10), "3.9 GiB"}, {mb(0), "–"},
		{mibPerSec(260.4), "+260 MiB/s"}, {mibPerSec(-0.42), "−0.4 MiB/s"}, {mibPerSec(0.01), "0.0 MiB/s"},
		{catchUp(1500*time.Millisecond, 0), "1.5 s"}, {catchUp(-1, 20*time.Second), "> 20 s"}, {catchUp(-1, 0), "not settled"},
		{rateCell(orchestrate.RateMax), "max"}, {rateCell(1400), "1,400"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestPointCatchUp: the median when every round settled, the drain's
// wait when none did, and how many did not when some did.
func TestPointCatchUp(t *testing.T) {
	rep := sample()
	p := rep.Summary[0] // today at 200/s: steps 1 and 2
	if got := pointCatchUp(rep, p); got != "0.4 s" {
		t.Errorf("settled: %q", got)
	}
	rep.Steps[1].Steady.CatchUp, rep.Steps[1].Drain.Took = -1, 15*time.Second
	if got := pointCatchUp(rep, p); got != "> 15 s in 1 of 2" {
		t.Errorf("mixed: %q", got)
	}
	rep.Steps[0].Steady.CatchUp = -1
	if got := pointCatchUp(rep, p); got != "> 15 s" {
		t.Errorf("unsettled: %q", got)
	}
}

// TestHarnessText: without a Relay the columns and sentences name the
// harness and the fake upstream.
func TestHarnessText(t *testing.T) {
	rep := sample()
	rep.Harness = true
	rep.Setup.Builds = rep.Setup.Builds[:1]
	var b bytes.Buffer
	if err := markdown(&b, rep, "", []string{"/out/step-01.svg"}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"# Harness load test (no Relay)", "| harness CPU |", "that is the harness's throughput ceiling",
		"the time the harness needed to work off its backlog", "CPU per envelope: the harness's CPU time",
		"forwarded (total): data envelopes the fake upstream received", "blast sent, had accepted and the fake upstream received",
		"At 500/s the fake upstream received only 350/s: the harness's ceiling here"} {
		if !strings.Contains(flat(out), want) {
			t.Errorf("harness report lacks %q:\n%s", want, out)
		}
	}
}

func TestHeadlineHarness(t *testing.T) {
	rep := &orchestrate.Report{Harness: true, Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "harness"}}, Rates: []float64{1000, 5000}},
		KeptUpWith: map[string]float64{"harness": 5000},
		Steps:      []*orchestrate.Step{{}},
		Summary:    []*orchestrate.Point{{Build: "harness", Rate: 5000, AcceptedRate: 4998, Verdict: orchestrate.VerdictKeptUp, KeptUpJudged: true}}}
	if h := Headline(rep); h != "The harness on its own moves 4,998 envelopes per second: it kept up at every rate tried; try higher rates or --find-max to find its ceiling." {
		t.Errorf("headline %q", h)
	}
	rep.Steps = append(rep.Steps, &orchestrate.Step{Build: "harness", Rate: 8000, Verdict: orchestrate.VerdictFellBehind,
		Steady: orchestrate.Steady{ForwardedRate: 6000, BacklogGrowth: 2000, GrowthSpan: 5, Allowance: 8000, Seconds: 10}})
	if h := Headline(rep); h != "The harness on its own moves 4,998 envelopes per second and fell behind at 8,000/s; --find-max --rates 5000,8000 narrows it down. "+
		"At 8,000/s the fake upstream received only 6,000/s: the harness's ceiling here; the backlog grew 2,000/s." {
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

// TestCanariesHarness: without a Relay nothing scrubs, and the report says
// so instead of listing every planted canary as a leak.
func TestCanariesHarness(t *testing.T) {
	rep := &orchestrate.Report{Harness: true, Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "harness"}}, Rates: []float64{1000}},
		KeptUpWith: map[string]float64{},
		Steps: []*orchestrate.Step{{Index: 1, Build: "harness", Rate: 1000,
			Upstream: orchestrate.UpstreamSeen{Canaries: upstream.Canaries{ItemsScanned: 10, Leaks: map[string]int64{"password": 10}}}}}}
	if out := full(t, rep); !strings.Contains(out, "Without a Relay nothing scrubs") || strings.Contains(out, "password=10") {
		t.Errorf("harness canaries:\n%s", out)
	}
}

// TestInterruptedReport: an interrupted sweep's report shows what was
// measured, marked partial, and draws no verdict from it.
func TestInterruptedReport(t *testing.T) {
	rep := &orchestrate.Report{Interrupted: true, Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "relay", Bin: "/r"}}, Rates: []float64{200}},
		KeptUpWith: map[string]float64{},
		Steps: []*orchestrate.Step{{Index: 1, Build: "relay", Rate: 200, Sent: 1200, OK: 1200, AchievedRate: 200, AcceptedRate: 200,
			Verdict: orchestrate.VerdictInterrupted, Partial: true, Memory: orchestrate.Memory{PeakRSS: 150 << 20}}},
		Summary: []*orchestrate.Point{{Build: "relay", Rate: 200, Runs: 1, AchievedRate: 200, AcceptedRate: 200, PeakRSS: 150 << 20,
			Verdict: orchestrate.VerdictInterrupted, Partial: true}}}
	var b bytes.Buffer
	Text(&b, rep, "")
	for _, tc := range []struct {
		name, out string
		want      []string
	}{
		{"report.md", full(t, rep), []string{"interrupted (partial: what was measured before the interrupt)", "150.0 MiB"}},
		{"summary", b.String(), []string{"interrupted (partial)", "partial: measured before the interrupt"}},
	} {
		for _, want := range append(tc.want, "INTERRUPTED: partial report", "relay: interrupted before any step was judged; no verdict") {
			if !strings.Contains(flat(tc.out), want) {
				t.Errorf("%s lacks %q:\n%s", tc.name, want, tc.out)
			}
		}
		if strings.Contains(tc.out, "did not keep up") {
			t.Errorf("%s: a verdict drawn from an interrupted step:\n%s", tc.name, tc.out)
		}
	}
}

// TestHeadlineHarnessCeiling: make demo bisects, and the headline gives the
// harness's ceiling rather than the highest rate it happened to try.
func TestHeadlineHarnessCeiling(t *testing.T) {
	rep := &orchestrate.Report{Harness: true, Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "harness"}}, Rates: []float64{5000, 60000}, FindMax: true},
		KeptUpWith: map[string]float64{"harness": 36000},
		FindMax:    []orchestrate.FindMax{{Build: "harness", KeptUp: 36000, FellBehind: 39000, Probes: []float64{5000, 60000, 17000, 32000, 36000, 39000}}},
		Steps:      []*orchestrate.Step{{Build: "harness", Rate: 36000, Verdict: orchestrate.VerdictKeptUp}},
		Summary:    []*orchestrate.Point{{Build: "harness", Rate: 36000, AcceptedRate: 35990, Verdict: orchestrate.VerdictKeptUp, KeptUpJudged: true}}}
	want := "The harness on its own moves about 35,990 envelopes per second (it fell behind at 39,000/s): the ceiling for any Relay measurement on this machine."
	if h := Headline(rep); h != want {
		t.Errorf("headline %q\nwant     %q", h, want)
	}
}

// The Setup says where the user agents came from: generated, or a file
// with its number of agents, and how unique agents were spread.
func TestSetupUserAgents(t *testing.T) {
	for _, tc := range []struct {
		from         string
		agents, pool int
		unique       bool
		want         string
	}{
		{"", 1000, 100, false, ", 1000 user agents, seed"},
		{"", 1000, 100, true, ", 1000 user agents (every envelope its own), seed"},
		{"agents.txt", 7, 100, false, ", user agents from agents.txt (7 agents), seed"},
		{"agents.txt", 7, 100, true, ", user agents from agents.txt (7 agents) (each in turn, about 14 envelopes per agent), seed"},
		{"agents.txt", 700, 100, true, ", user agents from agents.txt (700 agents) (every envelope its own), seed"},
	} {
		rep := sample()
		rep.Setup.UserAgentsFrom, rep.Setup.UserAgents, rep.Setup.PoolSize, rep.Setup.UniqueUserAgents = tc.from, tc.agents, tc.pool, tc.unique
		if out := flat(full(t, rep)); !strings.Contains(out, tc.want) {
			i := strings.Index(out, "Traffic: ")
			t.Errorf("%+v: setup %q, want %q", tc, out[i:min(len(out), i+200)], tc.want)
		}
	}
}

// TestGateLimits: absolute limits, with no baseline, read as what was
// measured against the limit, in report.md and in the summary, and so do
// the rates that had no figure to hold.
func TestGateLimits(t *testing.T) {
	rep := sample()
	rep.Summary = append(rep.Summary, &orchestrate.Point{Build: "fast", Rate: 900, Runs: 1, Failed: 1, Verdict: orchestrate.VerdictFailed})
	ths, err := orchestrate.ParseThresholds("p99>1s,kept_up<300")
	if err != nil {
		t.Fatal(err)
	}
	g := orchestrate.AbsoluteGate(rep, ths)
	rep.Gate = &g
	want := []string{
		"Thresholds (--fail-on)", "2 of 7 checks crossed their threshold",
		"- p99 of today at 500/s: 2s > 1s", "- kept_up of today: 200/s < 300/s (the highest rate it kept up with)",
		"Not held, for want of a figure (neither passed nor crossed):", "- p99 of fast at 900/s: every step failed",
	}
	for name, out := range map[string]string{"report.md": full(t, rep), "summary": summaryOf(rep, "")} {
		for _, w := range want {
			if !strings.Contains(flat(out), w) {
				t.Errorf("%s lacks %q:\n%s", name, w, out)
			}
		}
		if strings.Contains(out, "Against the baseline") {
			t.Errorf("%s names a baseline:\n%s", name, out)
		}
	}
}

// A step that failed (Relay's log on a full disk) beside one that kept up:
// the headline says it failed and why, and never that Relay kept up at
// every rate tried.
func TestHeadlineSomeStepsFailed(t *testing.T) {
	rep := &orchestrate.Report{Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "relay", Bin: "/r"}}, Rates: []float64{100, 200}},
		KeptUpWith: map[string]float64{"relay": 100},
		Steps: []*orchestrate.Step{
			{Build: "relay", Rate: 100, Verdict: orchestrate.VerdictKeptUp},
			{Build: "relay", Rate: 200, Verdict: orchestrate.VerdictFailed, Failed: true,
				Error: "writing Relay's log failed: write /w/relay.log: no space left on device (120 bytes of output lost)"},
		},
		Summary: []*orchestrate.Point{{Build: "relay", Rate: 100, AcceptedRate: 100, Verdict: orchestrate.VerdictKeptUp, KeptUpJudged: true}}}
	want := "relay kept up with about 100 envelopes per second (the highest rate tried that it kept up with; the steps at higher rates failed). " +
		"1 of 2 steps failed: writing Relay's log failed: write /w/relay.log: no space left on device (120 bytes of output lost) (see Failed steps)."
	if h := Headline(rep); h != want {
		t.Errorf("headline %q\nwant     %q", h, want)
	}
}
