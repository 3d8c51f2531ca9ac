package orchestrate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
)

// A binary that ignores --version and keeps running (testdata/hang.sh,
// whose child holds its output) is asked for its version within about
// 2 s; the step then fails on it, and nothing it started is left running.
func TestBuildThatIgnoresVersion(t *testing.T) {
	hang, err := filepath.Abs("testdata/hang.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HANG_SECONDS", "598.25")
	cfg := quick(100)
	cfg.Builds = []Build{{Name: "hang", Bin: hang}}
	cfg.WorkDir = t.TempDir()
	cfg.ReadyTimeout = 500 * time.Millisecond
	cfg.ShutdownTimeout = 500 * time.Millisecond
	type result struct {
		rep *Report
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		rep, err := Run(context.Background(), cfg)
		done <- result{rep, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Run still going after 20 s (the version probe hangs); left running: %v", testutil.Sleeping("598.25"))
	}
	if res.err != nil || len(res.rep.Steps) != 1 || !res.rep.Steps[0].Failed {
		t.Fatalf("err %v, report %+v", res.err, res.rep)
	}
	t.Logf("took %v; step: %s", time.Since(start), res.rep.Steps[0].Error)
	if !strings.Contains(strings.Join(res.rep.Notes, "\n"), `build hang answers --version with ""`) {
		t.Errorf("no note on the version in %q", res.rep.Notes)
	}
	// The probe's process group was sent SIGKILL: gone once the kernel
	// has run its exit.
	if left := testutil.Gone(10*time.Second, func() []int { return testutil.Sleeping("598.25") }); len(left) > 0 {
		t.Errorf("left running: %v", left)
	}
}
