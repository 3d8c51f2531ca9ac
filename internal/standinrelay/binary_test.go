package standinrelay

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
	"github.com/relayload/relayload/relayauth"
	"github.com/relayload/relayload/upstream"
)

// standinBinary is internal/cmd/standin-relay, built once per test binary.
func standinBinary(t *testing.T) string {
	t.Helper()
	return testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
}

func TestMain(m *testing.M) { testutil.Main(m) }

// configDir writes config.yml and credentials.json into a temp dir.
func configDir(t *testing.T, cfgYAML string) (string, relayauth.Credentials) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.Save(filepath.Join(dir, "credentials.json")); err != nil {
		t.Fatal(err)
	}
	return dir, creds
}

type process struct {
	cmd    *exec.Cmd
	stderr *testutil.Output
	done   chan error
}

func startBinary(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(standinBinary(t), args...), stderr: &testutil.Output{}, done: make(chan error, 1)}
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

// TestBinarySignals runs the built binary like orchestrate does and
// checks the shutdown Relay 26.4.0 was seen to do (a Python harness
// around relay-26.4.0 -c DIR run): after SIGTERM the listener is closed at
// once, what is held is still forwarded, and the process exits 0 after
// limits.shutdown_timeout (2.01 s for 2 s), not before; SIGINT, or a second
// SIGTERM, exits 0 at once.
func TestBinarySignals(t *testing.T) {
	g := newRig(t, upstream.Config{})
	p := g.ps[0]
	for _, tc := range []struct {
		name    string
		signals []os.Signal
		min     time.Duration // exit no sooner
		max     time.Duration // and no later
	}{
		{"SIGTERM", []os.Signal{syscall.SIGTERM}, time.Second, 3 * time.Second},
		{"SIGINT", []os.Signal{syscall.SIGINT}, 0, 500 * time.Millisecond},
		{"second SIGTERM", []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, 0, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := strconv.Itoa(testutil.FreePort(t))
			dir, _ := configDir(t, fmt.Sprintf("relay: {mode: managed, upstream: %q, host: 127.0.0.1, port: %s}\nlimits: {shutdown_timeout: 1}\nstandin: {capacity: 20}\n", g.url+"/", port))
			proc := startBinary(t, "-c", dir, "run")
			base := "http://127.0.0.1:" + port
			proc.waitReady(t, base)
			// 40 envelopes at 20/s: most are still held at the signal.
			before, posted := g.srv.DataEnvelopes(), time.Now()
			for range 40 {
				req, _ := http.NewRequest(http.MethodPost, base+p.EnvelopePath(), bytes.NewReader(envelopeOf("", item("check_in"))))
				req.Header.Set("X-Sentry-Auth", p.AuthHeader("standin-test/1.0"))
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("ingest: %v %v", resp, err)
				}
				resp.Body.Close()
			}
			closed := func() bool {
				c, err := net.Dial("tcp", "127.0.0.1:"+port)
				if err == nil {
					c.Close()
				}
				return err != nil
			}
			stalls := testutil.StartStalls()
			atSignal := g.srv.DataEnvelopes() - before
			start := time.Now()
			for i, sig := range tc.signals {
				if i > 0 {
					// The first SIGTERM was handled once the listener closed.
					waitFor(t, 30*time.Second, "the listener closed", closed)
				}
				if err := proc.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
			}
			if tc.min > 0 {
				// The listener closes at once.
				waitFor(t, 30*time.Second, "the listener closed", closed)
				if at, lost := time.Since(start), stalls.Lost(); at > time.Second+lost {
					t.Errorf("the listener closed %s after SIGTERM (%s lost to the machine)", at, lost)
				}
			}
			if code := proc.wait(t, 30*time.Second); code != 0 {
				t.Errorf("exit status %d", code)
			}
			took, lost := time.Since(start), stalls.Stop()
			forwarded := g.srv.DataEnvelopes() - before
			t.Logf("%s: exited after %s (%s lost to the machine), %d of 40 envelopes forwarded, %d before the signal",
				tc.name, took.Round(time.Millisecond), lost.Round(time.Millisecond), forwarded, atSignal)
			if took < tc.min || took > tc.max+lost {
				t.Errorf("exited after %s, want %s–%s (%s lost to the machine)", took, tc.min, tc.max, lost)
			}
			// SIGTERM: processing goes on for the 1 s at 20/s, then stops.
			// Never faster than capacity (the pacer lets one envelope go
			// ahead); during the shutdown about 20, less what the machine
			// took of that second.
			if tc.min > 0 {
				if limit := 2 + 20*time.Since(posted).Seconds(); float64(forwarded) > limit {
					t.Errorf("%d of 40 forwarded in %s at 20/s", forwarded, time.Since(posted))
				}
				if during, least := forwarded-atSignal, 10-20*lost.Seconds(); float64(during) < least {
					t.Errorf("%d forwarded during 1 s of shutdown at 20/s, want at least %.0f (%s lost to the machine)", during, least, lost)
				}
			}
		})
	}
}
