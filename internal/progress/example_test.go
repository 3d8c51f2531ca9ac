package progress_test

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/progress"
)

// A live line on a terminal 60 columns wide, with a log line written
// around it. The output shows each write: "\r\x1b[K" returns to the start
// of the line and clears it, so the terminal shows the log line above the
// status line, which stays last.
func Example() {
	var term bytes.Buffer // stands in for os.Stderr on a terminal
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	line := progress.New(&term, progress.Options{
		Terminal: true,
		Width:    func() int { return 60 },
		Now:      func() time.Time { return now }, // a stopped clock: the line reads the same
	})
	log := line.Writer() // what the program's log lines go through

	line.Update(progress.Status{Head: "step 1/4 main 500/s", Elapsed: 5 * time.Second, Remaining: 95 * time.Second,
		Detail: "measured window: sending 498/s"})
	fmt.Fprintln(log, "  blast 500/s for 30s after 2s warm-up")
	line.Close() // clears the line: what is printed next starts clean

	for _, w := range strings.SplitAfter(term.String(), "\n") {
		fmt.Printf("%q\n", w)
	}
	// Output:
	// "\r\x1b[Kstep 1/4 main 500/s · 5s, ~1m35s left · measured window: s…\r\x1b[K  blast 500/s for 30s after 2s warm-up\n"
	// "\r\x1b[Kstep 1/4 main 500/s · 5s, ~1m35s left · measured window: s…\r\x1b[K"
}
