package main

import (
	"os"
	"os/exec"
	"path/filepath"
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
