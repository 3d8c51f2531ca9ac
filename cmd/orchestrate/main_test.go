package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/procfs"
	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/testutil"
)

// corpus is a directory of recorded envelopes (package replay's fixtures).
const corpus = "../../internal/replay/testdata/corpus"

func TestBadFlagsExit2WithOneLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, "--rates is required"},
		{[]string{"--rates", "100,abc"}, `"abc" is not a rate from 0.001 to 10000000 requests/s, or max`},
		// Issue 33: the limit named ("want a number above 0 or max" hid the 1e7 cap).
		{[]string{"--rates", "1e300"}, `--rates: "1e300" is not a rate from 0.001 to 10000000 requests/s, or max`},
		{[]string{"--rates", "100,1e-9"}, `"1e-9" is not a rate from 0.001`},
		{[]string{"--rates", "10", "--duration", "50ms"}, "--duration: 50ms at rate 10/s holds less than one request: want at least 100ms, or higher --rates"},
		{[]string{"--rates", "100", "--nope"}, "unknown flag --nope (see --help)"},
		{[]string{"--rates", "100", "--duration", "soon"}, `--duration "soon": not a duration`},
		{[]string{"--rates", "100", "--duration", "5"}, "--duration 5: a duration needs a unit, e.g. 5s or 5ms"},
		{[]string{"--rates", "100", "--duration", "0s"}, "--duration 0s: want a duration above 0"},
		{[]string{"--rates", "100", "--rounds", "0"}, "--rounds 0: want 1 or more"},
		{[]string{"--rates", "100", "--pool", "0"}, "--pool 0: want 1 or more"},
		{[]string{"--rates", "100", "--projects", "0"}, "--projects 0: want 1 or more"},
		{[]string{"--rates", "100", "--max-relay-rss", "lots"}, `--max-relay-rss "lots": want a size`},
		{[]string{"--rates", "100", "--rounds", "500"}, "--rounds: 500: want 1..100"},
		{[]string{"--rates", "100", "--mix", "errors=x"}, "--mix"},
		{[]string{"--rates", "100", "--encoding", "lzma"}, "--encoding"},
		{[]string{"--rates", "100", "--fault", "flood=1s"}, "unknown kind"},
		{[]string{"--rates", "100", "--compare", "x"}, "want NAME=BIN"},
		{[]string{"--rates", "100", "--compare", "b=/bin/true"}, "needs --relay-bin"},
		{[]string{"--rates", "100", "--find-max"}, "--find-max: wants two --rates, the bounds"},
		{[]string{"--rates", "100", "--relay-bin", "/nonexistent/relay"}, "not an executable file"},
		{[]string{"--rates", "100", "--relay-config", "/nonexistent.yml"}, "--relay-config"},
		{[]string{"--rates", "100", "--perf", "x.data"}, "--perf: needs a Relay to measure (--relay-bin)"},
		{[]string{"--rates", "100", "--fault", "outage=40s"}, "--fault: \"outage=40s\" starts at"},
		{[]string{"--rates", "100", "extra"}, "unexpected argument"},
		{[]string{"--rates", "100", "--relay-bin", "/bin/true", "--compare", "b=/bin/true", "--compare-in", "turns"}, `--compare-in "turns": want slices or steps`},
		{[]string{"--rates", "100", "--relay-bin", "/bin/true", "--compare", "b=/bin/true", "--precision", "soon"}, `--precision "soon": want a percentage such as 3%`},
		{[]string{"--rates", "100", "--relay-bin", "/bin/true", "--compare", "b=/bin/true", "--slice", "10ms"}, "--slice: 10ms: want 1s..10m"},
		{[]string{"--rates", "100", "--relay-bin", "/bin/true", "--compare", "b=/bin/true", "--compare-in", "slices", "--rounds", "3"}, "--compare-in slices: does not go with"},
		{[]string{"--rates", "100", "--relay-bin", "/bin/true", "--compare", "b=/bin/true:/nonexistent.yml"}, `--compare "b=/bin/true:/nonexistent.yml"`},
		{[]string{"--rates", "100", "--relay-bin", "/bin/true", "--compare", "b=/bin/true:" + badSection(t)}, "the relayload section takes inbound_filters: true|false"},
		{[]string{"--rates", "100", "--user-agents-file", agentsFile(t, "curl/8.5.0\t2\nWget/1.21.4\n")}, "a.txt:2: no weight, but line 1 has one"},
		{[]string{"--rates", "100", "--user-agents-file", agentsFile(t, "# nothing\n")}, "a.txt: no agents"},
		{[]string{"--rates", "100", "--envelopes", corpus, "--mix", "errors=1"}, "--envelopes replays recorded envelopes: --mix does not apply"},
		{[]string{"--rates", "100", "--envelopes", corpus, "--user-agents", "10"}, "--user-agents does not apply"},
		{[]string{"--rates", "100", "--envelopes", t.TempDir()}, "--envelopes: replay: "},
		{[]string{"--rates", "100", "--envelopes", "../../internal/replay/testdata/bad"}, "crlf.envelope: envelope: offset 34"},
		{[]string{"--rates", "100", "--fail-on", "p99>5"}, `--fail-on: "p99>5": p99 takes a change (p99>+5%) or a limit: a duration such as 250ms or 1s`},
		{[]string{"--rates", "100", "--fail-on", "kept_up>100"}, `--fail-on: "kept_up>100": kept_up takes < only`},
		{[]string{"--rates", "100", "--fail-on", "kept_up<100,p99>+20%"}, `--fail-on needs --baseline, or --compare in slices (the gate then holds the change's interval against it), for "p99>+20%"; a limit such as p99>1s needs neither`},
		{[]string{"--rates", "100", "--baseline", "/nonexistent.json", "--fail-on", "p99>1s"}, `--baseline needs a change among --fail-on's thresholds, such as p99>+20%; "p99>1s" has only limits, which need no baseline`},
		{[]string{"--rates", "100", "--relay-bin", "/bin/true", "--compare", "b=/bin/true", "--fail-on", "cpu_ms_per_envelope>+5%,p99>1s"}, `--fail-on "p99>1s": a limit holds the figures of steps, and a comparison in slices runs none (--compare-in steps does)`},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || !strings.HasPrefix(lines[0], "orchestrate: ") ||
			!strings.HasSuffix(lines[0], " (see --help)") || strings.Contains(lines[0], "orchestrate: orchestrate") || strings.Contains(lines[0], "bad config") {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and one line with %q", tc.args, code, stderr.String(), tc.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q", tc.args, stdout.String())
		}
	}
}

