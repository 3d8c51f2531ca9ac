package orchestrate

import (
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/orchestrate/relayproc"
)

// hostInfo describes the machine for the report.
func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	if m, err := relayproc.CPUModel(); err == nil {
		h.CPUModel = m
	}
	return h
}

// versionTimeout bounds asking a build for its version: Relay answers at
// once.
const versionTimeout = 2 * time.Second
