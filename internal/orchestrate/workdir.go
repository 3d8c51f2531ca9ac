package orchestrate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// workDirPrefix begins the name of every run's work directory.
const workDirPrefix = "relayload-"

// ownerFile, in a run's work directory, names the process that made it:
// its pid and start time (clock ticks since boot), so that a pid reused by
// another process is not taken for the run.
const ownerFile = ".relayload-owner"

// makeWorkDir makes the run's work directory under parent (os.TempDir when
// empty). It first removes the work directories of earlier runs whose
// process is gone: a run killed with SIGKILL never runs its cleanup. Only
// directories marked with their owner are removed; a kept one (keep) is not
// marked. removed lists what was removed.
func makeWorkDir(parent string, keep bool) (dir string, removed []string, err error) {
	if parent == "" {
		parent = os.TempDir()
	}
	removed = removeStaleWorkDirs(parent)
	if dir, err = os.MkdirTemp(parent, workDirPrefix); err != nil {
		return "", removed, err
	}
	if keep {
		return dir, removed, nil
	}
	id, err := processID(os.Getpid())
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, ownerFile), []byte(id+"\n"), 0o644)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", removed, fmt.Errorf("work directory: %w", err)
	}
	return dir, removed, nil
}

// processID is "PID STARTTIME" of a live process.
func processID(pid int) (string, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return "", err
	}
	st, err := p.Stat()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d", pid, st.Starttime), nil
}

// removeStaleWorkDirs removes parent's work directories whose owner
// process no longer runs, and returns them.
func removeStaleWorkDirs(parent string) []string {
	dirs, _ := filepath.Glob(filepath.Join(parent, workDirPrefix+"*"))
	var removed []string
	for _, d := range dirs {
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // not a run's, kept, or its owner is still writing it
		}
		id := strings.TrimSpace(string(b))
		pid, _, ok := strings.Cut(id, " ")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || n <= 0 {
			continue
		}
		if now, err := processID(n); err == nil && now == id {
			continue // its run is still going
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			continue // cannot tell
		}
		if os.RemoveAll(d) == nil {
			removed = append(removed, d)
		}
	}
	return removed
}
