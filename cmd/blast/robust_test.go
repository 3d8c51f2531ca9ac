package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
// machine's free memory, bounds it the same way).
func TestPoolTooLargeForMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pool")
	for _, args := range [][]string{
		{"--dump", dir, "--pool", "20000"},
		{"--target", "http://127.0.0.1:1", "--pool", "20000", "--duration", "1s"},
	} {
		cmd := exec.Command(binary(t), args...)
		cmd.Env = append(os.Environ(), "GOMEMLIMIT=64MiB")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		stalls := testutil.StartStalls()
		start := time.Now()
		err := cmd.Run()
		took, lost := time.Since(start), stalls.Stop()
		lines := strings.Split(strings.TrimRight(e.String(), "\n"), "\n")
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != 2 || len(lines) != 1 ||
			!strings.HasPrefix(lines[0], "blast: --pool: 20000 envelopes need about ") || !strings.Contains(lines[0], "available (GOMEMLIMIT)") {
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
