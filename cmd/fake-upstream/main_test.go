package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/capture"
	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// binary is fake-upstream, built once per test binary.
func binary(t testing.TB) string {
	return testutil.Build(t, "github.com/relayload/relayload/cmd/fake-upstream")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus"},
		{"--projects", "0"},
		{"--pending-for", "30s"},
		{"--quota", "error:x"},
		{"--inject", "envelope=200@1"},
		{"--latency", "envelope=fast"},
		{"--fault", "explode=1s"},
		{"--fault", "outage=2h"},
		{"--fault", "outage=1s:melt"},
		{"--max-decoded-bytes", "lots"},
		{"--quota", "errors:0"}, // blast's kind, not Relay's data category
		{"--http-server", "fasthttp"},
		{"--relay-credentials", "/nonexistent/credentials.json"},
		{"--shutdown-timeout", "5"},
		{"--listen", "nonsense"},
		{"--listen", "127.0.0.1:99999"},
		{"--control-from", "10.0.0.0/33"},
		{"--control-from", "nonsense"},
		{"--control-from", "10.0.0.0/8,"},
		{"--control-from", "127.0.0.1/8", "--control-from", ""},
		{"stray"},
	} {
		var out, errb strings.Builder
		code := cli.Exit("fake-upstream", run(args, &out, &errb), &errb, nil)
		lines := strings.Split(strings.TrimRight(errb.String(), "\n"), "\n")
		if code != cli.Usage || len(lines) != 1 || !strings.HasPrefix(lines[0], "fake-upstream: ") ||
			!strings.HasSuffix(lines[0], " (see --help)") || strings.HasPrefix(lines[0], "fake-upstream: fake-upstream") {
			t.Errorf("%v: exit %d, stderr %q: want exit 2 and one line pointing to --help", args, code, errb.String())
		}
	}
}

func TestHelp(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"--help"}, &out, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{"managed mode", "-listen", "-verify-signatures", "-relay-credentials", "-pending-for", "-quota", "-inbound-filters", "-inject", "-latency", "-fault", "outage=10s[:refuse|hang|unavailable]", "-max-decoded-bytes", "envelope", "Exit status", "-control-from", "not loopback", "upstream/README.md", "Examples:", "Faults:", "Route names for --latency and --inject: register_challenge", "--capture DIR", "--capture-max N[,SIZE]", "--capture-every N", "Capture"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// TestTimedFault: --fault, in orchestrate's syntax, begins at its start
// after listening, adds to the faults in effect and ends after its
// duration, leaving them as they were. A loaded machine may hold the test
// back past a short storm before it posts: an attempt that saw no 429
// while the machine took a quarter of the storm or more cannot tell, and
// is tried again with a storm three times as long.
func TestTimedFault(t *testing.T) {
	for _, storm := range []time.Duration{time.Second, 3 * time.Second, 9 * time.Second} {
		if timedFault(t, storm) {
			return
		}
	}
	t.Fatal("no 429 seen during a storm of 1 s, 3 s or 9 s, each time on a machine too loaded to tell")
}

// timedFault is one attempt of TestTimedFault with a 429 storm of the
// given length; it reports false when it could not tell.
func timedFault(t *testing.T, storm time.Duration) bool {
	t.Helper()
	spec := fmt.Sprintf("429-storm=%s@0s", storm)
	stalls := testutil.StartStalls()
	cmd := exec.Command(binary(t), "--listen", "127.0.0.1:0", "--projects", "1", "--latency", "live=1ms", "--fault", spec)
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() // on a failure before the end
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + strings.TrimSpace(line)
	post := func() int {
		resp, err := http.Post(base+"/api/1/envelope/", "application/x-sentry-envelope", strings.NewReader("{}\n"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	stormSeen := testutil.Eventually(storm, func() bool { return post() == 429 })
	if lost := stalls.Stop(); !stormSeen {
		if lost >= storm/4 {
			t.Logf("no 429 during a %s storm, %s lost to the machine: trying a longer one", storm, lost)
			cmd.Process.Kill()
			cmd.Wait()
			return false
		}
		t.Fatalf("no 429 during the %s storm (%s lost to the machine)", storm, lost)
	}
	// The deadline only tells a storm that ends from one that does not.
	if !testutil.Eventually(storm+30*time.Second, func() bool { return post() != 429 }) {
		t.Fatal("the storm did not end")
	}
	resp, err := http.Get(base + "/control")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Latency map[string]struct{ Fixed string } `json:"latency"`
		Inject  []any                             `json:"inject"`
	}
	json.NewDecoder(resp.Body).Decode(&f)
	resp.Body.Close()
	if f.Latency["live"].Fixed != "1ms" || len(f.Inject) != 0 {
		t.Errorf("after the fault: %+v, want the --latency fault alone", f)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait() // stderr is complete (and no longer written) once it exited
	if !strings.Contains(stderr.String(), "fault "+spec+" begins ("+storm.String()+")") || !strings.Contains(stderr.String(), "fault "+spec+" ends") {
		t.Errorf("stderr %q", stderr.String())
	}
	return true
}

// TestProcess runs the real binary: the first stdout line is the address,
// it serves, and SIGINT or SIGTERM shut it down gracefully: a request in
// flight (held by an injected latency) still gets its answer, the process
// prints its final stats and exits 0. A loaded machine may hold the test
// back until the held request was answered, before it saw it in flight:
// that attempt cannot tell, and is tried again with ten times the latency.
func TestProcess(t *testing.T) {
	bin := binary(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			for _, latency := range []time.Duration{400 * time.Millisecond, 4 * time.Second} {
				if processSignalled(t, bin, sig, latency) {
					return
				}
			}
			t.Fatal("the live request was answered before it showed in /stats in_flight, with 400ms and 4s of latency")
		})
	}
}

// processSignalled is one attempt of TestProcess with the live route held
// for latency; it reports false when the request was answered before the
// test saw it in flight.
func processSignalled(t *testing.T, bin string, sig syscall.Signal, latency time.Duration) bool {
	t.Helper()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--projects", "3", "--latency", "live="+latency.String())
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
	// Signal once the server is handling it (the injected latency
	// holds it), unless it was answered first.
	inFlight := false
	testutil.Eventually(30*time.Second, func() bool {
		if len(inflight) > 0 {
			return true // answered before it was seen
		}
		var st struct {
			InFlight int64 `json:"in_flight"`
		}
		resp, err := http.Get("http://" + addr + "/stats")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		inFlight = json.NewDecoder(resp.Body).Decode(&st) == nil && st.InFlight == 1
		return inFlight
	})
	if !inFlight {
		if len(inflight) > 0 {
			t.Logf("the live request was answered before it showed in flight (%s of latency)", latency)
			cmd.Process.Kill()
			cmd.Wait()
			return false
		}
		t.Fatal("the live request never showed in /stats in_flight")
	}
	cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second): // only tells an exit from none
		t.Fatal("no exit after the signal")
	}
	if code := <-inflight; code != 200 {
		t.Errorf("in-flight request got %d, want 200 (graceful shutdown)", code)
	}
	if !strings.Contains(stderr.String(), "shut down; final stats: {") || !strings.Contains(stderr.String(), `"live":{"200":1}`) {
		t.Errorf("stderr %q lacks the final stats with the in-flight request", stderr.String())
	}
	if strings.Contains(stderr.String(), "warning") {
		t.Errorf("stderr %q: a warning for a loopback address", stderr.String())
	}
	return true
}

