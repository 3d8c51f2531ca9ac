package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
)

// startWithStderr runs fake-upstream with args on a free loopback port and
// returns its base URL, when it printed it, its stderr as it comes, and
// stop, which ends it with SIGTERM and waits for it (also at the test's end).
func startWithStderr(t *testing.T, args ...string) (base string, listening time.Time, stderr *testutil.Output, stop func()) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"--listen", "127.0.0.1:0", "--projects", "1"}, args...)...)
	stdout, _ := cmd.StdoutPipe()
	stderr = new(testutil.Output)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no address line: %v; stderr %q", err, stderr.String())
	}
	listening = time.Now()
	var once sync.Once
	stop = func() { once.Do(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }) }
	t.Cleanup(stop)
	return "http://" + strings.TrimSpace(line), listening, stderr, stop
}

// controlState is what GET /control answers, in the fields these tests read.
type controlState struct {
	Latency map[string]struct{ Fixed string } `json:"latency"`
	Inject  []struct{ Status int }            `json:"inject"`
	Layers  []struct {
		Layer   string                            `json:"layer"`
		Latency map[string]struct{ Fixed string } `json:"latency"`
		Inject  []struct{ Status int }            `json:"inject"`
	} `json:"layers"`
}

func getControl(t *testing.T, base string) controlState {
	t.Helper()
	resp, err := http.Get(base + "/control")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c controlState
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c controlState) layerNames() []string {
	var names []string
	for _, l := range c.Layers {
		names = append(names, l.Layer)
	}
	return names
}

// TestTimedFaultKeepsControlFaults (issue 33, row 3): faults set through
// POST /control while a timed --fault is on survive its end, and GET
// /control shows each layer: the flags' (config), /control's and the timed
// fault's while it lasts. The timed fault used to restore what was in
// effect when it began, wiping /control's faults (GET /control → {}).
func TestTimedFaultKeepsControlFaults(t *testing.T) {
	const spec = "429-storm=6s@0s"
	base, _, stderr, _ := startWithStderr(t, "--latency", "live=1ms", "--fault", spec)
	if !stderr.WaitFor("fault "+spec+" begins", 10*time.Second) {
		t.Fatalf("the fault never began; stderr %q", stderr.String())
	}
	resp, err := http.Post(base+"/control", "application/json", strings.NewReader(`{"latency":{"outcomes":{"fixed":"2ms"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /control: %d", resp.StatusCode)
	}
	during := getControl(t, base)
	if strings.Contains(stderr.String(), "ends") {
		t.Fatalf("the fault ended before /control was read back; stderr %q", stderr.String())
	}
	if got := strings.Join(during.layerNames(), ","); got != "config,control,fault "+spec ||
		during.Latency["live"].Fixed != "1ms" || during.Latency["outcomes"].Fixed != "2ms" ||
		len(during.Inject) != 1 || during.Inject[0].Status != 429 {
		t.Errorf("during the fault GET /control = %+v, want every layer combined and layers config, control, fault %s", during, spec)
	}
	if !stderr.WaitFor("fault "+spec+" ends", 20*time.Second) {
		t.Fatalf("the fault never ended; stderr %q", stderr.String())
	}
	after := getControl(t, base)
	if got := strings.Join(after.layerNames(), ","); got != "config,control" ||
		after.Latency["live"].Fixed != "1ms" || after.Latency["outcomes"].Fixed != "2ms" || len(after.Inject) != 0 {
		t.Errorf("after the fault GET /control = %+v, want the flags' and /control's faults, layers config, control", after)
	}
}

// TestFaultsFileOutageKeepsItsEnd (issue 33, row 4): an outage from the
// --faults file ends when its duration has passed since the server
// started, whatever a timed --fault does meanwhile. Each change of the
// faults used to restart the outage's clock: a 3 s outage with a fault
// from 2 s to 5 s lasted until about 8 s.
func TestFaultsFileOutageKeepsItsEnd(t *testing.T) {
	file := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(file, []byte(`{"outage":{"mode":"unavailable","duration":"3s"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	base, listening, stderr, _ := startWithStderr(t, "--faults", file, "--fault", "errors=3s@2s")
	live := func() int {
		resp, err := http.Get(base + "/api/0/relays/live/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := live(); code != 503 {
		t.Fatalf("first answer %d: the outage is not in effect", code)
	}
	// The outage started before the address was printed: it must be over
	// 3 s after that, give or take a loaded machine.
	const bound = 5500 * time.Millisecond
	var over time.Duration
	for over == 0 {
		if live() == 200 {
			over = time.Since(listening)
		} else if time.Since(listening) > 12*time.Second {
			t.Fatalf("the outage still on after 12 s; stderr %q", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if over > bound {
		t.Errorf("the 3 s outage lasted %.1f s after listening, want under %.1f s", over.Seconds(), bound.Seconds())
	}
	// Nor does the timed fault's end bring it back.
	if !stderr.WaitFor("fault errors=3s@2s ends", 20*time.Second) {
		t.Fatalf("the fault never ended; stderr %q", stderr.String())
	}
	if code := live(); code != 200 {
		t.Errorf("after the timed fault ended: %d, want 200", code)
	}
}
