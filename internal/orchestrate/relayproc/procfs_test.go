package relayproc

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// openFS opens a fake /proc under testdata.
func openFS(t *testing.T, dir string) FS {
	t.Helper()
	f, err := NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// x86CPUInfo skips on architectures whose cpuinfo procfs parses in another
// format than testdata's (it picks the parser by GOARCH).
func x86CPUInfo(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
		t.Skipf("testdata's cpuinfo is in x86 format; procfs parses %s's", runtime.GOARCH)
	}
}

func TestNewFSMissingDir(t *testing.T) {
	if _, err := NewFS("testdata/no-such-proc"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NewFS(missing) = %v, want ErrNotExist", err)
	}
}

func TestFakeCPUTime(t *testing.T) {
	f := openFS(t, "testdata/proc")
	for _, tc := range []struct {
		name    string
		pid     int
		want    time.Duration
		wantErr error // nil: no error
	}{
		// utime 150 + stime 57 ticks; the children's 900+900 do not count.
		{"comm with spaces and parentheses", 100, 2070 * time.Millisecond, nil},
		{"cut after the command name", 101, 0, procfs.ErrFileParse},
		{"too few fields", 102, 0, errAny},
		{"no stat file", 103, 0, fs.ErrNotExist},
		{"no such process", 999, 0, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.CPUTime(tc.pid)
			checkErr(t, err, tc.wantErr)
			if got != tc.want {
				t.Errorf("CPUTime(%d) = %v, want %v", tc.pid, got, tc.want)
			}
		})
	}
}

func TestFakeMemory(t *testing.T) {
	f := openFS(t, "testdata/proc")
	for _, tc := range []struct {
		name    string
		pid     int
		want    Memory
		wantErr error
	}{
		{"VmRSS and VmHWM", 100, Memory{RSS: 10 << 20, Peak: 40 << 20}, nil},
		{"no Vm lines (a kernel thread or zombie)", 101, Memory{}, nil},
		{"unparsable values count as 0", 102, Memory{}, nil},
		{"no status file", 103, Memory{}, fs.ErrNotExist},
		{"no such process", 999, Memory{}, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.Memory(tc.pid)
			checkErr(t, err, tc.wantErr)
			if got != tc.want {
				t.Errorf("Memory(%d) = %+v, want %+v", tc.pid, got, tc.want)
			}
		})
	}
}

func TestFakeLoadAvg(t *testing.T) {
	for _, tc := range []struct {
		dir     string
		want    LoadAvg
		str     string
		wantErr error
	}{
		{"testdata/proc", LoadAvg{0.46, 1.33, 1.57}, "0.46 1.33 1.57", nil},
		{"testdata/proc-bad", LoadAvg{}, "0.00 0.00 0.00", procfs.ErrFileParse}, // one field of three
		{t.TempDir(), LoadAvg{}, "0.00 0.00 0.00", fs.ErrNotExist},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			got, err := openFS(t, tc.dir).LoadAvg()
			checkErr(t, err, tc.wantErr)
			if got != tc.want || got.String() != tc.str {
				t.Errorf("LoadAvg = %+v (%q), want %+v (%q)", got, got, tc.want, tc.str)
			}
		})
	}
}

func TestFakeCPUInfo(t *testing.T) {
	x86CPUInfo(t)
	for _, tc := range []struct {
		dir     string
		model   string
		count   int
		wantErr error
	}{
		// The model name is trimmed, as the hand parser trimmed it.
		{"testdata/proc", "Intel(R) Xeon(R) Processor", 2, nil},
		// procfs v0.23.0 indexes past "processor:0"; guard makes it an error.
		{"testdata/proc-bad", "", 0, procfs.ErrFileParse},
		{t.TempDir(), "", 0, fs.ErrNotExist},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			f := openFS(t, tc.dir)
			model, err := f.CPUModel()
			checkErr(t, err, tc.wantErr)
			if model != tc.model {
				t.Errorf("CPUModel = %q, want %q", model, tc.model)
			}
			n, err := f.CPUCount()
			checkErr(t, err, tc.wantErr)
			if n != tc.count {
				t.Errorf("CPUCount = %d, want %d", n, tc.count)
			}
			if err != nil && !strings.Contains(err.Error(), tc.dir+"/cpuinfo") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestGuard(t *testing.T) {
	for _, tc := range []struct {
		name    string
		read    func() (int, error)
		want    int
		wantErr error
	}{
		{"value", func() (int, error) { return 7, nil }, 7, nil},
		{"error passes through", func() (int, error) { return 0, fs.ErrNotExist }, 0, fs.ErrNotExist},
		{"panic becomes ErrFileParse", func() (int, error) {
			var s []int
			return s[3], nil
		}, 0, procfs.ErrFileParse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := guard(tc.read)
			checkErr(t, err, tc.wantErr)
			if got != tc.want {
				t.Errorf("guard = %d, want %d", got, tc.want)
			}
		})
	}
}

// burn uses about d of CPU on this goroutine.
func burn(d time.Duration) {
	x := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := range 1000 {
			x += i
		}
	}
	_ = x
}

