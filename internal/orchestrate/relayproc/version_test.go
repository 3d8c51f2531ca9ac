package relayproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
)

func TestProbeVersion(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hang, err := filepath.Abs("testdata/hang.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bin, want string
		secs            string // HANG_SECONDS: the probe's child, gone after it
	}{
		{"relay", script("relay", "echo 'relay 26.4.0'\necho more\n"), "relay 26.4.0", ""},
		{"fails", script("fails", "echo 'relay 1'\nexit 1\n"), "", ""},
		{"ignores --version and keeps running", hang, "", "597.25"},
		{"answers, leaving a child", script("child", "sleep \"$HANG_SECONDS\" &\necho 'relay 2'\n"), "relay 2", "597.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HANG_SECONDS", tc.secs)
			start := time.Now()
			got, err := ProbeVersion(context.Background(), tc.bin, 500*time.Millisecond)
			took := time.Since(start)
			if err != nil || got != tc.want {
				t.Errorf("ProbeVersion = %q, %v; want %q", got, err, tc.want)
			}
			if took > 3*time.Second {
				t.Errorf("took %v for a 500ms bound", took)
			}
			if tc.secs != "" {
				// Sent SIGKILL: gone once the kernel has run its exit.
				if left := testutil.Gone(10*time.Second, func() []int { return testutil.Sleeping(tc.secs) }); len(left) > 0 {
					t.Errorf("left running: %v", left)
				}
			}
		})
	}
}

// An interrupt ends the probe at once, and its process group with it.
func TestProbeVersionInterrupted(t *testing.T) {
	hang, err := filepath.Abs("testdata/hang.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HANG_SECONDS", "597.75")
	ctx, cancel := context.WithCancel(context.Background())
	var seen []int // the probe's child, seen while it runs
	time.AfterFunc(300*time.Millisecond, func() {
		seen = testutil.Sleeping("597.75")
		cancel()
	})
	start := time.Now()
	_, err = ProbeVersion(ctx, hang, time.Minute)
	if len(seen) != 1 {
		t.Errorf("the probe's child was not seen running: %v", seen)
	}
	if !errors.Is(err, context.Canceled) || time.Since(start) > 3*time.Second {
		t.Errorf("err %v after %v, want context.Canceled at once", err, time.Since(start))
	}
	if left := testutil.Gone(10*time.Second, func() []int { return testutil.Sleeping("597.75") }); len(left) > 0 {
		t.Errorf("left running: %v", left)
	}
}