// TestHelp: --help and relay-report --help list every flag in a group,
// in --flag form, within cli.Width columns, with three examples whose
// command lines parse.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		help  cli.Help
		flags func() *flag.FlagSet
	}{
		{[]string{"--help"}, help, func() *flag.FlagSet {
			fs := flag.NewFlagSet("orchestrate", flag.ContinueOnError)
			var o options
			o.define(fs)
			return fs
		}},
		{[]string{"relay-report", "--help"}, relayReportHelp, relayReportFlagSet},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Fatalf("%v: exit %d, stderr %q", tc.args, code, stderr.String())
		}
		out := stdout.String()
		if err := tc.help.Check(tc.flags()); err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
		if err := tc.help.CheckOutput(out); err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
		for _, e := range tc.help.Examples {
			args := strings.Fields(e.Command)[1:]
			if args[0] == "relay-report" {
				args = args[1:]
			}
			fs := tc.flags()
			fs.SetOutput(io.Discard)
			if err := fs.Parse(args); err != nil {
				t.Errorf("example %q does not parse: %v", e.Command, err)
			}
		}
		for _, want := range []string{"Usage:", "Examples:", "Exit status:"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: help lacks %q", tc.args, want)
			}
		}
	}
	var stdout bytes.Buffer
	run([]string{"--help"}, &stdout, &bytes.Buffer{})
	for _, g := range []string{"\nTraffic:\n  --rates LIST", "\nRelay:\n  --relay-bin PATH", "\nVerdict:\n", "\nOutput:\n  --out DIR"} {
		if !strings.Contains(stdout.String(), g) {
			t.Errorf("--help lacks %q", g)
		}
	}
}

