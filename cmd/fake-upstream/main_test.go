package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus"},
		{"--projects", "0"},
		{"--pending-for", "30s"},
		{"--quota", "error:x"},
		{"--inject", "envelope=200@1"},
		{"--latency", "envelope=fast"},
		{"--outage", "explode:1s"},
		{"--max-decoded-bytes", "lots"},
		{"--verify-envelope-every", "0"},
		{"--relay-credentials", "/nonexistent/credentials.json"},
		{"stray"},
	} {
		var out, errb strings.Builder
		err := run(args, &out, &errb)
		if _, ok := err.(usageError); !ok {
			t.Errorf("%v: err %v, want a usage error", args, err)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: multi-line error %q", args, err)
		}
	}
}

func TestHelp(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"--help"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"managed mode", "-listen", "-verify-signatures", "-relay-credentials", "-pending-for", "-quota", "-inbound-filters", "-inject", "-latency", "-outage", "-max-decoded-bytes", "envelope"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestProcess runs the real binary: the first stdout line is the address,
// it serves, and SIGTERM shuts it down cleanly.
func TestProcess(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-upstream")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--projects", "3")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSpace(line)
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("first line %q", line)
	}
	resp, err := http.Get("http://" + addr + "/projects")
	if err != nil {
		t.Fatal(err)
	}
	var ps []map[string]any
	json.NewDecoder(resp.Body).Decode(&ps)
	resp.Body.Close()
	if len(ps) != 3 || !strings.HasPrefix(ps[0]["dsn"].(string), "http://") {
		t.Fatalf("projects %v", ps)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("no exit after SIGTERM")
	}
}
