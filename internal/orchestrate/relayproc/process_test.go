package relayproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
)

// fakeRelay builds testdata/fakerelay once per test binary.
func fakeRelay(t testing.TB) string {
	return testutil.Build(t, "github.com/relayload/relayload/internal/orchestrate/relayproc/testdata/fakerelay")
}

func TestMain(m *testing.M) { testutil.Main(m) }

// startFake starts fakerelay in mode and returns it with its ready URL.
func startFake(t *testing.T, mode, cpus string) (*Process, string) {
	t.Helper()
	dir := t.TempDir()
	port := testutil.FreePort(t)
	cfg := fmt.Sprintf("relay:\n  host: 127.0.0.1\n  port: %d\n", port)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Start(Spec{
		Bin: fakeRelay(t), Args: []string{"-c", dir, "run"}, CPUs: cpus,
		LogPath: filepath.Join(dir, "relay.log"), Env: []string{"FAKERELAY_MODE=" + mode},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(100 * time.Millisecond) })
	return p, fmt.Sprintf("http://127.0.0.1:%d/api/relay/healthcheck/ready/", port)
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestReadyThenGracefulStop(t *testing.T) {
	p, url := startFake(t, "ready", "")
	took, err := p.WaitReady(context.Background(), url, 50*time.Millisecond, 10*time.Second)
	if err != nil {
		t.Fatalf("WaitReady: %v\nlog:\n%s", err, p.LogTail(10))
	}
	if took <= 0 {
		t.Errorf("readiness took %v", took)
	}
	res := p.Stop(5 * time.Second)
	if res.Killed || res.AlreadyExited {
		t.Errorf("stop = %+v, want a graceful exit", res)
	}
	if res.Exit != "exited with status 0" {
		t.Errorf("exit = %q", res.Exit)
	}
	if res.MaxRSS == 0 {
		t.Error("rusage MaxRSS is 0")
	}
	if !strings.Contains(p.LogTail(5), "shutting down") {
		t.Errorf("log tail misses the shutdown line:\n%s", p.LogTail(5))
	}
	if alive(p.PID()) {
		t.Error("process still alive after Stop")
	}
}

func TestExitBeforeReadyShowsReason(t *testing.T) {
	p, url := startFake(t, "exit", "")
	_, err := p.WaitReady(context.Background(), url, 50*time.Millisecond, 10*time.Second)
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "status 3") {
		t.Fatalf("err = %v, want ErrExited with status 3", err)
	}
	if tail := p.LogTail(5); !strings.Contains(tail, "bad on purpose") {
		t.Errorf("log tail = %q", tail)
	}
}

func TestNeverReadyTimesOut(t *testing.T) {
	p, url := startFake(t, "never-ready", "")
	stalls := testutil.StartStalls()
	start := time.Now()
	_, err := p.WaitReady(context.Background(), url, 50*time.Millisecond, 700*time.Millisecond)
	d, lost := time.Since(start), stalls.Stop()
	if err == nil || !strings.Contains(err.Error(), "not ready after") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err = %v", err)
	}
	if d > 3*time.Second+lost {
		t.Errorf("timeout took %v (%v lost to the machine)", d, lost)
	}
}

func TestIgnoredTermIsKilled(t *testing.T) {
	p, url := startFake(t, "ignore-term", "")
	if _, err := p.WaitReady(context.Background(), url, 50*time.Millisecond, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	stalls := testutil.StartStalls()
	res := p.Stop(300 * time.Millisecond)
	lost := stalls.Stop()
	if !res.Killed || !strings.Contains(res.Exit, "killed") {
		t.Fatalf("stop = %+v, want SIGKILL", res)
	}
	if res.Took < 300*time.Millisecond || res.Took > 2*time.Second+lost {
		t.Errorf("stop took %v (%v lost to the machine)", res.Took, lost)
	}
}

func TestCrashIsNoticed(t *testing.T) {
	p, url := startFake(t, "crash=300ms", "")
	if _, err := p.WaitReady(context.Background(), url, 50*time.Millisecond, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second): // a deadline for a crash due at 300 ms
		t.Fatal("crash not noticed")
	}
	ok, how := p.Exited()
	if !ok || how != "exited with status 4" {
		t.Errorf("Exited = %v %q", ok, how)
	}
	if res := p.Stop(time.Second); !res.AlreadyExited {
		t.Errorf("stop = %+v", res)
	}
}

