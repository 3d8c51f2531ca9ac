package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// A target that dies a quarter into the run (as a Relay killed 4 s into
// 10 s): most requests are refused or reset, and the run is INVALID, exit
// 1, saying why, instead of percentiles from the survivors.
func TestTargetDiesMidRun(t *testing.T) {
	var n atomic.Int64
	var once sync.Once
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if n.Add(1) == 100 {
			once.Do(func() { go srv.Close() })
		}
	}))
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