// TestRealCPUTime checks CPUTime of this process against getrusage, which
// the kernel computes from the same per-thread counters at a finer grain.
func TestRealCPUTime(t *testing.T) {
	burn(100 * time.Millisecond)
	rusage := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before := rusage()
	got, err := CPUTime(os.Getpid())
	after := rusage()
	if err != nil {
		t.Fatal(err)
	}
	// stat counts whole clock ticks (10 ms), and the split between
	// utime and stime is rounded each; allow a few ticks either way.
	if got < before-30*time.Millisecond || got > after+30*time.Millisecond {
		t.Errorf("CPUTime = %v, getrusage %v … %v", got, before, after)
	}
	if got%(10*time.Millisecond) != 0 {
		t.Errorf("CPUTime = %v, not a whole number of 10 ms ticks", got)
	}
}

func TestRealExitedProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	// The child has been reaped: its /proc directory is gone.
	pid := cmd.Process.Pid
	if _, err := CPUTime(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CPUTime(reaped %d) = %v, want ErrNotExist", pid, err)
	}
	if _, err := ProcessMemory(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ProcessMemory(reaped %d) = %v, want ErrNotExist", pid, err)
	}
	if err := ResetPeakRSS(pid); err == nil {
		t.Errorf("ResetPeakRSS(reaped %d) succeeded", pid)
	}
}

func TestRealMemory(t *testing.T) {
	m, err := ProcessMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSampler(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	smp, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS == 0 || m.Peak < m.RSS {
		t.Errorf("Memory = %+v", m)
	}
	// VmRSS and stat's rss are the same counter, read moments apart.
	if d := int64(m.RSS) - int64(smp.RSS); d < -8<<20 || d > 8<<20 {
		t.Errorf("VmRSS %d, stat RSS %d", m.RSS, smp.RSS)
	}
}

// TestRealLoadAvg compares with the first three fields of /proc/loadavg as
// read by hand before and after (the kernel updates them every 5 s).
func TestRealLoadAvg(t *testing.T) {
	raw := func() string {
		b, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	a := raw()
	l, err := SystemLoadAvg()
	b := raw()
	if err != nil {
		t.Fatal(err)
	}
	if s := l.String(); s != a && s != b {
		t.Errorf("SystemLoadAvg = %q, /proc/loadavg %q", s, a)
	}
	if v := LoadAvg1(); v < 0 {
		t.Errorf("LoadAvg1 = %v", v)
	}
}

// TestRealCPUInfo compares with what the hand parsers found: the first
// "model name" line and the number of "processor" lines.
func TestRealCPUInfo(t *testing.T) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	var wantModel string
	for l := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			wantModel = strings.TrimSpace(v)
			break
		}
	}
	wantCount := strings.Count(string(b), "processor\t:")
	model, err := CPUModel()
	if err != nil {
		t.Fatal(err)
	}
	if model != wantModel {
		t.Errorf("CPUModel = %q, want %q", model, wantModel)
	}
	n, err := CPUCount()
	if err != nil {
		t.Fatal(err)
	}
	if n != wantCount || n < 1 {
		t.Errorf("CPUCount = %d, want %d", n, wantCount)
	}
}

// errAny stands for "some error" in the tables.
var errAny = errors.New("any error")

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("unexpected error: %v", err)
	case want == errAny && err == nil, want != nil && want != errAny && !errors.Is(err, want):
		t.Errorf("error = %v, want %v", err, want)
	}
}
