package relayproc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// ProbeVersion runs `bin --version` and returns the first line it prints,
// or "" when it fails or does not exit within timeout. The
// probe runs in its own process group, killed whole when it ends, when
// timeout passes or when ctx ends: a binary that ignores --version and
// keeps running, or leaves a child holding its output, cannot hold the
// run. The error is ctx's when ctx ended first. What the probe started
// that outlived it outside its group (a daemon, found by MarkerEnv) is
// ended and returned.
func ProbeVersion(ctx context.Context, bin string, timeout time.Duration) (string, []Stray, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out bytes.Buffer
	marker, err := newMarker()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.CommandContext(pctx, bin, "--version")
	cmd.Env = append(os.Environ(), MarkerEnv+"="+marker)
	cmd.Stdout = &limited{b: &out, n: 4 << 10}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Once the group is killed, stop waiting for its output.
	cmd.WaitDelay = 200 * time.Millisecond
	err = cmd.Start()
	var strays []Stray
	if err == nil {
		err = cmd.Wait()
		if errors.Is(err, exec.ErrWaitDelay) {
			err = nil // it exited 0; a child it left held the output
		}
		// What the probe left running (a child of a script that exited).
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		strays = endStrays(procfs.DefaultMountPoint, marker, killWait)
	}
	if ctx.Err() != nil {
		return "", strays, ctx.Err()
	}
	if err != nil {
		return "", strays, nil
	}
	line, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	return strings.TrimSpace(line), strays, nil
}

// limited keeps the first n bytes written to it and discards the rest.
type limited struct {
	b *bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
