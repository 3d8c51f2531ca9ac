package relayproc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// running is whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// TestStopEndsDaemons starts a process that daemonizes (a child in a
// session of its own that outlives it, reparented away from its tree) and
// exits: Stop finds the daemon by its marker, ends it and names it.
// Before, it kept running and nothing said so.
func TestStopEndsDaemons(t *testing.T) {
	dir := t.TempDir()
	// Each script exits once its daemon has left the process group: the
	// daemon writes its pid to $PIDFILE from its own session.
	for _, tc := range []struct {
		name, script string
	}{
		{"setsid", `setsid sh -c 'echo $$ >"$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; exec sleep 600' </dev/null >/dev/null 2>&1 &`},
		// A double fork: the daemon's parent exits too.
		{"double fork", `(setsid sh -c 'sleep 600 & echo $! >"$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"' </dev/null >/dev/null 2>&1 &)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			bin := filepath.Join(dir, name+".sh")
			pidfile := filepath.Join(dir, name+".pid")
			script := "#!/bin/sh\n" + tc.script + "\nwhile [ ! -e \"$PIDFILE\" ]; do sleep 0.05; done\nexit 0\n"
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			p, err := Start(Spec{Bin: bin, LogPath: filepath.Join(dir, name+".log"), Env: []string{"PIDFILE=" + pidfile}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, s := range marked("/proc", p.marker) {
					_ = syscall.Kill(s.PID, syscall.SIGKILL)
				}
			})
			<-p.Done()
			b, err := os.ReadFile(pidfile)
			if err != nil {
				t.Fatalf("the script exited without its daemon: %v\n%s", err, p.LogTail(10))
			}
			daemon, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || !running(daemon) {
				t.Fatalf("daemon pid %q (%v): not running", b, err)
			}
			res := p.Stop(time.Second)
			found := false
			for _, s := range res.Strays {
				found = found || s.PID == daemon
			}
			if !found {
				t.Errorf("strays %v, want pid %d", res.Strays, daemon)
			}
			if running(daemon) {
				t.Errorf("daemon %d still runs after Stop", daemon)
			}
			if m := marked("/proc", p.marker); len(m) != 0 {
				t.Errorf("still running after Stop: %v", m)
			}
		})
	}
}

// TestProbeVersionEndsDaemon asks a binary that daemonizes even when asked
// for its version: the probe ends the daemon and returns it.
func TestProbeVersionEndsDaemon(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "daemon.pid")
	bin := filepath.Join(dir, "daemonize.sh")
	script := "#!/bin/sh\nPIDFILE=" + pidfile + "\nexport PIDFILE\n" +
		`setsid sh -c 'echo $$ >"$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; exec sleep 600' </dev/null >/dev/null 2>&1 &` +
		"\nwhile [ ! -e \"$PIDFILE\" ]; do sleep 0.05; done\necho 'relay 1.0'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	v, strays, err := ProbeVersion(t.Context(), bin, 30*time.Second)
	b, _ := os.ReadFile(pidfile)
	daemon, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() {
		if daemon > 0 {
			_ = syscall.Kill(daemon, syscall.SIGKILL)
		}
	})
	if err != nil || v != "relay 1.0" || daemon == 0 {
		t.Fatalf("version %q, %v, daemon %d", v, err, daemon)
	}
	if len(strays) != 1 || strays[0].PID != daemon {
		t.Errorf("strays %v, want pid %d", strays, daemon)
	}
	if running(daemon) {
		t.Errorf("daemon %d still runs after the probe", daemon)
	}
}
