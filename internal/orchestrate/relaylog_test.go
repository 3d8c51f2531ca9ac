package orchestrate

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRelayLogDiskFull runs a step whose relay.log is /dev/full (every
// write fails with ENOSPC, as on a full disk): the step fails with that
// reason. Before, Relay wrote the file itself, the error went unseen and
// the step was judged as if nothing had happened.
func TestRelayLogDiskFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	t.Parallel() // waits on a stand-in's timers more than it uses CPU
	bin := standin(t)
	cfg := quick(50)
	cfg.Builds = []Build{{Name: "standin", Bin: bin}}
	fastShutdown(&cfg)
	r := testRunner(t, cfg)
	st := &Step{Index: 1, Build: "standin", Round: 1, Rate: 50}
	dir := filepath.Join(r.root, "001-standin-r1-50")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/full", filepath.Join(dir, "relay.log")); err != nil {
		t.Fatal(err)
	}
	r.runStep(t.Context(), st, cfg.Builds[0])
	if !st.Failed || st.Verdict != VerdictFailed ||
		!strings.Contains(st.Error, "writing Relay's log failed") || !strings.Contains(st.Error, syscall.ENOSPC.Error()) {
		t.Errorf("failed %v verdict %s error %q; want the step failed on the full disk", st.Failed, st.Verdict, st.Error)
	}
}
