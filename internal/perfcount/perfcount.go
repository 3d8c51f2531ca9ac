// Package perfcount counts the instructions a set of processes retires in
// user space, from the CPU's performance counters (perf_event_open). An
// instruction count moves far less than CPU time from run to run on a
// shared machine (it does not grow when another process evicts the caches
// or takes the core), so a comparison that has it resolves smaller changes.
// Machines without a PMU (most VMs) have no such counter: Open says so with
// ErrNoPMU, and callers fall back to CPU time.
package perfcount

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoPMU: the machine has no hardware counter for retired instructions
// (or the kernel does not let this process read it).
var ErrNoPMU = errors.New("no hardware counter for retired instructions (no PMU, e.g. in a VM)")

// Counter counts user-space instructions retired by the threads of some
// processes, and by the threads and processes they start after Open.
type Counter struct {
	fds []int
}

// Open starts counting for every thread of every process in pids. A thread
// that has gone by the time it is opened is skipped.
func Open(pids []int) (*Counter, error) {
	c := &Counter{}
	for _, pid := range pids {
		tids, err := threads(pid)
		if err != nil {
			c.Close()
			return nil, err
		}
		for _, tid := range tids {
			fd, err := openThread(tid)
			switch {
			case errors.Is(err, unix.ESRCH):
				continue
			case err != nil:
				c.Close()
				return nil, err
			}
			c.fds = append(c.fds, fd)
		}
	}
	if len(c.fds) == 0 {
		return nil, fmt.Errorf("perfcount: no thread of %v to count", pids)
	}
	return c, nil
}

// openThread opens a counter of tid's user-space instructions, inherited
// by the threads and processes it starts.
func openThread(tid int) (int, error) {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_HARDWARE,
		Config:      unix.PERF_COUNT_HW_INSTRUCTIONS,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:        unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv | unix.PerfBitInherit,
		Read_format: unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING,
	}
	fd, err := unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENODEV),
		errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return -1, fmt.Errorf("%w: %v", ErrNoPMU, err)
	case err != nil:
		return -1, fmt.Errorf("perfcount: perf_event_open for thread %d: %w", tid, err)
	}
	return fd, nil
}

// threads lists the thread ids of pid from /proc.
func threads(pid int) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, fmt.Errorf("perfcount: threads of %d: %w", pid, err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// Read is the instructions retired so far, each thread's count scaled up
// for the time the kernel multiplexed its counter off the PMU.
func (c *Counter) Read() (uint64, error) {
	var total uint64
	buf := make([]byte, 24)
	for _, fd := range c.fds {
		if _, err := unix.Read(fd, buf); err != nil {
			return 0, fmt.Errorf("perfcount: read: %w", err)
		}
		total += Scaled(Reading{
			Value:   binary.NativeEndian.Uint64(buf[0:]),
			Enabled: binary.NativeEndian.Uint64(buf[8:]),
			Running: binary.NativeEndian.Uint64(buf[16:]),
		})
	}
	return total, nil
}

// Close stops counting.
func (c *Counter) Close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}

// Reading is one counter as the kernel reports it: its value, and how long
// it was enabled and how long it was actually on the PMU (nanoseconds).
type Reading struct {
	Value, Enabled, Running uint64
}

// Scaled is the reading's value extrapolated to the whole time it was
// enabled (perf stat's scaling); 0 for a counter that never ran.
func Scaled(r Reading) uint64 {
	if r.Running == 0 {
		return 0
	}
	if r.Running >= r.Enabled {
		return r.Value
	}
	return uint64(float64(r.Value) * float64(r.Enabled) / float64(r.Running))
}

// PerEnvelope is the instructions per envelope between two readings of a
// counter: (b − a) / envelopes; 0 without envelopes.
func PerEnvelope(a, b uint64, envelopes int64) float64 {
	if envelopes <= 0 || b < a {
		return 0
	}
	return float64(b-a) / float64(envelopes)
}