// TestTypo: an unknown flag close to one names it, in one line, exit 2.
func TestTypo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "100"}, "orchestrate: unknown flag --rate: did you mean --rates? (see --help)\n"},
		{[]string{"--rates", "100", "--relaybin", "x"}, "orchestrate: unknown flag --relaybin: did you mean --relay-bin? (see --help)\n"},
		{[]string{"--rates", "100", "--find_max"}, "orchestrate: unknown flag --find_max: did you mean --find-max? (see --help)\n"},
		{[]string{"relay-report", "--relay-bin", "x", "--outdir", "y"}, "orchestrate relay-report: unknown flag --outdir: did you mean --out? (see --help)\n"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || stderr.String() != tc.want || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

func TestMain(m *testing.M) { testutil.Main(m) }

// relayRunning reports whether a child of pid runs bin.
func relayRunning(pid int, bin string) bool {
	return len(testutil.Pids(func(p procfs.Proc) bool {
		st, err := p.Stat()
		return err == nil && st.PPID == pid && strings.Contains(testutil.CmdLine(p), bin)
	})) > 0
}

// TestSIGINT sends a real SIGINT to the orchestrate binary mid-sweep: it
// must exit 130 within 2 s, leave no child and no temp dir behind, and
// write the partial report.
func TestSIGINT(t *testing.T) {
	orch := testutil.Build(t, "github.com/relayload/relayload/cmd/orchestrate")
	relay := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	// Interrupted as the pool is built, or 1 s into the first blast (3 s):
	// the progress lines on stderr say when.
	for _, tc := range []struct {
		name, line string
		into       time.Duration
	}{{"pool", "building a pool", 0}, {"mid-blast", "  blast ", time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			tmp, out := t.TempDir(), t.TempDir()
			cmd := exec.Command(orch, "--relay-bin", relay, "--rates", "100,200", "--duration", "3s", "--warmup", "500ms",
				"--idle", "500ms", "--projects", "10", "--pool", "200", "--out", out)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stdout, stderr testutil.Output
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if !stderr.WaitFor(tc.line, 30*time.Second) {
				_ = cmd.Process.Kill()
				t.Fatalf("no %q line:\n%s", tc.line, stderr.String())
			}
			time.Sleep(tc.into)
			midBlast := tc.into > 0
			if midBlast && !relayRunning(cmd.Process.Pid, relay) {
				t.Fatalf("the relay is not running during the blast")
			}
			kids := testutil.Children(cmd.Process.Pid)
			if midBlast && len(kids) == 0 {
				t.Fatal("no child to check")
			}
			stalls := testutil.StartStalls()
			sent := time.Now()
			_ = cmd.Process.Signal(syscall.SIGINT)
			err := cmd.Wait()
			took, lost := time.Since(sent), stalls.Stop()
			if took > 2*time.Second+lost {
				t.Errorf("exited %v after SIGINT (%v lost to the machine)", took, lost)
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
				t.Errorf("exit: %v\nstderr:\n%s", err, stderr.String())
			}
			for _, pid := range kids {
				if syscall.Kill(pid, 0) == nil {
					t.Errorf("child %d still alive", pid)
				}
			}
			if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
				t.Errorf("temp dir not cleaned: %v", ents)
			}
			b, err := os.ReadFile(filepath.Join(out, "results.json"))
			if err != nil {
				t.Fatalf("no partial report: %v\nstderr:\n%s", err, stderr.String())
			}
			var rep struct {
				Interrupted bool `json:"interrupted"`
			}
			if json.Unmarshal(b, &rep) != nil || !rep.Interrupted {
				t.Errorf("results.json not marked interrupted")
			}
			if !strings.Contains(stdout.String(), "INTERRUPTED") {
				t.Errorf("stdout lacks the partial-report banner:\n%s", stdout.String())
			}
			t.Logf("%s: %d children, exit in %v", tc.name, len(kids), took.Round(time.Millisecond))
		})
	}
}

