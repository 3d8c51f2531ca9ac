package relayproc

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MarkerEnv is the environment variable Start sets, to a value of its own
// for each process, in the process it starts. Every process that one
// starts inherits it unless it clears its environment, including a daemon
// that left the process group and the parent (setsid and a double fork):
// how Stop finds what Relay left running that no tree walk reaches.
const MarkerEnv = "RELAYLOAD_PROCESS"

// newMarker returns a value for MarkerEnv that no other process holds.
func newMarker() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(b[:])), nil
}

// Stray is a process that outlived the process that started it, outside
// its tree, found by its marker.
type Stray struct {
	PID     int
	Command string // its command line, shortened
}

func (s Stray) String() string { return fmt.Sprintf("pid %d (%s)", s.PID, s.Command) }

// marked lists the processes under the proc filesystem at mount whose
// environment holds MarkerEnv=marker, orchestrate itself left out. A
// process that exits while it is read, a zombie (whose environment reads
// empty) and one another user owns are left out.
func marked(mount, marker string) []Stray {
	ents, err := os.ReadDir(mount)
	if err != nil {
		return nil
	}
	want := []byte(MarkerEnv + "=" + marker + "\x00")
	self := os.Getpid()
	var out []Stray
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join(mount, e.Name(), "environ"))
		if err != nil || !(bytes.HasPrefix(env, want) || bytes.Contains(env, append([]byte{0}, want...))) {
			continue
		}
		out = append(out, Stray{PID: pid, Command: commandLine(filepath.Join(mount, e.Name(), "cmdline"))})
	}
	return out
}

// commandLine is a process's command line, at most 80 characters.
func commandLine(path string) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if s == "" {
		return "?"
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// endStrays ends every process holding marker: SIGTERM, then SIGKILL for
// those still there after wait. It returns the processes it found.
func endStrays(mount, marker string, wait time.Duration) []Stray {
	found := marked(mount, marker)
	if len(found) == 0 {
		return nil
	}
	for _, s := range found {
		_ = syscall.Kill(s.PID, syscall.SIGTERM)
	}
	deadline := time.Now().Add(wait)
	for {
		left := marked(mount, marker)
		if len(left) == 0 {
			return found
		}
		if time.Now().After(deadline) {
			for _, s := range left {
				_ = syscall.Kill(s.PID, syscall.SIGKILL)
			}
			return found
		}
		time.Sleep(treePoll)
	}
}
