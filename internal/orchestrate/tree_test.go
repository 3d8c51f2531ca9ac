package orchestrate

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// wrapper is testdata/wrap.sh: a two-line shell script that runs
// $WRAPPED_BIN with its arguments as a child, without exec, as many start
// Relay (env set-up, cargo run).
func wrapper(t *testing.T, bin string) string {
	t.Helper()
	t.Setenv("WRAPPED_BIN", bin)
	p, err := filepath.Abs("testdata/wrap.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Relay started through a wrapper script is measured whole: its CPU and
// memory, not the waiting shell's (0 cores, under 2 MiB); its shutdown is
// Relay's own, not a SIGKILL once the shell died.
func TestWrappedRelayMeasuredWhole(t *testing.T) {
	cfg := quick(100)
	cfg.Builds = []Build{{Name: "wrapped", Bin: wrapper(t, standin(t))}}
	// Like Relay, the stand-in waits limits.shutdown_timeout after SIGTERM.
	fastShutdown(&cfg)
	cfg.RelayConfig["limits"].(map[string]any)["shutdown_timeout"] = 1
	cfg.WorkDir = t.TempDir()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Steps) != 1 || rep.Failed != 0 {
		t.Fatalf("steps %d, failed %d: %+v", len(rep.Steps), rep.Failed, rep.Steps)
	}
	st := rep.Steps[0]
	t.Logf("load %.3f cores, idle %.3f, %.3f ms/envelope, peak RSS %s, shutdown %+v, notes %q",
		st.CPU.LoadCores, st.CPU.IdleCores, st.CPU.MsPerEnv, mib(st.Memory.PeakRSS), st.Shutdown, st.Notes)
	if st.CPU.LoadCores <= 0.001 || st.CPU.CostCPUSecs <= 0 {
		t.Errorf("Relay's load CPU %.4f cores (%.3f CPU-s over the cost span): the shell was measured, not what it runs", st.CPU.LoadCores, st.CPU.CostCPUSecs)
	}
	// The stand-in's Go runtime alone holds more than a shell's 1–2 MiB.
	if st.Memory.PeakRSS < 8<<20 || st.Memory.EndRSS < 8<<20 {
		t.Errorf("peak RSS %s, end RSS %s: the shell was measured, not what it runs", mib(st.Memory.PeakRSS), mib(st.Memory.EndRSS))
	}
	if st.Shutdown.Killed || st.Shutdown.Took < time.Second {
		t.Errorf("shutdown %+v: the shell's, not Relay's own (1 s)", st.Shutdown)
	}
	if !slices.ContainsFunc(st.Notes, func(n string) bool { return strings.HasPrefix(n, "Relay ran as a tree of 2 processes") }) {
		t.Errorf("no note on the tree in %q", st.Notes)
	}
	if left := processesMentioning(cfg.WorkDir); len(left) != 0 {
		t.Errorf("processes left: %v", left)
	}
}
