//go:build unix

package compression

import (
	"syscall"
	"time"
)

// processCPU returns the process's user+system CPU time. Benchmarks report
// CPU time per operation next to wall time because the machine they run on
// is shared: wall time includes waiting for a core, CPU time does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
