package orchestrate

import (
	"context"
	"os"
	"os/exec"
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

// probeVersion returns the first line bin prints for --version, or "" when
// it prints nothing within two seconds. The report names each build's
// version, and says so when a build is the stand-in rather than Relay.
func probeVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}