// TestPerfHarness records the orchestrate binary itself (a real build, with
// its symbols) next to the stand-in and checks that the harness's cores are
// split by what blast and the fake upstream were doing.
func TestPerfHarness(t *testing.T) {
	if _, err := exec.LookPath("perf"); err != nil {
		t.Skip("perf is not installed")
	}
	orch := testutil.Build(t, "github.com/relayload/relayload/cmd/orchestrate")
	relay := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	dir := t.TempDir()
	conf := filepath.Join(dir, "overrides.yml")
	if err := os.WriteFile(conf, []byte("limits: {shutdown_timeout: 0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Steps []struct {
			CPU struct {
				HarnessCores float64 `json:"harness_cores"`
				Split        *struct {
					Blast     float64 `json:"blast_cores"`
					Upstream  float64 `json:"upstream_cores"`
					Scheduler float64 `json:"scheduler_cores"`
					Other     float64 `json:"other_cores"`
					Samples   int64   `json:"samples"`
				} `json:"harness_split"`
			} `json:"cpu"`
			HarnessPerf *struct {
				File      string `json:"file"`
				CallGraph string `json:"call_graph"`
				Exit      string `json:"exit"`
			} `json:"harness_perf"`
			Notes []string `json:"notes"`
		} `json:"steps"`
	}
	cmd := exec.Command(orch, "--relay-bin", relay, "--relay-config", conf, "--rates", "300", "--duration", "4s", "--warmup", "500ms",
		"--idle", "500ms", "--projects", "10", "--pool", "200", "--perf", filepath.Join(dir, "relay.data"), "--perf-harness",
		"--out", filepath.Join(dir, "out"), "--quiet")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "perf cannot record") && os.Geteuid() != 0 {
			t.Skip(string(out))
		}
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep result
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Steps) != 1 {
		t.Fatalf("results: %v, %d steps", err, len(rep.Steps))
	}
	st := rep.Steps[0]
	if hp := st.HarnessPerf; hp == nil || hp.Exit != "ok" || hp.CallGraph != "fp" || hp.File != filepath.Join(dir, "relay-harness.data") {
		t.Fatalf("harness perf %+v", hp)
	}
	h := st.CPU.Split
	if h == nil {
		// perf has been seen to miss orchestrate's threads (against Relay
		// 26.4.0 twice in eleven runs, here more often with 4 s windows):
		// then the step says so and gives no split.
		if !slices.ContainsFunc(st.Notes, func(n string) bool { return strings.Contains(n, "its CPU is not split") }) {
			t.Fatalf("no split and no note why: %v", st.Notes)
		}
		t.Logf("no split: %v", st.Notes)
		return
	}
	if h.Samples < 20 || h.Blast <= 0 || h.Upstream <= 0 {
		t.Fatalf("split %+v of %.3f harness cores", h, st.CPU.HarnessCores)
	}
	if sum := h.Blast + h.Upstream + h.Scheduler + h.Other; sum < 0.999*st.CPU.HarnessCores || sum > 1.001*st.CPU.HarnessCores {
		t.Errorf("split %+v adds up to %.4f of %.4f cores", h, sum, st.CPU.HarnessCores)
	}
	t.Logf("harness %.3f cores: %+v", st.CPU.HarnessCores, *h)
}

func TestPerfMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no perf (nor anything else) on PATH
	var stdout, stderr bytes.Buffer
	code := run([]string{"--rates", "100", "--relay-bin", "/bin/true", "--perf", filepath.Join(t.TempDir(), "x.data")}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "needs the perf tool") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestFailOn: --baseline with --fail-on exits 1 when a threshold is
