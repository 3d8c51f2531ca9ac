package main

import (
	"bufio"
	"encoding/json"
	"net/http"
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
// it serves, and SIGINT or SIGTERM shut it down gracefully: a request in
// flight (held by an injected latency) still gets its answer, the process
// prints its final stats and exits 0.
func TestProcess(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-upstream")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--projects", "3", "--latency", "live=400ms")
			stdout, _ := cmd.StdoutPipe()
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
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
			if len(ps) != 3 {
				t.Fatalf("projects %v", ps)
			}
			if dsn, _ := ps[0]["dsn"].(string); !strings.HasPrefix(dsn, "http://") {
				t.Fatalf("projects %v", ps)
			}
			// A request in flight when the signal arrives.
			inflight := make(chan int, 1)
			go func() {
				resp, err := http.Get("http://" + addr + "/api/0/relays/live/")
				if err != nil {
					inflight <- -1
					return
				}
				resp.Body.Close()
				inflight <- resp.StatusCode
			}()
			time.Sleep(150 * time.Millisecond)
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("exit: %v\n%s", err, stderr.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no exit after the signal")
			}
			if code := <-inflight; code != 200 {
				t.Errorf("in-flight request got %d, want 200 (graceful shutdown)", code)
			}
			if !strings.Contains(stderr.String(), "shut down; final stats: {") || !strings.Contains(stderr.String(), `"live":{"200":1}`) {
				t.Errorf("stderr %q lacks the final stats with the in-flight request", stderr.String())
			}
		})
	}
}

// TestSignalRightAfterAddress: a signal sent as soon as the address line is
// read still ends in a clean exit (signals are caught before the address is
// printed; before that fix SIGTERM here killed the process).
func TestSignalRightAfterAddress(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-upstream")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for i := 0; i < 5; i++ {
		cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--projects", "1")
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("run %d: exit %v", i, err)
		}
	}
}

// TestFaultFlags: faults given as flags are in effect from the start and
// shown by GET /control.
func TestFaultFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-upstream")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--projects", "1", "--seed", "3",
		"--inject", "live=429:7@1", "--latency", "envelope=1ms-2ms+exp:1ms", "--global-pending", "--quota", "error:0")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + strings.TrimSpace(line)
	resp, err := http.Get(base + "/api/0/relays/live/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || resp.Header.Get("X-Sentry-Rate-Limits") != "7::organization:generic" {
		t.Errorf("live: %d %v", resp.StatusCode, resp.Header)
	}
	resp, err = http.Get(base + "/control")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Latency map[string]struct {
			Min, Max, Mean string
		} `json:"latency"`
		Inject []struct {
			Route       string  `json:"route"`
			Status      int     `json:"status"`
			Probability float64 `json:"probability"`
			RetryAfter  int     `json:"retry_after"`
		} `json:"inject"`
		GlobalPending bool `json:"global_pending"`
	}
	json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if l := f.Latency["envelope"]; l.Min != "1ms" || l.Max != "2ms" || l.Mean != "1ms" || !f.GlobalPending ||
		len(f.Inject) != 1 || f.Inject[0].Route != "live" || f.Inject[0].Status != 429 || f.Inject[0].Probability != 1 || f.Inject[0].RetryAfter != 7 {
		t.Errorf("GET /control = %+v", f)
	}
}