// TestSignalRightAfterAddress: a signal sent as soon as the address line is
// read still ends in a clean exit (signals are caught before the address is
// printed; before that fix SIGTERM here killed the process).
func TestSignalRightAfterAddress(t *testing.T) {
	bin := binary(t)
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
	bin := binary(t)
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

// startProcess runs fake-upstream with args on a free loopback port and
// returns its base URL and its stderr (complete once the process exited);
// the process is stopped when the test ends.
func startProcess(t *testing.T, args ...string) (base string, stderr *strings.Builder) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"--listen", "127.0.0.1:0", "--projects", "1"}, args...)...)
	stdout, _ := cmd.StdoutPipe()
	stderr = new(strings.Builder)
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
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	return "http://" + strings.TrimSpace(line), stderr
}

// TestAbuseControlFrom: /control and /stats/reset answer only the clients
// --control-from allows (loopback by default). Only loopback is used: the
// allowed set is made to exclude 127.0.0.1, and a loopback client must then
// be refused with 403 {"detail"}, counted, while /stats still answers.
func TestAbuseControlFrom(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"default: loopback", nil, 200},
		{"other network only", []string{"--control-from", "10.0.0.0/8"}, 403},
		{"comma list and repeated", []string{"--control-from", "10.0.0.0/8,192.168.0.0/16", "--control-from", "127.0.0.1/32"}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, _ := startProcess(t, c.args...)
			for _, r := range []struct{ method, path string }{{"GET", "/control"}, {"POST", "/control"}, {"POST", "/stats/reset"}} {
				body := io.Reader(nil)
				if r.path == "/control" && r.method == "POST" {
					body = strings.NewReader("{}")
				}
				req, _ := http.NewRequest(r.method, base+r.path, body)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var e struct{ Detail string }
				json.NewDecoder(resp.Body).Decode(&e)
				resp.Body.Close()
				if resp.StatusCode != c.want || c.want == 403 && !strings.Contains(e.Detail, "--control-from") {
					t.Errorf("%s %s: %d %q, want %d", r.method, r.path, resp.StatusCode, e.Detail, c.want)
				}
			}
			resp, err := http.Get(base + "/stats")
			if err != nil {
				t.Fatal(err)
			}
			var st struct{ Errors map[string]int64 }
			json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if wantN := map[int]int64{200: 0, 403: 3}[c.want]; resp.StatusCode != 200 || st.Errors["control_forbidden"] != wantN {
				t.Errorf("/stats: %d, errors %v: want control_forbidden %d", resp.StatusCode, st.Errors, wantN)
			}
		})
	}
}

