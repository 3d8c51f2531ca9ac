package orchestrate

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// hostInfo describes the machine for the report.
func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
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