func TestWaitReadyHonoursContext(t *testing.T) {
	p, url := startFake(t, "never-ready", "")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := p.WaitReady(ctx, url, 50*time.Millisecond, 10*time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestPinnedAndSampled(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset")
	}
	p, url := startFake(t, "burn", "0")
	if _, err := p.WaitReady(context.Background(), url, 50*time.Millisecond, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Cpus_allowed_list:\t0\n") {
		t.Errorf("not pinned to CPU 0:\n%s", b)
	}
	s, err := NewSampler(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	const interval = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	seen := 0
	stalls := testutil.StartStalls()
	s.Run(ctx, interval, func(Sample) { seen++ })
	lost := stalls.Stop()
	smp, err := s.Samples()
	// About 10 samples in the second; a tick is missed only while the
	// process cannot run, so the machine's stalls excuse one per interval
	// they lasted.
	want := max(8-int(lost/interval), 2)
	if err != nil || len(smp) < want {
		t.Fatalf("%d samples, want %d (%v lost to the machine), err %v", len(smp), want, lost, err)
	}
	if seen != len(smp) {
		t.Errorf("each saw %d of %d samples", seen, len(smp))
	}
	// One busy goroutine pinned to one core: busy, but never above one
	// core. How much of that core it got depends on the machine's other
	// load; whether the sampled CPU time is right is checked exactly
	// against the kernel's total below.
	if c := Cores(smp[0], smp[len(smp)-1]); c <= 0 || c > 1.1 {
		t.Errorf("cores = %.2f, want (0, 1] (pinned busy loop)", c)
	}
	hwm, err := s.PeakRSS()
	if err != nil || hwm < smp[len(smp)-1].RSS {
		t.Errorf("VmHWM %d < RSS %d (err %v)", hwm, smp[len(smp)-1].RSS, err)
	}
	// A fresh reading right before Stop: the last sample of the series may
	// be a scheduling delay older than Run's return on a loaded machine.
	last, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	lastAt := time.Now()
	res := p.Stop(2 * time.Second)
	// The sampled CPU time agrees with the kernel's exact total at exit:
	// never above it, and below it by at most the time since the sample.
	total := (res.UserTime + res.SystemTime).Seconds()
	if last.CPU > total+0.02 || total-last.CPU > time.Since(lastAt).Seconds()+0.05 {
		t.Errorf("sampled CPU %.2f s, rusage total %.2f s", last.CPU, total)
	}
	// getrusage's peak can only be higher than the last VmHWM (it also
	// covers the pre-exec image, see StopResult.MaxRSS).
	if int64(res.MaxRSS) < int64(hwm)-64<<10 {
		t.Errorf("rusage MaxRSS %d vs VmHWM %d", res.MaxRSS, hwm)
	}
	if _, err := s.Read(); err == nil {
		t.Error("Read after exit succeeded")
	}
}

func TestLoadAvg(t *testing.T) {
	if v := LoadAvg1(); v < 0 {
		t.Errorf("LoadAvg1 = %v", v)
	}
}

// BenchmarkSamplerRead measures one 10 Hz sample (stat + parse); at 10 Hz
// the cost in cores is 10 × ns/op × 1e-9.
func BenchmarkSamplerRead(b *testing.B) {
	s, err := NewSampler(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Read(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(10*float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9*100, "%core@10Hz")
}

func BenchmarkPeakRSS(b *testing.B) {
	s, err := NewSampler(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.PeakRSS(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestResetPeakRSS(t *testing.T) {
	s, err := NewSampler(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = 1
	}
	before, _ := s.PeakRSS()
	big = nil
	runtime.GC()
	debug.FreeOSMemory()
	if err := s.ResetPeakRSS(); err != nil {
		t.Skipf("clear_refs not writable here: %v", err)
	}
	after, _ := s.PeakRSS()
	if after >= before || before-after < 32<<20 {
		t.Errorf("VmHWM %d before reset, %d after (64 MiB freed)", before, after)
	}
}

func TestCPUList(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "0-3": "0-3", "3,0-1": "3,0-1", "1,2,3,5": "1-3,5"} {
		cpus, err := ParseCPUList(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := FormatCPUList(cpus); got != want {
			t.Errorf("%q → %v → %q, want %q", in, cpus, got, want)
		}
	}
	for _, in := range []string{"", "a", "3-1", "1,,2", "-1", "01", "5000"} {
		if _, err := ParseCPUList(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestPinProcess(t *testing.T) {
	orig, err := Affinity(os.Getpid())
	if err != nil || len(orig) < 2 {
		t.Skipf("need 2 CPUs: %v %v", orig, err)
	}
	p, _ := startFake(t, "burn", "")
	if err := PinProcess(p.PID(), orig[:1]); err != nil {
		t.Fatal(err)
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.PID()))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", p.PID(), task.Name()))
		if !strings.Contains(string(b), fmt.Sprintf("Cpus_allowed_list:\t%d\n", orig[0])) {
			t.Errorf("thread %s not pinned", task.Name())
		}
	}
}
