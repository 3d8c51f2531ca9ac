package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
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
			if took := time.Since(sent); took > 2*time.Second {
				t.Errorf("exited %v after %v", took, sig)
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
				t.Errorf("exit: %v\nstderr:\n%s", err, stderr.String())
			}
			if left := sleeping(secs); len(left) > 0 {
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
		start := time.Now()
		code := run([]string{"--rates", "100", "--duration", "1s", "--pool", "50", "--projects", "5", "--out", tc.out}, &stdout, &stderr)
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if code != 2 || len(lines) != 1 || lines[0] != "orchestrate: "+tc.want {
			t.Errorf("--out %s: exit %d, stderr %q; want exit 2 and %q", tc.out, code, stderr.String(), "orchestrate: "+tc.want)
		}
		if stdout.Len() != 0 || time.Since(start) > 2*time.Second {
			t.Errorf("--out %s: ran for %v first:\n%s", tc.out, time.Since(start), stdout.String())
		}
	}
}
