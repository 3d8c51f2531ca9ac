// Package relayproc starts, watches, samples and stops the process under
// test (Relay or a stand-in) for orchestrate.
//
// The child runs in its own process group so that a terminal's Ctrl-C
// reaches only orchestrate, which then stops the child deliberately, and so
// that Stop can signal everything the child spawned. Output goes to a log
// file whose tail is shown when something goes wrong.
package relayproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Spec says how to start the process.
type Spec struct {
	// Bin is the executable; Args follow it.
	Bin  string
	Args []string
	// CPUs, when set, runs the process under `taskset -c CPUs`; taskset execs
	// Bin, so the PID is Bin's and every thread it creates inherits the mask.
	CPUs string
	// LogPath receives the process's stdout and stderr, through a pipe:
	// at most LogMax bytes of it (DefaultLogMax if 0), the newest, with
	// the part before in LogPath.1.
	LogPath string
	LogMax  int64
	// Env is added to the environment inherited from orchestrate.
	Env []string
}

// Process is a started child.
type Process struct {
	cmd     *exec.Cmd
	log     *logWriter
	pipe    *logPipe
	logPath string
	started time.Time
	done    chan struct{} // closed when the process has been reaped

	marker string // MarkerEnv's value in the process and what it starts

	mu       sync.Mutex
	waitErr  error
	state    *os.ProcessState
	outlived int // members of the tree alive when the process was reaped
}

// Start starts the process described by spec.
func Start(spec Spec) (*Process, error) {
	if spec.Bin == "" {
		return nil, errors.New("relayproc: no binary given")
	}
	bin, args := spec.Bin, spec.Args
	if spec.CPUs != "" {
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("relayproc: pinning to CPUs %s needs taskset (util-linux): %w", spec.CPUs, err)
		}
		args = append([]string{"-c", spec.CPUs, bin}, args...)
		bin = ts
	}
	logw, err := openLog(spec.LogPath, spec.LogMax)
	if err != nil {
		return nil, fmt.Errorf("relayproc: log file: %w", err)
	}
	pipe, err := newLogPipe()
	if err != nil {
		logw.close()
		return nil, fmt.Errorf("relayproc: log pipe: %w", err)
	}
	marker, err := newMarker()
	if err != nil {
		logw.close()
		pipe.r.Close()
		pipe.W.Close()
		return nil, fmt.Errorf("relayproc: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = pipe.W
	cmd.Stderr = pipe.W
	cmd.Env = append(append(os.Environ(), spec.Env...), MarkerEnv+"="+marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If orchestrate dies without cleaning up (SIGKILL), the kernel
		// kills the child too, so no orphan keeps running.
		Pdeathsig: syscall.SIGKILL,
	}
	err = cmd.Start()
	pipe.W.Close() // the child holds it now
	if err != nil {
		pipe.r.Close()
		logw.close()
		return nil, fmt.Errorf("relayproc: starting %s: %w", spec.Bin, err)
	}
	go pipe.copy(logw)
	p := &Process{cmd: cmd, log: logw, pipe: pipe, logPath: spec.LogPath, marker: marker, started: time.Now(), done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		outlived := len(p.liveTree())
		// What the process said before it exited is in the log once Done
		// is closed, unless something it started still holds the output.
		t := time.NewTimer(logDrain)
		select {
		case <-pipe.done:
		case <-t.C:
		}
		t.Stop()
		p.mu.Lock()
		p.waitErr, p.state, p.outlived = err, cmd.ProcessState, outlived
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// logDrain bounds the wait for the log's last output after the process
// exited, while something it started still holds the output open.
const logDrain = time.Second

// LogErr is the first error writing the process's log (a full disk, a
// file-size limit), or nil.
func (p *Process) LogErr() error { return p.log.Err() }

// LogDiscarded is how many of the log's oldest bytes were dropped to keep
// it within Spec.LogMax.
func (p *Process) LogDiscarded() int64 { return p.log.Discarded() }

// PID is the child's process id (also its process group id).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and how.
func (p *Process) Exited() (bool, string) {
	select {
	case <-p.done:
		return true, p.exitDescription()
	default:
		return false, ""
	}
}

func (p *Process) exitDescription() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return describeState(p.state, p.waitErr)
}

func describeState(st *os.ProcessState, err error) string {
	if st == nil {
		if err != nil {
			return err.Error()
		}
		return "unknown exit"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exited with status %d", st.ExitCode())
}

// ErrExited is returned (wrapped) when the process ended while it was
// expected to run.
var ErrExited = errors.New("process exited")

// WaitReady polls url every interval until it answers 200, the process
// exits, timeout passes or ctx ends. It returns how long readiness took.
func (p *Process) WaitReady(ctx context.Context, url string, interval, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: interval * 4}
	if client.Timeout < 200*time.Millisecond {
		client.Timeout = 200 * time.Millisecond
	}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := "no answer yet"
	for {
		if ok, how := p.Exited(); ok {
			return 0, fmt.Errorf("%w before becoming ready: %s", ErrExited, how)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(p.started), nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
		} else if ctx.Err() == nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			if ok, how := p.Exited(); ok {
				return 0, fmt.Errorf("%w before becoming ready: %s", ErrExited, how)
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return 0, fmt.Errorf("not ready after %s (last answer: %s)", timeout, last)
			}
			return 0, ctx.Err()
		case <-p.done:
		case <-tick.C:
		}
	}
}

// StopResult describes how the process ended.
type StopResult struct {
	// Took is the time from SIGTERM to exit (0 if it had already exited).
	Took time.Duration
	// Killed is true when SIGKILL was needed.
	Killed bool
	// AlreadyExited is true when the process was gone before Stop.
	AlreadyExited bool
	// Exit describes the exit ("exited with status 0", "killed by signal …").
	Exit string
	// MaxRSS is getrusage's peak resident set size, in bytes. Linux carries
	// the high-water mark of the pre-exec memory over exec, and Go starts
	// children with vfork semantics (sharing orchestrate's memory until exec),
	// so MaxRSS is max(child's VmHWM, orchestrate's RSS at start): a check on
	// VmHWM that is exact only when the child outgrows orchestrate.
	MaxRSS uint64
	// UserTime and SystemTime are the process's exact CPU totals.
	UserTime, SystemTime time.Duration
	// Outlived is how many members of the process's tree were still
	// running when the process itself had exited (they were then killed):
	// MaxRSS, UserTime and SystemTime leave them out.
	Outlived int
	// Strays are the processes it started that were still running outside
	// its tree once the tree was gone (a daemon: setsid, a double fork),
	// found by MarkerEnv; Stop ended them.
	Strays []Stray
}

// Stop sends SIGTERM to the process's tree (its process group, and any
// descendant that left the group), waits up to grace until every member
// has exited, then sends SIGKILL and waits for that. It always reaps the
// process. A wrapper script that runs Relay as its child (without exec)
// dies on SIGTERM at once while Relay shuts down: the wait is Relay's.
func (p *Process) Stop(grace time.Duration) StopResult {
	var res StopResult
	select {
	case <-p.done:
		res.AlreadyExited = true
	default:
		start := time.Now()
		p.signalTree(syscall.SIGTERM)
		if !p.waitTree(start.Add(grace)) {
			res.Killed = true
			p.signalTree(syscall.SIGKILL)
			<-p.done
		}
		res.Took = time.Since(start)
	}
	// The tree may still hold members if the leader exited first.
	p.signalTree(syscall.SIGKILL)
	p.waitTree(time.Now().Add(killWait))
	res.Strays = endStrays(procfs.DefaultMountPoint, p.marker, killWait)
	// Everything that held the output is gone, or held it past every
	// bound: stop copying either way.
	t := time.NewTimer(logDrain)
	select {
	case <-p.pipe.done:
	case <-t.C:
		_ = p.pipe.r.Close()
		<-p.pipe.done
	}
	t.Stop()
	p.mu.Lock()
	st, err := p.state, p.waitErr
	res.Outlived = p.outlived
	p.mu.Unlock()
	res.Exit = describeState(st, err)
	if st != nil {
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			res.MaxRSS = uint64(ru.Maxrss) * 1024 // Linux reports KiB
		}
		res.UserTime, res.SystemTime = st.UserTime(), st.SystemTime()
	}
	return res
}

