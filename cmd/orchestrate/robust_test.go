package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/report"
	"github.com/relayload/relayload/internal/testutil"
)

// sleeping lists the live processes running `sleep secs`.
func sleeping(secs string) []int {
	return testutil.Pids(func(p procfs.Proc) bool {
		st, err := p.Stat()
		return err == nil && st.State != "Z" && testutil.CmdLine(p) == "sleep "+secs
	})
}

// SIGTERM or SIGINT while orchestrate asks a build for its version (a
// script that ignores --version and keeps running, its child holding the
// output) ends the run at once with status 130, the probe's process group
// killed.
func TestSignalDuringVersionProbe(t *testing.T) {
	orch := testutil.Build(t, "github.com/relayload/relayload/cmd/orchestrate")
	hang, err := filepath.Abs("../../internal/orchestrate/testdata/hang.sh")
	if err != nil {
		t.Fatal(err)
	}
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			secs := []string{"599.25", "599.5"}[i]
			tmp := t.TempDir()
			cmd := exec.Command(orch, "--relay-bin", hang, "--rates", "100", "--duration", "1s", "--pool", "100", "--projects", "5")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HANG_SECONDS="+secs)
			var stderr testutil.Output
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if !testutil.Eventually(10*time.Second, func() bool { return len(sleeping(secs)) > 0 }) {
				_ = cmd.Process.Kill()
				t.Fatalf("the probe's child never ran:\n%s", stderr.String())
			}
			stalls := testutil.StartStalls()
			sent := time.Now()
			_ = cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("%v ignored: orchestrate still running 10 s later (left: %v)\nstderr:\n%s", sig, sleeping(secs), stderr.String())
			}
			if took, lost := time.Since(sent), stalls.Stop(); took > 2*time.Second+lost {
				t.Errorf("exited %v after %v (%v lost to the machine)", took, sig, lost)
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
				t.Errorf("exit: %v\nstderr:\n%s", err, stderr.String())
			}
			// The probe's group was sent SIGKILL: gone once the kernel has
			// run its exit.
			if left := testutil.Gone(10*time.Second, func() []int { return sleeping(secs) }); len(left) > 0 {
				t.Errorf("the probe's child left running: %v", left)
				for _, pid := range left {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
	}
}

// An --out that cannot be a directory is refused before anything runs:
// exit 2 and one line, no pool built, no step run.
func TestOutCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "results")
	if err := os.WriteFile(file, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ out, want string }{
		{file, "--out: " + file + " is a file, not a directory (see --help)"},
		{filepath.Join(file, "run1"), "--out: cannot make directory " + filepath.Join(file, "run1") + ": " + file + ": not a directory (see --help)"},
	} {
		var stdout, stderr bytes.Buffer
		stalls := testutil.StartStalls()
		start := time.Now()
		code := run([]string{"--rates", "100", "--duration", "1s", "--pool", "50", "--projects", "5", "--out", tc.out}, &stdout, &stderr)
		took, lost := time.Since(start), stalls.Stop()
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if code != 2 || len(lines) != 1 || lines[0] != "orchestrate: "+tc.want {
			t.Errorf("--out %s: exit %d, stderr %q; want exit 2 and %q", tc.out, code, stderr.String(), "orchestrate: "+tc.want)
		}
		if stdout.Len() != 0 || took > 2*time.Second+lost {
			t.Errorf("--out %s: ran for %v first (%v lost to the machine):\n%s", tc.out, took, lost, stdout.String())
		}
	}
}

