package standinrelay

import (
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/relayauth"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

// standinBinary builds internal/cmd/standin-relay once per test binary.
func standinBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "standin-relay-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "standin-relay")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/relayload/relayload/internal/cmd/standin-relay").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// configDir writes config.yml and credentials.json into a temp dir.
func configDir(t *testing.T, cfgYAML string) (string, relayauth.Credentials) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.yml"), cfgYAML)
	creds, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Save(filepath.Join(dir, "credentials.json")); err != nil {
		t.Fatal(err)
	}
	return dir, creds
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

type process struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(standinBinary(t), args...), stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("stand-in stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // for Cleanup
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(timeout):
		t.Fatalf("process still running after %s", timeout)
		return -1
	}
}

// waitReady polls the readiness endpoint of a started binary; it fails
// early, with the exit status, if the process ends first.
func (p *process) waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("stand-in exited before it was ready: %v", err)
		default:
		}
		resp, err := http.Get(base + "/api/relay/healthcheck/ready/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stand-in not ready after 20 s (last error %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBinaryCLI(t *testing.T) {
	out, err := exec.Command(standinBinary(t), "--version").Output()
	if err != nil || string(out) != "standin-relay "+Version+" (test fixture, not Relay)\n" {
		t.Errorf("--version: %q %v", out, err)
	}
	for _, tc := range []struct {
		name string
		args []string
		cfg  string
		want string
	}{
		{"no subcommand", []string{}, "", "subcommand"},
		{"unknown flag", []string{"--nope", "run"}, "", "flag provided but not defined"},
		{"missing config", []string{"-c", "/nonexistent", "run"}, "", "no such file"},
		{"proxy mode", nil, "relay:\n  mode: proxy\n  upstream: http://127.0.0.1:1/\n", "only does managed"},
		{"bad encoding", nil, "relay:\n  mode: managed\n  upstream: http://127.0.0.1:1/\nhttp:\n  encoding: lz4\n", "http.encoding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args == nil {
				dir, _ := configDir(t, tc.cfg)
				args = []string{"--config", dir, "run"}
			}
			p := startBinary(t, args...)
			if code := p.wait(t, 10*time.Second); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(p.stderr.String(), tc.want) {
				t.Errorf("stderr %q does not mention %q", p.stderr.String(), tc.want)
			}
		})
	}
}

// TestBinarySIGTERMDrains runs the built binary like orchestrate does,
// sends envelopes while the upstream is slow, and checks that SIGTERM
// forwards everything buffered, flushes outcomes and exits 0.
func TestBinarySIGTERMDrains(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.envelopeHook = func(int, *receivedEnvelope) (int, http.Header) {
		time.Sleep(50 * time.Millisecond)
		return 0, nil
	}
	port := freePort(t)
	cfg := strings.Replace(baseConfig(up.srv.URL), "port: 0", "port: "+port, 1)
	cfg = strings.Replace(cfg, "initial_delay: 0", "initial_delay: 60", 1) // only the shutdown flush sends outcomes
	cfg += "limits:\n  max_concurrent_requests: 2\n  shutdown_timeout: 10\n  max_thread_count: 1\n"
	dir, _ := configDir(t, cfg)
	p := startBinary(t, "-c", dir, "run")
	base := "http://127.0.0.1:" + port
	p.waitReady(t, base)
	const n = 30
	for range n {
		status, _, body := post(t, base+"/api/42/envelope/", singleItem("check_in", `{"check_in_id":"83a7c03ed0a04e1b97e2e3b18d38f244","monitor_slug":"m","status":"ok"}`), authHeader(keyA))
		if status != 200 {
			t.Fatalf("ingest: %d %v", status, body)
		}
	}
	post(t, base+"/api/42/envelope/", singleItem("event", `{broken`), authHeader(keyA))
	// 30 envelopes × 50 ms over 2 connections take ≥ 750 ms: most are still
	// buffered when the signal arrives.
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	took := time.Since(start)
	if got := len(up.received()); got != n {
		t.Errorf("upstream got %d of %d envelopes after the drain", got, n)
	}
	var invalid float64
	for _, b := range up.outcomeBuckets() {
		if b.Name == "c:outcomes/invalid@none" && b.Tags["reason"] == "invalid_json" {
			invalid += b.Value
		}
	}
	if invalid != 1 {
		t.Errorf("invalid_json outcomes flushed at shutdown: %v, want 1", invalid)
	}
	if took < 500*time.Millisecond {
		t.Errorf("shutdown took %s: the drain did not wait for the slow upstream", took)
	}
	if !strings.Contains(p.stderr.String(), "shut down in") {
		t.Errorf("log lacks the shutdown line:\n%s", p.stderr.String())
	}
}

// TestBinaryShutdownTimeout: with an upstream that only answers 503, the
// drain gives up after limits.shutdown_timeout and the process still exits 0.
func TestBinaryShutdownTimeout(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.envelopeHook = func(int, *receivedEnvelope) (int, http.Header) { return 503, nil }
	port := freePort(t)
	cfg := strings.Replace(baseConfig(up.srv.URL), "port: 0", "port: "+port, 1)
	cfg += "limits:\n  shutdown_timeout: 1\n"
	dir, _ := configDir(t, cfg)
	p := startBinary(t, "--config", dir, "run")
	base := "http://127.0.0.1:" + port
	p.waitReady(t, base)
	post(t, base+"/api/42/envelope/", singleItem("check_in", `{}`), authHeader(keyA))
	waitFor(t, 5*time.Second, "a retried envelope", func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		return up.envelopeCalls >= 2
	})
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if took := time.Since(start); took < 900*time.Millisecond || took > 4*time.Second {
		t.Errorf("shutdown took %s with shutdown_timeout 1 s", took)
	}
	if !strings.Contains(p.stderr.String(), "shutdown timeout") {
		t.Errorf("log does not report the lost envelope:\n%s", p.stderr.String())
	}
}