// killWait bounds the wait for a tree's members to be gone after SIGKILL.
const killWait = 2 * time.Second

// treePoll is how often Stop looks whether the tree's members are gone.
const treePoll = 20 * time.Millisecond

// signalTree sends sig to the process group and to each member of the
// tree outside it (once each: Relay exits at once on a second SIGTERM).
func (p *Process) signalTree(sig syscall.Signal) {
	_ = syscall.Kill(-p.PID(), sig)
	for _, m := range p.liveTree() {
		if m.pgrp != p.PID() {
			_ = syscall.Kill(m.pid, sig)
		}
	}
}

// liveTree is the tree's members that have not exited, the process itself
// included while it runs.
func (p *Process) liveTree() []treeStat {
	fs, err := procfs.NewFS(procfs.DefaultMountPoint)
	if err != nil {
		return nil
	}
	return liveMembers(fs, p.PID())
}

// waitTree waits until the process has been reaped and no other member
// of its tree runs, or until deadline; it reports whether they are gone.
func (p *Process) waitTree(deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return false
	}
	tick := time.NewTicker(treePoll)
	defer tick.Stop()
	for len(p.liveTree()) > 0 {
		select {
		case <-t.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return LogTail(p.logPath, n) }

// LogTail returns the last n lines of the file at path (at most 64 KiB
// are read), taking the lines before from path.1 (a capped log's older
// part) when path holds fewer.
func LogTail(path string, n int) string {
	lines := tailLines(path, n)
	if len(lines) < n {
		lines = append(tailLines(path+".1", n-len(lines)), lines...)
	}
	return strings.Join(lines, "\n")
}

func tailLines(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const max = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, max)) // a device (/dev/full) never ends
	if len(b) == 0 {
		return nil
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
