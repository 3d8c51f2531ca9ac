package profile

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
)

// fakePerf writes a shell script standing in for perf and returns its path.
func fakePerf(t *testing.T, body string) string {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	path := filepath.Join(t.TempDir(), "perf")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunFake(t *testing.T) {
	fixture, err := filepath.Abs("testdata/relay-errors.fields.perf.txt")
	if err != nil {
		t.Fatal(err)
	}
	argsFile := filepath.Join(t.TempDir(), "args")
	tests := []struct {
		name    string
		body    string
		timeout time.Duration
		samples int64
		wantIs  error
		wantMsg []string
	}{
		{name: "ok", body: `echo "$@" > ` + argsFile + `; echo "Warning: lost 3 chunks" >&2; cat ` + fixture, samples: 8},
		{name: "perf fails", body: `echo "  Error:" >&2; echo "The relay.data data has no samples!" >&2; exit 255`,
			wantMsg: []string{"exit status 255", "The relay.data data has no samples!"}},
		{name: "perf fails after output", body: `head -c 3000 ` + fixture + `; echo "failed to process sample" >&2; exit 1`,
			wantMsg: []string{"exit status 1", "failed to process sample"}},
		{name: "garbage", body: `echo "this is not perf"`, wantIs: ErrNotPerfScript},
		{name: "garbage while perf goes on", body: `exec yes "not perf"`, wantIs: ErrNotPerfScript},
		{name: "empty", body: `exit 0`, wantIs: ErrNoSamples},
		{name: "timeout", body: `exec sleep 20`, timeout: 200 * time.Millisecond, wantIs: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			perf := fakePerf(t, tt.body)
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			stalls := testutil.StartStalls()
			start := time.Now()
			p, err := Run(ctx, perf, "relay.data")
			if took, lost := time.Since(start), stalls.Stop(); took > 5*time.Second+lost {
				t.Errorf("Run took %v (%v lost to the machine)", took, lost)
			}
			if tt.wantIs == nil && tt.wantMsg == nil {
				if err != nil {
					t.Fatal(err)
				}
				if p.Samples != tt.samples {
					t.Errorf("%d samples, want %d", p.Samples, tt.samples)
				}
				return
			}
			if err == nil {
				t.Fatalf("Run = %+v, want an error", p)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Run error %v, want one wrapping %v", err, tt.wantIs)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("Run error %q lacks %q", err, m)
				}
			}
		})
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(args)), strings.Join(ScriptArgs("relay.data"), " "); got != want {
		t.Errorf("perf called with %q, want %q", got, want)
	}

	if _, err := Run(context.Background(), filepath.Join(t.TempDir(), "no-perf"), "x.data"); err == nil {
		t.Error("Run with a missing perf binary succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, "perf", "x.data"); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: %v", err)
	}
}

// TestRunPerf records a small Go program (testdata/spin, built here: test
// binaries have no symbol table) with the real perf, when there is one
// that may record, and reads the recording with Run.
func TestRunPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("records with perf")
	}
	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Skip("perf is not installed")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the program to record")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	spin := filepath.Join(dir, "spin")
	if out, err := exec.CommandContext(ctx, gobin, "build", "-o", spin, "./testdata/spin").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	data := filepath.Join(dir, "perf.data")
	rec := exec.CommandContext(ctx, perf, "record", "-q", "-F", "499", "-g", "-o", data, "--", spin)
	if out, err := rec.CombinedOutput(); err != nil {
		t.Skipf("perf record does not work here: %v: %s", err, firstLine(string(out)))
	}
	p, err := Run(ctx, perf, data)
	if err != nil {
		t.Fatal(err)
	}
	if p.Samples < 20 || p.Event == "" || p.BadLines != 0 {
		t.Fatalf("recorded profile: %s", p.Summary())
	}
	found := false
	for _, f := range p.Top(0) {
		if f.Name == "main.spinWork" {
			found = true
			if f.Inclusive < 30 {
				t.Errorf("spinWork has %.1f%% of the samples", f.Inclusive)
			}
		}
	}
	if !found {
		t.Errorf("spinWork not in the profile; top: %+v", p.Top(5))
	}
	if _, err := Run(ctx, perf, filepath.Join(t.TempDir(), "missing.data")); err == nil ||
		!strings.Contains(err.Error(), "missing.data") {
		t.Errorf("Run on a missing file: %v", err)
	}
}
