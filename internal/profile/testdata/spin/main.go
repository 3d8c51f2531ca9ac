// Command spin burns 400 ms of its own CPU time in a function TestRunPerf
// looks for.
//
// It counts CPU time, not wall time: perf samples the CPU a process used,
// and on a loaded machine 400 ms of wall time can hold a small fraction of
// that, too few samples to find spinWork by.
package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

//go:noinline
func spinWork(x int) int {
	for i := range 100000 {
		x = x*31 + i
	}
	return x
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "spin:", err)
		os.Exit(1)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	const burn = 400 * time.Millisecond
	x := 1
	for cpuTime() < burn {
		x = spinWork(x)
	}
	if x == 0 {
		fmt.Fprintln(os.Stderr, x)
	}
}
