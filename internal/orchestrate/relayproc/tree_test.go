package relayproc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/relayload/relayload/internal/testutil"
)

// startWrapped starts fakerelay in mode through testdata/wrap.sh, a
// two-line shell script that runs it as its child (no exec), as many
// start Relay; termDelay is how long fakerelay takes to shut down.
func startWrapped(t *testing.T, mode string, termDelay time.Duration) (*Process, string) {
	t.Helper()
	dir := t.TempDir()
	port := testutil.FreePort(t)
	cfg := fmt.Sprintf("relay:\n  host: 127.0.0.1\n  port: %d\n", port)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	wrap, err := filepath.Abs("testdata/wrap.sh")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(Spec{
		Bin: wrap, Args: []string{"-c", dir, "run"}, LogPath: filepath.Join(dir, "relay.log"),
		Env: []string{"WRAPPED_BIN=" + fakeRelay(t), "FAKERELAY_MODE=" + mode, "FAKERELAY_TERM_DELAY=" + termDelay.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(100 * time.Millisecond) })
	url := fmt.Sprintf("http://127.0.0.1:%d/api/relay/healthcheck/ready/", port)
	if _, err := p.WaitReady(context.Background(), url, 50*time.Millisecond, 10*time.Second); err != nil {
		t.Fatalf("WaitReady: %v\nlog:\n%s", err, p.LogTail(10))
	}
	return p, url
}

// A wrapper script's tree is measured whole: the busy child's CPU and
// memory, not the waiting shell's alone; perf gets both pids.
func TestTreeSamplerMeasuresWrappedChild(t *testing.T) {
	p, _ := startWrapped(t, "burn", 50*time.Millisecond)
	tree, err := NewTreeSampler(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	lone, err := NewSampler(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	ta, errT := tree.Read()
	la, errL := lone.Read()
	if errT != nil || errL != nil {
		t.Fatal(errT, errL)
	}
	time.Sleep(time.Second)
	tb, errT := tree.Read()
	lb, errL := lone.Read()
	if errT != nil || errL != nil {
		t.Fatal(errT, errL)
	}
	// One busy goroutine: busy, never above one core (a loaded machine
	// may take part of it); the shell only waits.
	treeCores, shellCores := Cores(ta, tb), Cores(la, lb)
	t.Logf("tree %.3f cores, %.1f MiB; shell alone %.3f cores, %.1f MiB", treeCores, float64(tb.RSS)/(1<<20), shellCores, float64(lb.RSS)/(1<<20))
	if treeCores < 0.05 || treeCores > 1.1 || shellCores > 0.02 {
		t.Errorf("tree %.3f cores, shell %.3f: want the busy child's core in the tree's figure", treeCores, shellCores)
	}
	if tb.RSS <= lb.RSS {
		t.Errorf("tree RSS %d not above the shell's %d", tb.RSS, lb.RSS)
	}
	if pids := tree.PIDs(); len(pids) != 2 || pids[0] != p.PID() || tree.Members() != 2 {
		t.Errorf("PIDs %v (members %d), want the shell %d and its child", pids, tree.Members(), p.PID())
	}
	if peak, err := tree.PeakRSS(); err != nil || peak < tb.RSS {
		t.Errorf("tree peak RSS %d < RSS %d (err %v)", peak, tb.RSS, err)
	}
	if err := tree.ResetPeakRSS(); err != nil {
		t.Errorf("ResetPeakRSS: %v", err)
	}
}

// SIGTERM kills the waiting shell at once; Stop waits for its child's
// own shutdown instead of killing it, and leaves nothing running.
func TestStopWaitsForTheWholeTree(t *testing.T) {
	const shutdown = 400 * time.Millisecond
	p, _ := startWrapped(t, "ready", shutdown)
	members := liveTree(t, p)
	if len(members) != 2 {
		t.Fatalf("tree %v, want the shell and its child", members)
	}
	res := p.Stop(5 * time.Second)
	if res.Killed || res.Took < shutdown || res.Outlived != 1 {
		t.Errorf("stop = %+v, want a graceful stop of at least %v, the child outliving the shell", res, shutdown)
	}
	if !strings.Contains(p.LogTail(5), "fakerelay exited cleanly") {
		t.Errorf("the child did not finish its shutdown:\n%s", p.LogTail(5))
	}
	for _, pid := range members {
		if alive(pid) && !zombie(pid) {
			t.Errorf("pid %d still running after Stop", pid)
		}
	}
}

// A tree that ignores SIGTERM is killed whole after the grace.
func TestStopKillsTheTreeAfterGrace(t *testing.T) {
	p, _ := startWrapped(t, "ignore-term", 0)
	members := liveTree(t, p)
	stalls := testutil.StartStalls()
	start := time.Now()
	res := p.Stop(300 * time.Millisecond)
	took, lost := time.Since(start), stalls.Stop()
	if !res.Killed || took > 4*time.Second+lost {
		t.Errorf("stop = %+v after %v (%v lost to the machine), want SIGKILL after the grace", res, took, lost)
	}
	for _, pid := range members {
		if alive(pid) && !zombie(pid) {
			t.Errorf("pid %d still running after Stop", pid)
		}
	}
}

func liveTree(t *testing.T, p *Process) []int {
	t.Helper()
	var pids []int
	for _, m := range p.liveTree() {
		pids = append(pids, m.pid)
	}
	if !slices.Contains(pids, p.PID()) {
		t.Fatalf("tree %v misses the process %d", pids, p.PID())
	}
	return pids
}

// zombie is whether pid has exited but not been reaped (an orphan whose
// new parent does not reap it).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// BenchmarkTreeSamplerRead measures one reading of a tree (this test
// process's): most readings read the known members, one a second looks
// through every process for new ones.
func BenchmarkTreeSamplerRead(b *testing.B) {
	s, err := NewTreeSampler(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Read(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanTree measures the look through every process.
func BenchmarkScanTree(b *testing.B) {
	fs, err := procfs.NewFS(procfs.DefaultMountPoint)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := scanTree(fs, os.Getpid()); err != nil {
			b.Fatal(err)
		}
	}
}
