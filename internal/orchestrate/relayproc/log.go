package relayproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// DefaultLogMax is the most of a process's output kept on disk when
// Spec.LogMax is 0: Relay at a debug level can log enough to fill a disk
// over a long run.
const DefaultLogMax = 64 << 20

// logPipeSize is the pipe buffer asked for between the process and its
// log: a process blocks on a full pipe, and a larger buffer rides out a
// moment in which orchestrate gets no CPU to copy it.
const logPipeSize = 1 << 20

// logWriter writes a process's output to a file, keeping at most max bytes
// on disk and the newest of them: once the file holds half of max it is
// renamed to path.1 (replacing the one before) and a new file is begun.
// Only a regular file is rotated. The first write error (a full disk, a
// file-size limit) is kept for Err; after it the output is counted and
// discarded, so that the process never blocks on its log.
type logWriter struct {
	path string
	max  int64

	mu        sync.Mutex
	f         *os.File
	size      int64
	rotate    bool
	err       error
	lost      int64 // bytes not written after an error
	discarded int64 // bytes rotated away
}

func openLog(path string, max int64) (*logWriter, error) {
	if max <= 0 {
		max = DefaultLogMax
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	w := &logWriter{path: path, max: max, f: f}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		w.rotate = true
	}
	return w, nil
}

// Write never fails: an error is kept for Err.
func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 && w.err == nil {
		chunk := p
		if w.rotate {
			room := w.max/2 - w.size
			if room <= 0 {
				w.rotateLocked()
				continue
			}
			chunk = p[:min(int64(len(p)), room)]
		}
		m, err := w.f.Write(chunk)
		w.size += int64(m)
		p = p[m:]
		if err != nil {
			w.err = err
		}
	}
	w.lost += int64(len(p))
	return n, nil
}

func (w *logWriter) rotateLocked() {
	old := w.path + ".1"
	if st, err := os.Stat(old); err == nil {
		w.discarded += st.Size()
	}
	if err := os.Rename(w.path, old); err != nil {
		w.err = fmt.Errorf("rotating the log: %w", err)
		return
	}
	_ = w.f.Close()
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		w.err = fmt.Errorf("rotating the log: %w", err)
		w.f = nil
		return
	}
	w.f, w.size = f, 0
}

// Err is the first error writing the log, with how much output it lost.
func (w *logWriter) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil
	}
	return fmt.Errorf("%w (%d bytes of output lost)", w.err, w.lost)
}

// Discarded is how many of the oldest bytes the cap dropped.
func (w *logWriter) Discarded() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.discarded
}

func (w *logWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		_ = w.f.Close()
	}
}

// logPipe is the write end to give a process as its stdout and stderr, and
// a copier that moves what arrives into w until every holder of the write
// end has closed it, or close is called.
type logPipe struct {
	r, W *os.File
	done chan struct{}
}

func newLogPipe() (*logPipe, error) {
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// Best effort: the default buffer works too, only smaller. (Not
	// through Fd, which would make reads blocking and close unable to
	// end them.)
	if rc, err := r.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, logPipeSize) })
	}
	return &logPipe{r: r, W: wr, done: make(chan struct{})}, nil
}

// copy runs until the pipe's writers are all gone; then w is closed.
func (lp *logPipe) copy(w *logWriter) {
	defer close(lp.done)
	defer w.close()
	buf := make([]byte, 64<<10)
	for {
		n, err := lp.r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				w.mu.Lock()
				if w.err == nil {
					w.err = fmt.Errorf("reading the process's output: %w", err)
				}
				w.mu.Unlock()
			}
			_ = lp.r.Close()
			return
		}
	}
}
