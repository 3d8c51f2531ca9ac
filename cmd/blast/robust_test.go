package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/testutil"
)

// A target that dies a quarter into the run (as a Relay killed 4 s into
// 10 s): most requests are refused or reset, and the run is INVALID, exit
// 1, saying why, instead of percentiles from the survivors.
func TestTargetDiesMidRun(t *testing.T) {
	var n atomic.Int64
	var once sync.Once
	var srv *httptest.Server
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) == 100 {
			once.Do(func() { go srv.Close() })
		}
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	stdout, stderr, code := runBlast(t, "--target", srv.URL, "--rate", "200", "--duration", "2s", "--pool", "30", "--timeout", "2s")
	var reasons []string
	for _, line := range strings.Split(stdout, "\n") {
		if why, ok := strings.CutPrefix(line, "INVALID"); ok {
			reasons = append(reasons, strings.TrimSpace(why))
		}
	}
	t.Logf("server answered %d; INVALID: %q", n.Load(), reasons)
	if code != 1 || !strings.Contains(strings.Join(reasons, "\n"), "got no answer (refused") {
		t.Fatalf("exit %d, INVALID %q: want exit 1 and a reason naming the unanswered requests\n%s\n%s", code, reasons, stdout, stderr)
	}
}

// A pool larger than the memory blast may use is refused before it is
// built, with one line: here GOMEMLIMIT bounds it (MemAvailable, the
// machine's free memory, bounds it the same way). A dump is written a
// batch at a time, so only a limit below one batch refuses it.
func TestPoolTooLargeForMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pool")
	for _, tc := range []struct {
		limit string
		args  []string
	}{
		{"8MiB", []string{"--dump", dir, "--pool", "20000"}},
		{"64MiB", []string{"--target", "http://127.0.0.1:1", "--pool", "20000", "--duration", "1s"}},
	} {
		args := tc.args
		cmd := exec.Command(binary(t), args...)
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+tc.limit)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		stalls := testutil.StartStalls()
		start := time.Now()
		err := cmd.Run()
		took, lost := time.Since(start), stalls.Stop()
		lines := strings.Split(strings.TrimRight(e.String(), "\n"), "\n")
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != 2 || len(lines) != 1 ||
			!strings.HasPrefix(lines[0], "blast: --pool: ") || !strings.Contains(lines[0], "20000 envelopes") || !strings.Contains(lines[0], "available (GOMEMLIMIT)") {
			t.Errorf("%v: %v, stderr %q; want exit 2 and one line on the pool's memory", args, err, e.String())
		}
		if took > 5*time.Second+lost {
			t.Errorf("%v: refused after %v (%v lost to the machine)", args, took, lost)
		}
		t.Logf("%s", lines[0])
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the dump directory was made: %v", err)
	}
}

// asLimit is the address-space limit (ulimit -v) the tests below run
// blast under: what a Go program needs to start, far below what a pool of
// a million envelopes holds.
const asLimit = 3 << 30

// underAS is blast with args under asLimit, by the shell's ulimit -v.
func underAS(t *testing.T, args ...string) *exec.Cmd {
	sh := "ulimit -v " + strconv.Itoa(asLimit>>10) + ` && exec "$0" "$@"`
	return exec.Command("/bin/sh", append([]string{"-c", sh, binary(t)}, args...)...)
}

// Under an address-space limit (ulimit -v) a pool that cannot fit in it
// is refused before it is built, with one line naming RLIMIT_AS, not a
// crash of the Go runtime halfway through the build.
func TestPoolOverAddressSpace(t *testing.T) {
	cmd := underAS(t, "--target", "http://127.0.0.1:1", "--pool", "1000000", "--duration", "1s")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	lines := strings.Split(strings.TrimRight(e.String(), "\n"), "\n")
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "blast: --pool: 1000000 envelopes need about ") ||
		!strings.Contains(lines[0], "available (RLIMIT_AS)") {
		t.Errorf("%v, stderr %.2000q; want exit 2 and one line naming RLIMIT_AS", err, e.String())
	}
	t.Logf("%s", lines[0])
}

// Under the same limit a dump of a million envelopes streams: it writes
// batch after batch from the start (a dump holding the pool would crash
// before writing one), and ends on an interrupt without a runtime crash.
func TestDumpStreamsUnderAddressSpace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dump")
	cmd := underAS(t, "--dump", dir, "--pool", "1000000")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	want := 3 * pool.DumpBatch
	deadline := time.After(2 * time.Minute)
	for n := 0; n < want; {
		select {
		case err := <-exited:
			t.Fatalf("blast ended after %d envelopes were written: %v\n%.3000s", n, err, e.String())
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("%d envelopes written after 2 minutes, want %d", n, want)
		case <-time.After(100 * time.Millisecond):
		}
		des, _ := os.ReadDir(dir)
		n = len(des)
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exited
		t.Fatal("blast went on a minute after SIGINT")
	}
	if strings.Contains(e.String(), "fatal error") || strings.Contains(e.String(), "goroutine ") {
		t.Errorf("blast crashed: %.3000s", e.String())
	}
}