// crossed and 0 when none is, like a CI gate; so do limits, with no
// baseline.
func TestFailOn(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--rates", "200", "--duration", "1s", "--warmup", "200ms", "--idle", "0s", "--projects", "5", "--pool", "100", "--quiet"}
	var stdout, stderr bytes.Buffer
	if code := run(append(args, "--out", filepath.Join(dir, "base")), &stdout, &stderr); code != 0 {
		t.Fatalf("baseline run: exit %d\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "base", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	point := rep["summary"].([]any)[0].(map[string]any)
	write := func(name string, ms float64) string {
		point["ms_per_envelope"] = ms
		out, _ := json.Marshal(rep)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		ms       float64
		code     int
		contains string
	}{
		{"cheaper baseline", 1e-6, 1, "threshold(s) crossed"},
		{"dearer baseline", 1e6, 0, ""},
	} {
		stdout.Reset()
		stderr.Reset()
		code := run(append(args, "--baseline", write(tc.name+".json", tc.ms), "--fail-on", "cpu_ms_per_envelope>+5%"), &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.contains) || !strings.Contains(stdout.String(), "Against the baseline") {
			t.Errorf("%s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", tc.name, code, tc.code, stdout.String(), stderr.String())
		}
	}
	// Limits need no baseline. (The harness's steps are judged: kept up,
	// or fell behind when the machine is busy; harness-limited only when
	// orchestrate itself got no CPU for a second, and then not held.)
	for _, tc := range []struct {
		failOn   string
		code     int
		contains string
	}{
		{"p99>1h,peak_rss>64GiB", 0, ""},
		{"p99>1ns", 1, "orchestrate: limit crossed: p99 of harness at 200/s: "},
	} {
		stdout.Reset()
		stderr.Reset()
		code := run(append(args, "--fail-on", tc.failOn), &stdout, &stderr)
		if code == 3 && strings.Contains(stderr.String(), "no step judged (harness-limited)") {
			t.Logf("--fail-on %s: the step was harness-limited on this machine", tc.failOn)
			continue
		}
		if code != tc.code || !strings.Contains(stderr.String(), tc.contains) || !strings.Contains(stdout.String(), "Thresholds (--fail-on)") {
			t.Errorf("--fail-on %s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", tc.failOn, code, tc.code, stdout.String(), stderr.String())
		}
	}
	stderr.Reset()
	if code := run(append(args, "--fail-on", "p99>+20%"), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--fail-on needs --baseline, or --compare in slices") {
		t.Errorf("--fail-on alone: exit %d %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run(append(args, "--baseline", filepath.Join(dir, "base", "results.json"), "--fail-on", "speed>+1%"), &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "--fail-on: \"speed>+1%\": unknown metric") {
		t.Errorf("bad --fail-on: exit %d %q", code, stderr.String())
	}
}

// TestFailOnLimits: --fail-on kept_up<R needs no baseline and exits 0
// when the stand-in keeps up at R, 1 when, capped below R, it cannot; a
// sweep that kept up with no rate exits 1 without --fail-on too. A step a
// loaded machine made harness-limited is not judged: the limit then has
// no figure to hold (exit 3), and nothing fell behind (exit 0).
func TestFailOnLimits(t *testing.T) {
	relay := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	dir := t.TempDir()
	config := func(name, yml string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("limits: {shutdown_timeout: 0}\n"+yml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Capped at a quarter of the rate, the stand-in's backlog cannot drain
	// within --drain-timeout.
	free, capped := config("free.yml", ""), config("capped.yml", "standin: {capacity: 25}\n")
	for _, tc := range []struct {
		name, config, failOn string
		verdict              string // of the one step, unless harness-limited
		code, limited        int    // exit status; when harness-limited
		stderr               string
	}{
		{"keeps up", free, "kept_up<100", orchestrate.VerdictKeptUp, 0, 3, ""},
		{"capped", capped, "kept_up<100", orchestrate.VerdictFellBehind, 1, 3,
			"orchestrate: limit crossed: kept_up of baseline: 0/s < 100/s (it kept up with no rate tried)"},
		{"capped, no --fail-on", capped, "", orchestrate.VerdictFellBehind, 1, 0, "orchestrate: Relay kept up with no rate tried"},
	} {
		out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		args := []string{"--relay-bin", relay, "--relay-config", tc.config, "--rates", "100", "--duration", "2s", "--warmup", "300ms",
			"--idle", "0s", "--drain-timeout", "2s", "--pool", "100", "--projects", "5", "--quiet", "--out", out}
		if tc.failOn != "" {
			args = append(args, "--fail-on", tc.failOn)
		}
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		b, err := os.ReadFile(filepath.Join(out, "results.json"))
		var rep orchestrate.Report
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil || len(rep.Steps) != 1 {
			t.Fatalf("%s: exit %d, results.json: %v\n%s", tc.name, code, err, stderr.String())
		}
		st := rep.Steps[0]
		want, wantErr := tc.code, tc.stderr
		switch st.Verdict {
		case orchestrate.VerdictHarnessLimited:
			t.Logf("%s: harness-limited on this machine: %v", tc.name, st.Reasons)
			want, wantErr = tc.limited, ""
		case tc.verdict:
		default:
			t.Errorf("%s: the step %s %v, want %s", tc.name, st.Verdict, st.Reasons, tc.verdict)
		}
		if code != want || !strings.Contains(stderr.String(), wantErr) {
			t.Errorf("%s: exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", tc.name, code, want, wantErr, stdout.String(), stderr.String())
		}
		if tc.failOn != "" && (rep.Gate == nil || rep.Gate.Compared+len(rep.Gate.Unmeasured) != 1 || !strings.Contains(stdout.String(), "Thresholds (--fail-on)")) {
			t.Errorf("%s: gate %+v in results.json, summary:\n%s", tc.name, rep.Gate, stdout.String())
		}
	}
}

func TestRelayReportBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", "x"}, "--relay-bin and --out are required"},
		{[]string{"--relay-bin", "/bin/true", "--out", "x", "--kind-rate", "0"}, "--kind-rate 0: want a rate above 0"},
		{[]string{"--relay-bin", "/bin/true", "--out", "x", "--relay-config", "/nonexistent.yml"}, "--relay-config"},
		{[]string{"--relay-bin", "/bin/true", "--out", "x", "--user-agents-file", agentsFile(t, "a/1\na/1\n")}, "a.txt:2: the agent of line 1 again"},
		{[]string{"--relay-bin", "/bin/true", "--out", "x", "--envelopes", "/nonexistent"}, "--envelopes: replay: "},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"relay-report"}, tc.args...), &stdout, &stderr)
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || !strings.HasPrefix(lines[0], "orchestrate relay-report: ") {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and one line with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// agentsFile is a --user-agents-file a.txt holding content.
func agentsFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// badSection is a build's CONFIG.yml whose relayload section has a key it
// does not take.
func badSection(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "b.yml")
	if err := os.WriteFile(p, []byte("relayload:\n  inbound_filter: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBuildConfig: a compared build's CONFIG.yml gives Relay overrides and,
// from its relayload section, the build's own inbound filters.
func TestBuildConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "filters.yml")
	if err := os.WriteFile(p, []byte("limits:\n  max_thread_count: 2\nrelayload:\n  inbound_filters: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var o options
	var cfg orchestrate.Config
	o.relayBin, o.relayName, o.compare = "/bin/true", "a", []string{"b=/bin/true:" + p}
	if err := o.builds(&cfg); err != nil {
		t.Fatal(err)
	}
	b := cfg.Builds[1]
	if b.Bin != "/bin/true" || b.InboundFilters == nil || !*b.InboundFilters || b.RelayConfig["relayload"] != nil ||
		b.RelayConfig["limits"] == nil || !cfg.Slices || cfg.Builds[0].InboundFilters != nil {
		t.Errorf("builds %+v, slices %v", cfg.Builds, cfg.Slices)
	}
}

func relayReportFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("relay-report", flag.ContinueOnError)
	defineRelayReport(fs)
	return fs
}

// TestOutputWidth runs a sweep of the stand-in relay that keeps up at the
// first rate and falls behind at the second (long reasons, notes and
// progress lines): no line of what orchestrate prints, on stdout or
// stderr, is wider than cli.Width.
func TestOutputWidth(t *testing.T) {
	relay := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	dir := t.TempDir()
	conf := filepath.Join(dir, "relay.yml")
	if err := os.WriteFile(conf, []byte("standin:\n  capacity: 150\nlimits:\n  shutdown_timeout: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"--relay-bin", relay, "--relay-config", conf, "--rates", "50,400", "--duration", "2s", "--warmup", "500ms",
		"--idle", "0s", "--drain-timeout", "3s", "--projects", "5", "--pool", "200", "--out", filepath.Join(dir, "out")}, &stdout, &stderr)
	// On a loaded machine the first step may be harness-limited: then no
	// rate kept up, and the run exits 1 saying so.
	if code != 0 && (code != 1 || !strings.Contains(stderr.String(), "orchestrate: Relay kept up with no rate tried")) {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
		for i, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > cli.Width {
				t.Errorf("%s line %d is %d wide: %q", name, i+1, n, l)
			}
		}
	}
	// The verdicts are not asserted: on a loaded machine a step may be
	// harness-limited instead, with reasons as long.
	if !strings.Contains(stdout.String(), "\nPer rate\n") || !strings.Contains(stdout.String(), filepath.Join(dir, "out", "report.md")) {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}
