// Command spin burns CPU for 400 ms in a function TestRunPerf looks for.
package main

import (
	"fmt"
	"os"
	"time"
)

//go:noinline
func spinWork(x int) int {
	for i := range 100000 {
		x = x*31 + i
	}
	return x
}

func main() {
	deadline := time.Now().Add(400 * time.Millisecond)
	x := 1
	for time.Now().Before(deadline) {
		x = spinWork(x)
	}
	if x == 0 {
		fmt.Fprintln(os.Stderr, x)
	}
}
