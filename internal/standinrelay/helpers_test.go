package standinrelay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
	"github.com/relayload/relayload/upstream"
)

// rig is the real fake upstream (package upstream) in-process, serving
// projects for a stand-in under test. Requests to the registration routes
// wait while gate is open.
type rig struct {
	srv  *upstream.Server
	url  string
	ps   []projects.Project
	gate chan struct{} // nil: never waits
}

func newRig(t *testing.T, cfg upstream.Config) *rig {
	t.Helper()
	ps, err := projects.Generate(11, 8)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Projects, cfg.VerifySignatures = ps, true
	srv, err := upstream.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	g := &rig{srv: srv, ps: ps}
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if g.gate != nil && strings.HasPrefix(req.URL.Path, "/api/0/relays/register/") {
			// Read the body first: only then does the server notice the
			// client going away and cancel the request's context.
			b, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(b))
			select {
			case <-g.gate:
			case <-req.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(hs.Close)
	g.url = hs.URL
	return g
}

// standin is an in-process stand-in started by startStandin.
type standin struct {
	*Relay
	url  string
	logs *testutil.Output
	stop func() // shuts it down and waits for Run to return
}

// startStandin runs a stand-in against upURL with fast test settings,
// changed by edit, and stops it at the end of the test.
func startStandin(t *testing.T, upURL string, edit func(*Config)) *standin {
	t.Helper()
	cfg, err := ParseConfig(fmt.Appendf(nil, `relay: {mode: managed, upstream: %q, host: 127.0.0.1, port: 0}
cache: {batch_interval: 20, global_config_fetch_interval: 1}
limits: {shutdown_timeout: 0}
`, upURL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	creds, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.Output{}
	r, err := New(cfg, creds, log.New(logs, "", log.Lmicroseconds))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	s := &standin{Relay: r, url: "http://" + r.Addr(), logs: logs}
	s.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(cfg.ShutdownTimeout + 5*time.Second):
				t.Errorf("Run still running %s after the cancel", cfg.ShutdownTimeout+5*time.Second)
			}
		})
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("stand-in log:\n%s", logs.String())
		}
	})
	return s
}

// waitFor polls cond every 5 ms until it holds, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ready reports what the stand-in's readiness endpoint answers.
func (s *standin) ready(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(s.url + "/api/relay/healthcheck/ready/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// item is one envelope item of relayload's kinds.
func item(typ string) string {
	payload := map[string]string{
		"event":         `{"message":"hello","level":"info"}`,
		"transaction":   `{"type":"transaction","transaction":"/x","start_timestamp":1.0,"timestamp":2.0,"spans":[]}`,
		"session":       `{"sid":"8a4b6a3c-8d6b-4f2e-9d4c-0a1b2c3d4e5f","status":"ok","started":"2026-01-01T00:00:00Z"}`,
		"check_in":      `{"check_in_id":"83a7c03ed0a04e1b97e2e3b18d38f244","monitor_slug":"m","status":"ok"}`,
		"log":           `{"items":[{"timestamp":1.0,"level":"info","body":"hi"}]}`,
		"client_report": `{"timestamp":"2026-01-01T00:00:00Z","discarded_events":[{"reason":"queue_overflow","category":"error","quantity":3}]}`,
		"trace_metric":  `{"items":[{"timestamp":1.0,"name":"m","type":"counter","value":1}]}`,
	}[typ]
	return fmt.Sprintf(`{"type":%q,"length":%d}`+"\n%s\n", typ, len(payload), payload)
}

// envelopeOf is an envelope with event_id id ("" for none) and items.
func envelopeOf(id string, items ...string) []byte {
	hdr := "{}\n"
	if id != "" {
		hdr = fmt.Sprintf(`{"event_id":%q}`+"\n", id)
	}
	return []byte(hdr + strings.Join(items, ""))
}

// post sends an envelope for p to the stand-in.
func (s *standin) post(t *testing.T, p projects.Project, body []byte) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+p.EnvelopePath(), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-sentry-envelope")
	req.Header.Set("X-Sentry-Auth", p.AuthHeader("standin-test/1.0"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}