// TestHelpGroups: --help lists every flag once, in a group, with examples.
func TestHelpGroups(t *testing.T) {
	var o options
	fs := o.flagSet()
	if err := help().Check(fs); err != nil {
		t.Fatal(err)
	}
}

// TestCaptureBadFlags: bad capture flags are one line and exit 2, naming
// the flag, and leave no capture behind.
func TestCaptureBadFlags(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, nil, 0o644)
	old := filepath.Join(tmp, "old")
	os.Mkdir(old, 0o755)
	os.WriteFile(filepath.Join(old, capture.ManifestName), nil, 0o644)
	fresh := filepath.Join(tmp, "fresh")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--capture", fresh, "--capture-max", "0"}, "--capture-max: capture bound \"0\""},
		{[]string{"--capture", fresh, "--capture-max", "lots"}, "--capture-max"},
		{[]string{"--capture", fresh, "--capture-max", "10,"}, "--capture-max"},
		{[]string{"--capture", fresh, "--capture-max", "10,0"}, "--capture-max"},
		{[]string{"--capture", fresh, "--capture-every", "0"}, "--capture-every 0: want 1 or more"},
		{[]string{"--capture", fresh, "--capture-every", "x"}, "--capture-every"},
		{[]string{"--capture-max", "10"}, "need --capture DIR"},
		{[]string{"--capture-every", "2"}, "need --capture DIR"},
		{[]string{"--capture", file}, "--capture: " + file + " is a file"},
		{[]string{"--capture", old}, "--capture: " + old + " already holds a capture"},
	} {
		var out, errb strings.Builder
		code := cli.Exit("fake-upstream", run(c.args, &out, &errb), &errb, configFlags)
		lines := strings.Split(strings.TrimRight(errb.String(), "\n"), "\n")
		if code != cli.Usage || len(lines) != 1 || !strings.Contains(lines[0], c.says) || !strings.HasSuffix(lines[0], " (see --help)") {
			t.Errorf("%v: exit %d, stderr %q: want exit 2 and one line with %q", c.args, code, errb.String(), c.says)
		}
	}
	if _, err := os.Stat(filepath.Join(fresh, capture.ManifestName)); err == nil {
		t.Error("a refused command line left a manifest")
	}
}

// TestCaptureProcess: the real binary with --capture keeps the envelopes
// an SDK sends it with a DSN from /projects, shows the counts in /stats,
// and on SIGTERM closes the capture and sums it up in one stderr line.
func TestCaptureProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "captured")
	cmd := exec.Command(binary(t), "--listen", "127.0.0.1:0", "--projects", "2", "--capture", dir, "--capture-max", "3,1MiB", "--capture-every", "2")
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() // on a failure before the end
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + strings.TrimSpace(line)
	resp, err := http.Get(base + "/projects")
	if err != nil {
		t.Fatal(err)
	}
	var ps []struct {
		ID        int64  `json:"id"`
		PublicKey string `json:"public_key"`
		DSN       string `json:"dsn"`
	}
	json.NewDecoder(resp.Body).Decode(&ps)
	resp.Body.Close()
	if len(ps) != 2 {
		t.Fatalf("projects %+v", ps)
	}
	var sent [][]byte
	for i := range 10 {
		p := ps[i%2]
		raw := []byte(fmt.Sprintf("{\"dsn\":%q}\n{\"type\":\"event\"}\n{\"message\":\"%d\"}\n", p.DSN, i))
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(raw)
		zw.Close()
		req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/%d/envelope/", base, p.ID), &gz)
		req.Header.Set("X-Sentry-Auth", "Sentry sentry_key="+p.PublicKey+", sentry_version=7")
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("envelope %d: %s", i, resp.Status)
		}
		sent = append(sent, raw)
	}
	resp, err = http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Capture capture.Stats }
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	// Every 2: envelopes 0, 2, 4 are kept, 6 and 8 are over the bound.
	if c := st.Capture; c.Kept != 3 || c.SkippedEvery != 5 || c.SkippedMax != 2 || c.Errors != 0 {
		t.Errorf("/stats capture %+v", c)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit %v; stderr %s", err, stderr.String())
	}
	last := strings.TrimSpace(stderr.String())
	last = last[strings.LastIndexByte(last, '\n')+1:]
	wantLine := fmt.Sprintf("fake-upstream: kept 3 envelopes (%d B) in %s, skipped 7 (2 over the bounds, 5 thinned out)", len(sent[0])+len(sent[2])+len(sent[4]), dir)
	if last != wantLine {
		t.Errorf("last stderr line %q\nwant %q", last, wantLine)
	}
	entries, err := capture.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Fatalf("%d manifest entries, want 3", len(entries))
	}
	for k, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		p := ps[0] // the even envelopes went to the first project
		if !bytes.Equal(b, sent[2*k]) || e.ProjectID != p.ID || e.PublicKey != p.PublicKey || e.FromRelay || e.Encoding != "gzip" || e.Items["event"] != 1 {
			t.Errorf("entry %d: %+v, file %q; want envelope %d", k, e, b, 2*k)
		}
	}
}
