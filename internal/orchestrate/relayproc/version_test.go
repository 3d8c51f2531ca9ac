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
	// A binary that answers is given a long timeout, which a loaded machine
	// cannot use up starting a shell; the one that hangs a short one, which
	// the probe must keep to.
	for _, tc := range []struct {
		name, bin, want string
		secs            string // HANG_SECONDS: the probe's child, gone after it
		timeout         time.Duration
	}{
		{"relay", script("relay", "echo 'relay 26.4.0'\necho more\n"), "relay 26.4.0", "", time.Minute},
		{"fails", script("fails", "echo 'relay 1'\nexit 1\n"), "", "", time.Minute},
		{"ignores --version and keeps running", hang, "", "597.25", 500 * time.Millisecond},
		{"answers, leaving a child", script("child", "sleep \"$HANG_SECONDS\" &\necho 'relay 2'\n"), "relay 2", "597.5", time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HANG_SECONDS", tc.secs)
			stalls := testutil.StartStalls()
			start := time.Now()
			got, _, err := ProbeVersion(context.Background(), tc.bin, tc.timeout)
			took, lost := time.Since(start), stalls.Stop()
			if err != nil || got != tc.want {
				t.Errorf("ProbeVersion = %q, %v; want %q", got, err, tc.want)
			}
			// Whatever the timeout, no probe waits for a child left
			// holding its output.
			if took > min(tc.timeout, time.Second)+2*time.Second+lost {
				t.Errorf("took %v with a %v timeout (%v lost to the machine)", took, tc.timeout, lost)
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
	// The interrupt comes once the probe's child runs, however long a
	// loaded machine takes to start it.
	var seen []int
	cancelled := make(chan time.Time, 1)
	go func() {
		testutil.Eventually(30*time.Second, func() bool {
			seen = testutil.Sleeping("597.75")
			return len(seen) > 0
		})
		cancelled <- time.Now()
		cancel()
	}()
	stalls := testutil.StartStalls()
	_, _, err = ProbeVersion(ctx, hang, time.Minute)
	at := <-cancelled
	after, lost := time.Since(at), stalls.Stop()
	if len(seen) != 1 {
		t.Errorf("the probe's child was not seen running: %v", seen)
	}
	if !errors.Is(err, context.Canceled) || after > 2*time.Second+lost {
		t.Errorf("err %v %v after the interrupt (%v lost to the machine), want context.Canceled at once", err, after, lost)
	}
	if left := testutil.Gone(10*time.Second, func() []int { return testutil.Sleeping("597.75") }); len(left) > 0 {
		t.Errorf("left running: %v", left)
	}
}
