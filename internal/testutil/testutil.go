// Package testutil is what relayload's tests share: a program built once
// per test binary, a free loopback port, waiting on a condition instead of
// sleeping for a guessed time, and Stalls, a meter of the time a loaded
// machine holds the test back, for wall-time bounds that hold on a busy
// CI host.
//
// Build keeps the one piece of state a test binary needs across its
// tests: the binaries already built. A package whose tests call Build
// runs them through Main, which removes those binaries at the end.
package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// built is the binaries built by this test binary: package path → file.
var built struct {
	sync.Mutex
	dir  string
	bins map[string]string
	errs map[string]error
}

// Build builds the Go package pkg (an import path, e.g.
// "github.com/relayload/relayload/cmd/orchestrate") once per test binary
// and returns the executable's path.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	built.Lock()
	defer built.Unlock()
	if bin, ok := built.bins[pkg]; ok {
		return bin
	}
	if err, ok := built.errs[pkg]; ok {
		tb.Fatal(err)
	}
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "relayload-testbin-")
		if err != nil {
			tb.Fatal(err)
		}
		built.dir, built.bins, built.errs = dir, map[string]string{}, map[string]error{}
	}
	bin := built.dir + "/" + path.Base(pkg)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		built.errs[pkg] = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		tb.Fatal(built.errs[pkg])
	}
	built.bins[pkg] = bin
	return bin
}

// Main runs the tests and removes what Build built; call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	built.Lock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	built.Unlock()
	os.Exit(code)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Eventually polls cond every 10 ms until it holds or timeout passes, and
// reports whether it held.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Output collects what a process writes (use it as cmd.Stdout or
// cmd.Stderr) and lets a test wait for a line instead of sleeping: the
// process's own progress is the readiness signal.
type Output struct {
	mu  sync.Mutex
	buf []byte
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, p...)
	return len(p), nil
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.buf)
}

// WaitFor waits until the output contains s or timeout passes, and reports
// whether it did.
func (o *Output) WaitFor(s string, timeout time.Duration) bool {
	return Eventually(timeout, func() bool { return strings.Contains(o.String(), s) })
}

// LiveHeap is the heap in use after a collection: what is still reachable.
func LiveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Pids lists the live processes match accepts (read with procfs; a process
// that exits while it is read is skipped).
func Pids(match func(procfs.Proc) bool) []int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	var pids []int
	for _, p := range procs {
		if match(p) {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// Children lists the live children of ppid.
func Children(ppid int) []int {
	return Pids(func(p procfs.Proc) bool {
		st, err := p.Stat()
		return err == nil && st.PPID == ppid
	})
}

// CmdLine is a process's command line, arguments joined by spaces ("" once
// it has exited).
func CmdLine(p procfs.Proc) string {
	args, err := p.CmdLine()
	if err != nil {
		return ""
	}
	return strings.Join(args, " ")
}

// Sleeping lists the live processes running `sleep secs`: the children a
// test's scripts leave behind if a process group is not killed whole.
func Sleeping(secs string) []int {
	return Pids(func(p procfs.Proc) bool {
		st, err := p.Stat()
		return err == nil && st.State != "Z" && CmdLine(p) == "sleep "+secs
	})
}

// Gone waits until list returns nothing or timeout passes, and returns what
// it returned last. A process sent SIGKILL is gone only once the kernel has
// run its exit, which a loaded machine may take a while to get to; one that
// was never stopped is still there when the timeout passes.
func Gone[T any](timeout time.Duration, list func() []T) []T {
	var left []T
	Eventually(timeout, func() bool {
		left = list()
		return len(left) == 0
	})
	return left
}
