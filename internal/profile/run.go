package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// ScriptFields is the -F list Run asks perf script for: the fields Parse
// reads, in a layout that does not depend on perf's defaults for the
// event. Symbol offsets are left out (Parse would strip them).
const ScriptFields = "comm,pid,tid,time,period,event,ip,sym,dso"

// ScriptArgs returns the perf arguments Run uses for dataFile.
//
// --no-inline matters: without it perf resolves inlined frames through
// addr2line for every address, which on a DWARF recording of a release
// Relay is orders of magnitude slower, for the same stacks but for a
// handful of frame names.
func ScriptArgs(dataFile string) []string {
	return []string{"script", "-i", dataFile, "--no-inline", "-F", ScriptFields}
}

// Run runs `perf script` on a perf.data file (perfBin "" means "perf" on
// PATH) and parses its output as it streams, so memory does not grow with
// the output, which for a 30 s DWARF recording can be hundreds of MB. The
// command is killed when ctx ends, and Run then returns ctx's error. When
// perf fails, the error has perf's exit status and the first line of what
// it printed on stderr.
func Run(ctx context.Context, perfBin, dataFile string) (*Profile, error) {
	if perfBin == "" {
		perfBin = "perf"
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("profile: perf script -i %s: %w", dataFile, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(cctx, perfBin, ScriptArgs(dataFile)...)
	cmd.WaitDelay = 2 * time.Second
	stderr := &headBuffer{max: 16 << 10}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("profile: perf script: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("profile: perf script: %w", err)
	}
	p, perr := Parse(out)
	if perr != nil {
		cancel() // stop perf; its output is of no use
	}
	werr := cmd.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("profile: perf script -i %s: %w", dataFile, err)
	}
	var exitErr *exec.ExitError
	exited := errors.As(werr, &exitErr) && exitErr.ExitCode() >= 0 // not killed by us
	switch {
	case werr != nil && (perr == nil || exited):
		return nil, fmt.Errorf("profile: perf script -i %s: %w: %s", dataFile, werr, firstLine(stderr.String()))
	case perr != nil:
		return nil, fmt.Errorf("profile: perf script -i %s: %w", dataFile, perr)
	}
	return p, nil
}

// firstLine is the first line of perf's stderr that says something:
// perf often starts with "Error:" or a [ ] banner and puts the message
// on the next line.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == "Error:" || l == "Warning:" {
			continue
		}
		return l
	}
	return "(nothing on stderr)"
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (h *headBuffer) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - h.buf.Len(); room > 0 {
		h.buf.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}