// A step whose Relay is SIGKILLed mid-window fails, and report.md says
// what results.json says of it: what blast sent and had accepted until
// then, and what reached the fake upstream, not zeros.
func TestFailedStepOneTruth(t *testing.T) {
	relay := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	dir := t.TempDir()
	killer := filepath.Join(dir, "killer.sh")
	if err := os.WriteFile(killer, []byte(fmt.Sprintf(`#!/bin/sh
[ "$1" = --version ] && exec %[1]q "$@"
%[1]q "$@" &
child=$!
trap 'kill -TERM $child; wait $child; exit 0' TERM
sleep 3
kill -KILL $child
exit 137
`, relay)), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "overrides.yml")
	if err := os.WriteFile(conf, []byte("limits: {shutdown_timeout: 0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := run([]string{"--relay-bin", killer, "--relay-config", conf, "--rates", "200", "--duration", "5s", "--warmup", "500ms",
		"--idle", "500ms", "--pool", "200", "--projects", "5", "--out", out, "--quiet"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a failed step)\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep orchestrate.Report
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Steps) != 1 || len(rep.Summary) != 1 {
		t.Fatalf("results.json: %v, %d steps", err, len(rep.Steps))
	}
	st, p := rep.Steps[0], rep.Summary[0]
	if !st.Failed || st.Sent == 0 || st.OK == 0 || st.Upstream.Forwarded == 0 {
		t.Fatalf("step: failed %v, sent %d, ok %d, forwarded %d: want a failure after blast sent", st.Failed, st.Sent, st.OK, st.Upstream.Forwarded)
	}
	if p.AchievedRate != st.AchievedRate || p.AcceptedRate != st.AcceptedRate {
		t.Errorf("summary sent/s %.1f accepted/s %.1f, step's %.1f and %.1f", p.AchievedRate, p.AcceptedRate, st.AchievedRate, st.AcceptedRate)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := perRateRow(t, string(md))
	if row[1] != report.Num(st.AchievedRate) || row[2] != report.Num(st.AcceptedRate) {
		t.Errorf("report.md per rate: sent/s %q accepted/s %q; results.json: %s and %s", row[1], row[2], report.Num(st.AchievedRate), report.Num(st.AcceptedRate))
	}
	want := fmt.Sprintf("Until then blast sent %s requests in the measured window (%s/s), %s accepted; from blast's start (its warm-up included) the fake upstream received %s data envelopes.",
		report.Num(float64(st.Sent)), report.Num(st.AchievedRate), report.Num(float64(st.OK)), report.Num(float64(st.Upstream.Forwarded)))
	if !strings.Contains(string(md), want) {
		t.Errorf("report.md's failed step lacks %q:\n%s", want, md)
	}
}

// perRateRow is the first row of report.md's per-rate table, its cells
// trimmed.
func perRateRow(t *testing.T, md string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "## Per rate\n\n")
	lines := strings.Split(rest, "\n")
	if !ok || len(lines) < 3 {
		t.Fatalf("no per-rate table in:\n%s", md)
	}
	var cells []string
	for _, c := range strings.Split(strings.Trim(lines[2], "|"), "|") {
		cells = append(cells, strings.TrimSpace(c))
	}
	return cells
}

// A --relay-config with a typo'd top-level key (Relay ignores unknown
// keys without a word) is warned about before the run, and the report
// notes it.
func TestRelayConfigTypoWarned(t *testing.T) {
	relay := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	conf := filepath.Join(t.TempDir(), "overrides.yml")
	if err := os.WriteFile(conf, []byte("relya:\n  port: 3001\nlimits: {shutdown_timeout: 0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"--relay-bin", relay, "--relay-config", conf, "--rates", "50", "--duration", "1s", "--warmup", "200ms",
		"--idle", "0s", "--pool", "50", "--projects", "5", "--quiet"}, &stdout, &stderr)
	want := `top-level key "relya" is not one of Relay 26.4.0's config sections, and Relay ignores it (did you mean "relay"?)`
	// Both are wrapped to the terminal's width.
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if code != 0 || !strings.HasPrefix(flat(stderr.String()), "orchestrate: warning: --relay-config: "+want) {
		t.Errorf("exit %d, stderr %q: want a warning first", code, stderr.String())
	}
	if !strings.Contains(flat(stdout.String()), want) {
		t.Errorf("the report does not note it:\n%s", stdout.String())
	}
}

// Every step failed because the binary is not Relay: the headline says so
// and why, instead of a verdict that it did not keep up.
func TestHeadlineEveryStepFailed(t *testing.T) {
	bin, err := filepath.Abs("testdata/notrelay.sh")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"--relay-bin", bin, "--rates", "100,200", "--duration", "1s", "--pool", "50", "--projects", "5", "--quiet"}, &stdout, &stderr)
	// The headline is the first paragraph, wrapped to the terminal's width.
	para, _, _ := strings.Cut(stdout.String(), "\n\n")
	headline := strings.Join(strings.Fields(para), " ")
	want := "baseline: every step failed: relay did not become ready: process exited before becoming ready: exited with status 2 (see Failed steps)."
	if code != 1 || headline != want {
		t.Errorf("exit %d, headline %q; want exit 1 and %q\nstderr: %s", code, headline, want, stderr.String())
	}
}

