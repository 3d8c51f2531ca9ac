package relayproc

import (
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// FS reads the figures orchestrate and the benchmark commands take from
// /proc — a process's CPU time and memory, the load average, the CPUs —
// through github.com/prometheus/procfs. DefaultFS is the real /proc; NewFS
// opens any directory laid out like it (a fake one in tests).
//
// Every method returns an error, wrapped with %w, where the file is missing
// or malformed; none panics, not even on a truncated file.
type FS struct {
	fs    procfs.FS
	mount string
}

// NewFS opens the proc filesystem mounted at mount.
func NewFS(mount string) (FS, error) {
	fs, err := procfs.NewFS(mount)
	if err != nil {
		return FS{}, fmt.Errorf("relayproc: opening %s: %w", mount, err)
	}
	return FS{fs: fs, mount: mount}, nil
}

var defaultFS = sync.OnceValues(func() (FS, error) { return NewFS(procfs.DefaultMountPoint) })

// DefaultFS is the system's /proc.
func DefaultFS() (FS, error) { return defaultFS() }

// Mount is the directory the FS reads.
func (f FS) Mount() string { return f.mount }

// CPUTime is the user plus system CPU time of every thread of pid so far
// (utime+stime of /proc/PID/stat).
func (f FS) CPUTime(pid int) (time.Duration, error) {
	p, err := f.proc(pid)
	if err != nil {
		return 0, err
	}
	st, err := readStat(p)
	if err != nil {
		return 0, fmt.Errorf("relayproc: reading %s/%d/stat: %w", f.mount, pid, err)
	}
	return seconds(st.CPUTime()), nil
}

// Memory is a process's resident set, from /proc/PID/status.
type Memory struct {
	// RSS is the resident set size now (VmRSS), in bytes.
	RSS uint64
	// Peak is the high-water mark of the resident set (VmHWM), in bytes;
	// ResetPeakRSS lowers it to the current RSS.
	Peak uint64
}

// Memory reads pid's current and peak resident set.
func (f FS) Memory(pid int) (Memory, error) {
	p, err := f.proc(pid)
	if err != nil {
		return Memory{}, err
	}
	st, err := guard(p.NewStatus)
	if err != nil {
		return Memory{}, fmt.Errorf("relayproc: reading %s/%d/status: %w", f.mount, pid, err)
	}
	return Memory{RSS: st.VmRSS, Peak: st.VmHWM}, nil
}

// LoadAvg is the system load average: the mean number of runnable (and
// uninterruptible) tasks over the last 1, 5 and 15 minutes.
type LoadAvg struct {
	Load1, Load5, Load15 float64
}

// String formats the three averages as /proc/loadavg does: "0.46 1.33 1.57".
func (l LoadAvg) String() string {
	return fmt.Sprintf("%.2f %.2f %.2f", l.Load1, l.Load5, l.Load15)
}

// LoadAvg reads the load average from loadavg.
func (f FS) LoadAvg() (LoadAvg, error) {
	l, err := guard(f.fs.LoadAvg)
	if err != nil {
		return LoadAvg{}, fmt.Errorf("relayproc: reading %s/loadavg: %w", f.mount, err)
	}
	return LoadAvg{Load1: l.Load1, Load5: l.Load5, Load15: l.Load15}, nil
}

// CPUModel is the model name of the first CPU in cpuinfo that has one, or ""
// when none does (as on many ARM machines).
func (f FS) CPUModel() (string, error) {
	cpus, err := f.cpuInfo()
	if err != nil {
		return "", err
	}
	for _, c := range cpus {
		if m := strings.TrimSpace(c.ModelName); m != "" {
			return m, nil
		}
	}
	return "", nil
}

// CPUCount is the number of processors cpuinfo lists: every online CPU of
// the machine, whatever this process's affinity (unlike runtime.NumCPU).
func (f FS) CPUCount() (int, error) {
	cpus, err := f.cpuInfo()
	if err != nil {
		return 0, err
	}
	return len(cpus), nil
}

func (f FS) cpuInfo() ([]procfs.CPUInfo, error) {
	cpus, err := guard(f.fs.CPUInfo)
	if err != nil {
		return nil, fmt.Errorf("relayproc: reading %s/cpuinfo: %w", f.mount, err)
	}
	return cpus, nil
}

func (f FS) proc(pid int) (procfs.Proc, error) {
	p, err := f.fs.Proc(pid)
	if err != nil {
		return procfs.Proc{}, fmt.Errorf("relayproc: process %d: %w", pid, err)
	}
	return p, nil
}

// readStat reads p's stat file. Sampler.Read uses it too.
func readStat(p procfs.Proc) (procfs.ProcStat, error) { return guard(p.Stat) }

// guard calls read and turns a panic into an error wrapping
// procfs.ErrFileParse: procfs v0.23.0 indexes without bounds checks in
// places, e.g. Proc.Stat on a stat file that ends right after the ")" of
// the command name, or CPUInfo on a "processor:0" line.
func guard[T any](read func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, fmt.Errorf("%w: %v", procfs.ErrFileParse, r)
		}
	}()
	return read()
}

// seconds converts procfs's float seconds to a Duration, rounded to the
// nanosecond (CPU times are whole clock ticks, so the rounding is exact).
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// CPUTime is DefaultFS().CPUTime(pid).
func CPUTime(pid int) (time.Duration, error) {
	f, err := DefaultFS()
	if err != nil {
		return 0, err
	}
	return f.CPUTime(pid)
}

// ProcessMemory is DefaultFS().Memory(pid).
func ProcessMemory(pid int) (Memory, error) {
	f, err := DefaultFS()
	if err != nil {
		return Memory{}, err
	}
	return f.Memory(pid)
}

// ResetPeakRSS resets pid's high-water mark of the resident set (VmHWM) to
// its current RSS, so that a later Memory().Peak covers only what follows
// (it writes 5 to /proc/PID/clear_refs, which needs the right to ptrace pid).
func ResetPeakRSS(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("relayproc: resetting the peak RSS of %d: %w", pid, err)
	}
	return nil
}

// SystemLoadAvg is DefaultFS().LoadAvg().
func SystemLoadAvg() (LoadAvg, error) {
	f, err := DefaultFS()
	if err != nil {
		return LoadAvg{}, err
	}
	return f.LoadAvg()
}

// LoadAvg1 returns the 1-minute load average, or -1 if it cannot be read.
func LoadAvg1() float64 {
	l, err := SystemLoadAvg()
	if err != nil {
		return -1
	}
	return l.Load1
}

// CPUModel is DefaultFS().CPUModel().
func CPUModel() (string, error) {
	f, err := DefaultFS()
	if err != nil {
		return "", err
	}
	return f.CPUModel()
}

// CPUCount is DefaultFS().CPUCount().
func CPUCount() (int, error) {
	f, err := DefaultFS()
	if err != nil {
		return 0, err
	}
	return f.CPUCount()
}
