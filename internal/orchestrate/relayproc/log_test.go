package relayproc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startScript runs a shell script as the process with spec's log.
func startScript(t *testing.T, script string, logPath string, logMax int64) *Process {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := Start(Spec{Bin: bin, LogPath: logPath, LogMax: logMax})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(100 * time.Millisecond) })
	return p
}

// TestLogDiskFull writes the log to /dev/full (every write fails with
// ENOSPC, as on a full disk): the error is kept with its reason, and the
// process, writing more than a pipe holds, is never blocked by it.
// Before, the process wrote the file itself and nothing saw the error.
func TestLogDiskFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	p := startScript(t, "head -c 4194304 /dev/zero\necho done >&2\n", "/dev/full", 0)
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the process still runs: blocked on its log?")
	}
	if _, how := p.Exited(); how != "exited with status 0" {
		t.Errorf("exit %q", how)
	}
	err := p.LogErr()
	if err == nil || !strings.Contains(err.Error(), syscall.ENOSPC.Error()) || !strings.Contains(err.Error(), "/dev/full") {
		t.Errorf("LogErr %v, want the full disk named", err)
	}
}

// TestLogCapKeepsTail caps a log far below what the process prints: at
// most the cap is on disk, the newest lines, and LogTail still ends with
// the last line.
func TestLogCapKeepsTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.log")
	const max = 64 << 10
	p := startScript(t, "seq 1 100000\n", path, max)
	<-p.Done()
	if err := p.LogErr(); err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	all := string(old) + string(cur)
	if len(all) > max {
		t.Errorf("%d bytes on disk, cap %d", len(all), max)
	}
	if p.LogDiscarded()+int64(len(all)) < 588895 { // the bytes `seq 1 100000` prints
		t.Errorf("discarded %d + kept %d: less than was printed", p.LogDiscarded(), len(all))
	}
	// What is kept is the end of the output, whole and in order.
	lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	if len(all) < max/4 || lines[len(lines)-1] != "100000" {
		t.Fatalf("kept %d bytes ending %q", len(all), lines[len(lines)-1])
	}
	first, err := strconv.Atoi(lines[1]) // lines[0] may be cut by a read
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines[1:] {
		if l != strconv.Itoa(first+i) {
			t.Fatalf("line %d is %q, want %d", i+1, l, first+i)
		}
	}
	if got := p.LogTail(3); got != "99998\n99999\n100000" {
		t.Errorf("tail %q", got)
	}
}