// orchestrate SIGKILLed mid-blast leaves its work directory; the next run
// with the same TMPDIR removes it.
func TestSIGKILLedRunCleanedByNext(t *testing.T) {
	orch := testutil.Build(t, "github.com/relayload/relayload/cmd/orchestrate")
	tmp := t.TempDir()
	args := []string{"--rates", "200", "--duration", "2s", "--warmup", "200ms", "--idle", "0s", "--pool", "50", "--projects", "5"}
	cmd := exec.Command(orch, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stderr testutil.Output
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !stderr.WaitFor("  blast ", 30*time.Second) {
		_ = cmd.Process.Kill()
		t.Fatalf("no blast line:\n%s", stderr.String())
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	left, _ := filepath.Glob(filepath.Join(tmp, "relayload-*"))
	if len(left) != 1 {
		t.Fatalf("after SIGKILL: %v, want the run's work directory", left)
	}
	next := exec.Command(orch, append(args, "--quiet")...)
	next.Env = cmd.Env
	if out, err := next.CombinedOutput(); err != nil {
		t.Fatalf("next run: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left after the next run: %v", ents)
	}
}

// A replayed corpus most of whose envelopes hold client reports alone
// (real SDK captures have them; Relay forwards nothing of them) shows no
// backlog where Relay kept up: not in the step's steady state nor its
// seconds, not in the summary, not in results.json nor report.md's table.
func TestClientReportsAreNoBacklog(t *testing.T) {
	relay := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	dir := t.TempDir()
	envs := filepath.Join(dir, "corpus")
	if err := os.Mkdir(envs, 0o755); err != nil {
		t.Fatal(err)
	}
	cr, err := os.ReadFile(filepath.Join(corpus, "08-client-report.envelope"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range []string{"01-event.envelope", "02-transaction.envelope"} {
		if files[f], err = os.ReadFile(filepath.Join(corpus, f)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		files[fmt.Sprintf("%02d-client-report.envelope", 10+i)] = cr
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(envs, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "overrides.yml")
	if err := os.WriteFile(conf, []byte("limits: {shutdown_timeout: 0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := run([]string{"--relay-bin", relay, "--relay-config", conf, "--envelopes", envs, "--rates", "100", "--duration", "3s",
		"--warmup", "500ms", "--idle", "500ms", "--pool", "100", "--projects", "5", "--out", out, "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep orchestrate.Report
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Steps) != 1 || len(rep.Summary) != 1 {
		t.Fatalf("results.json: %v, %d steps", err, len(rep.Steps))
	}
	st, p := rep.Steps[0], rep.Summary[0]
	if st.Verdict != orchestrate.VerdictKeptUp && st.Verdict != orchestrate.VerdictHarnessLimited {
		t.Fatalf("verdict %s: %v", st.Verdict, st.Reasons)
	}
	if st.Upstream.ItemsByType["client_report"] != 0 || st.Upstream.Forwarded == 0 {
		t.Errorf("upstream items %v, %d forwarded: want no client report, some data", st.Upstream.ItemsByType, st.Upstream.Forwarded)
	}
	// Two envelopes in ten carry data. A backlog within one second of
	// what was accepted is forwarding's ordinary lag; counting the client
	// reports makes it several seconds' worth.
	bound := st.Steady.Allowance
	if st.Steady.Expected < 0.1 || st.Steady.Expected > 0.3 {
		t.Errorf("expected share %.3f, want about 0.2", st.Steady.Expected)
	}
	if st.Steady.BacklogEnd > int64(bound) {
		t.Errorf("step backlog at window end %d, more than %.0f: client reports counted as a backlog", st.Steady.BacklogEnd, bound)
	}
	for _, s := range st.Seconds {
		if s.Backlog > int64(bound) {
			t.Errorf("second %d: backlog %d, more than %.0f", s.T, s.Backlog, bound)
		}
	}
	if p.BacklogEnd != float64(st.Steady.BacklogEnd) {
		t.Errorf("summary backlog %.0f, step's %d", p.BacklogEnd, st.Steady.BacklogEnd)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if row := perRateRow(t, string(md)); row[4] != report.Num(p.BacklogEnd) {
		t.Errorf("report.md per rate: backlog %q, results.json %s (row %q)", row[4], report.Num(p.BacklogEnd), row)
	}
}

// A Relay binary that daemonizes and exits: the step fails, and the daemon
// it left (outside its process group, reparented away) is found, ended and
// named in the report. Before, it kept running and the report said
// nothing.
func TestDaemonizingRelayEnded(t *testing.T) {
	bin, err := filepath.Abs("testdata/daemonize.sh")
	if err != nil {
		t.Fatal(err)
	}
	secs := fmt.Sprintf("700.%d", os.Getpid())
	t.Setenv("DAEMON_SLEEP", secs)
	t.Cleanup(func() {
		for _, pid := range sleeping(secs) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	var stdout, stderr bytes.Buffer
	code := run([]string{"--relay-bin", bin, "--rates", "100", "--duration", "1s", "--pool", "50", "--projects", "5", "--quiet"}, &stdout, &stderr)
	report := strings.Join(strings.Fields(stdout.String()), " ")
	if code != 1 || !strings.Contains(report, "exited with status 0") {
		t.Errorf("exit %d; want 1 and the step failed as Relay exited\n%s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	// The daemon may be ended before it has exec'd sleep: its command line
	// then still names the shell that runs it, with the seconds.
	if !strings.Contains(report, "still ran outside its process group") || !strings.Contains(report, secs+"); orchestrate ended them") {
		t.Errorf("the report does not name the daemon it ended:\n%s", stdout.String())
	}
	if left := sleeping(secs); len(left) != 0 {
		t.Errorf("the daemon still runs after the run: pids %v", left)
	}
}
