package standinrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/canary"
	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/relayauth"
)

// testUpstream is a small Sentry for tests: it checks every request's
// shape and signature strictly and records what it got. Failures of the
// relay's requests are reported with t.Errorf.
type testUpstream struct {
	t      *testing.T
	srv    *httptest.Server
	secret []byte
	dec    *compression.Decoder

	mu sync.Mutex
	// behaviour
	challengeHook   func(n int) (status int, body string) // nil = normal
	globalStatus    func(n int) string                    // "" = omit globalStatus
	configs         map[string]json.RawMessage            // key → ProjectState JSON ("null" allowed)
	pending         map[string]int                        // key → answer pending this many times
	answerUnchanged bool                                  // answer "unchanged" when revisions match
	envelopeHook    func(n int, env *receivedEnvelope) (status int, hdr http.Header)
	liveStatus      func() int // GET /api/0/relays/live/, called with mu held (nil: 200)
	liveChecks      int
	down            bool // answer 503 to everything but the live check
	// records
	relays        map[string]relayauth.PublicKey
	challenges    int
	responses     int
	globalReqs    int
	projectReqs   []projectRequest
	envelopes     []*receivedEnvelope
	envelopeCalls int
}

// receivedEnvelope is one envelope the relay forwarded.
type receivedEnvelope struct {
	path   string
	header http.Header
	raw    []byte // decoded body
	env    *envelope.Envelope
	hdr    map[string]any
}

func (e *receivedEnvelope) itemTypes() []string {
	var ts []string
	for _, it := range e.env.Items {
		ts = append(ts, it.Type)
	}
	return ts
}

func newTestUpstream(t *testing.T) *testUpstream {
	u := &testUpstream{
		t:       t,
		secret:  []byte("test-secret"),
		dec:     compression.NewDecoder(64 << 20),
		configs: map[string]json.RawMessage{},
		pending: map[string]int{},
		relays:  map[string]relayauth.PublicKey{},
	}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

// project adds an enabled project config.
func (u *testUpstream) project(key string, id, org int64, rev string, features ...string) {
	if features == nil {
		features = []string{featureLogs}
	}
	b, _ := json.Marshal(map[string]any{
		"disabled": false, "projectId": id, "organizationId": org, "slug": "p" + fmt.Sprint(id), "rev": rev,
		"publicKeys": []map[string]any{{"publicKey": key, "numericId": id * 10}},
		"config":     map[string]any{"allowedDomains": []string{"*"}, "features": features},
	})
	u.mu.Lock()
	u.configs[key] = b
	u.mu.Unlock()
}

func (u *testUpstream) setConfig(key, raw string) {
	u.mu.Lock()
	u.configs[key] = json.RawMessage(raw)
	u.mu.Unlock()
}

func (u *testUpstream) fail(format string, args ...any) { u.t.Errorf("upstream: "+format, args...) }

func (u *testUpstream) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		u.fail("read body: %v", err)
		return
	}
	u.mu.Lock()
	down := u.down
	u.mu.Unlock()
	switch {
	case down && req.URL.Path != "/api/0/relays/live/":
		writeJSON(w, 503, map[string]string{"detail": "down"})
	case req.URL.Path == "/api/0/relays/live/":
		if req.Method != http.MethodGet || req.Header.Get("X-Sentry-Relay-Id") == "" {
			u.fail("live check %s without relay id %q", req.Method, req.Header.Get("X-Sentry-Relay-Id"))
		}
		u.mu.Lock()
		u.liveChecks++
		status := 200
		if u.liveStatus != nil {
			status = u.liveStatus()
		}
		u.mu.Unlock()
		writeJSON(w, status, map[string]bool{"is_healthy": status == 200})
	case req.URL.Path == "/api/0/relays/register/challenge/":
		u.challenge(w, req, body)
	case req.URL.Path == "/api/0/relays/register/response/":
		u.response(w, req, body)
	case req.URL.Path == "/api/0/relays/projectconfigs/":
		u.projectConfigs(w, req, body)
	case strings.HasPrefix(req.URL.Path, "/api/") && strings.HasSuffix(req.URL.Path, "/envelope/"):
		u.envelope(w, req, body)
	default:
		u.fail("unexpected request %s %s", req.Method, req.URL)
		http.NotFound(w, req)
	}
}

func (u *testUpstream) checkJSONRequest(req *http.Request) {
	if req.Method != http.MethodPost {
		u.fail("%s: method %s", req.URL.Path, req.Method)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		u.fail("%s: Content-Type %q", req.URL.Path, ct)
	}
	if ce := req.Header.Get("Content-Encoding"); ce != "" {
		u.fail("%s: JSON query with Content-Encoding %q", req.URL.Path, ce)
	}
}

func (u *testUpstream) challenge(w http.ResponseWriter, req *http.Request, body []byte) {
	u.checkJSONRequest(req)
	var ch struct {
		RelayID   string `json:"relay_id"`
		PublicKey string `json:"public_key"`
		Version   string `json:"version"`
	}
	if err := json.Unmarshal(body, &ch); err != nil {
		u.fail("challenge body %q: %v", body, err)
	}
	want := fmt.Sprintf(`{"relay_id":%q,"public_key":%q,"version":%q}`, ch.RelayID, ch.PublicKey, Version)
	if string(body) != want {
		u.fail("challenge body %s, want field order %s", body, want)
	}
	if h := req.Header.Get("X-Sentry-Relay-Id"); h != ch.RelayID {
		u.fail("challenge: X-Sentry-Relay-Id %q, body relay_id %q", h, ch.RelayID)
	}
	pub, err := relayauth.ParsePublicKey(ch.PublicKey)
	if err != nil {
		u.fail("challenge public key: %v", err)
		return
	}
	if err := pub.Verify(body, req.Header.Get("X-Sentry-Relay-Signature"), 60*time.Second, time.Now()); err != nil {
		u.fail("challenge signature: %v", err)
	}
	u.mu.Lock()
	u.challenges++
	n := u.challenges
	hook := u.challengeHook
	u.mu.Unlock()
	if hook != nil {
		if status, b := hook(n); status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, b)
			return
		}
	}
	token, err := relayauth.MintToken(u.secret, ch.RelayID, pub, time.Now(), nil)
	if err != nil {
		u.fail("mint: %v", err)
	}
	writeJSON(w, 200, map[string]string{"relay_id": ch.RelayID, "token": token})
}

func (u *testUpstream) response(w http.ResponseWriter, req *http.Request, body []byte) {
	u.checkJSONRequest(req)
	var resp struct {
		RelayID string `json:"relay_id"`
		Token   string `json:"token"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		u.fail("response body: %v", err)
	}
	if resp.Version != Version {
		u.fail("response version %q", resp.Version)
	}
	st, err := relayauth.ValidateToken(u.secret, resp.Token, time.Minute, time.Now())
	if err != nil {
		u.fail("token: %v", err)
		return
	}
	if st.RelayID != resp.RelayID {
		u.fail("token relay %q vs %q", st.RelayID, resp.RelayID)
	}
	pub, err := relayauth.ParsePublicKey(st.PublicKey)
	if err != nil {
		u.fail("token public key: %v", err)
		return
	}
	if err := pub.Verify(body, req.Header.Get("X-Sentry-Relay-Signature"), 60*time.Second, time.Now()); err != nil {
		u.fail("response signature: %v", err)
	}
	u.mu.Lock()
	u.responses++
	u.relays[resp.RelayID] = pub
	u.mu.Unlock()
	writeJSON(w, 200, map[string]string{"relay_id": resp.RelayID})
}

// verifyRelay checks X-Sentry-Relay-Id is registered and the signature
// covers data.
func (u *testUpstream) verifyRelay(req *http.Request, data []byte) bool {
	id := req.Header.Get("X-Sentry-Relay-Id")
	u.mu.Lock()
	pub, ok := u.relays[id]
	u.mu.Unlock()
	if !ok {
		u.fail("%s from unregistered relay %q", req.URL.Path, id)
		return false
	}
	if err := pub.Verify(data, req.Header.Get("X-Sentry-Relay-Signature"), 300*time.Second, time.Now()); err != nil {
		u.fail("%s: signature: %v", req.URL.Path, err)
		return false
	}
	return true
}

func (u *testUpstream) projectConfigs(w http.ResponseWriter, req *http.Request, body []byte) {
	u.checkJSONRequest(req)
	if req.URL.RawQuery != "version=3" {
		u.fail("projectconfigs query %q", req.URL.RawQuery)
	}
	if !u.verifyRelay(req, body) {
		writeJSON(w, 403, map[string]string{"detail": "bad relay"})
		return
	}
	var global struct {
		Global *bool `json:"global"`
	}
	_ = json.Unmarshal(body, &global)
	if global.Global != nil {
		if string(body) != `{"global":true,"publicKeys":[]}` {
			u.fail("global request body %s", body)
		}
		u.mu.Lock()
		u.globalReqs++
		n := u.globalReqs
		gs := u.globalStatus
		u.mu.Unlock()
		resp := map[string]any{"global": map[string]any{"measurements": map[string]any{}, "options": map[string]any{}}}
		if gs != nil {
			if s := gs(n); s != "" {
				resp["globalStatus"] = s
			}
		}
		writeJSON(w, 200, resp)
		return
	}
	var pr projectRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pr); err != nil {
		u.fail("project request %s: %v", body, err)
	}
	if len(pr.PublicKeys) != len(pr.Revisions) {
		u.fail("project request: %d keys, %d revisions", len(pr.PublicKeys), len(pr.Revisions))
	}
	u.mu.Lock()
	u.projectReqs = append(u.projectReqs, pr)
	resp := map[string]any{}
	configs := map[string]json.RawMessage{}
	pending := []string{}
	unchanged := []string{}
	for i, k := range pr.PublicKeys {
		if u.pending[k] > 0 {
			u.pending[k]--
			pending = append(pending, k)
			continue
		}
		c, ok := u.configs[k]
		if !ok {
			continue // missing → disabled
		}
		if u.answerUnchanged && pr.Revisions[i] != nil {
			var ps ProjectState
			_ = json.Unmarshal(c, &ps)
			if ps.Rev == *pr.Revisions[i] {
				unchanged = append(unchanged, k)
				continue
			}
		}
		configs[k] = c
	}
	u.mu.Unlock()
	resp["configs"], resp["pending"], resp["unchanged"] = configs, pending, unchanged
	writeJSON(w, 200, resp)
}

func (u *testUpstream) envelope(w http.ResponseWriter, req *http.Request, body []byte) {
	if req.Method != http.MethodPost {
		u.fail("envelope method %s", req.Method)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-sentry-envelope" {
		u.fail("envelope Content-Type %q", ct)
	}
	if !u.verifyRelay(req, nil) { // signed over empty data
		writeJSON(w, 403, map[string]string{"detail": "bad relay signature"})
		return
	}
	enc, err := compression.ParseEncoding(req.Header.Get("Content-Encoding"))
	if err != nil {
		u.fail("envelope encoding: %v", err)
		return
	}
	raw, err := u.dec.Decode(enc, body, nil)
	if err != nil {
		u.fail("envelope decode (%s): %v", enc, err)
		return
	}
	env, err := envelope.Parse(raw)
	if err != nil {
		u.fail("forwarded envelope does not parse: %v\n%s", err, raw)
		return
	}
	var hdr map[string]any
	if err := json.Unmarshal(env.Header, &hdr); err != nil {
		u.fail("envelope header: %v", err)
	}
	re := &receivedEnvelope{path: req.URL.Path, header: req.Header.Clone(), raw: raw, env: env, hdr: hdr}
	u.mu.Lock()
	u.envelopeCalls++
	n := u.envelopeCalls
	hook := u.envelopeHook
	u.mu.Unlock()
	if hook != nil {
		if status, h := hook(n, re); status != 0 {
			for k, vs := range h {
				w.Header()[k] = vs
			}
			writeJSON(w, status, map[string]string{"detail": http.StatusText(status)})
			return
		}
	}
	u.mu.Lock()
	u.envelopes = append(u.envelopes, re)
	u.mu.Unlock()
	writeJSON(w, 200, map[string]string{"event_id": "00000000000000000000000000000000"})
}

// received returns forwarded envelopes that are not Relay-made outcome envelopes.
func (u *testUpstream) received() []*receivedEnvelope {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []*receivedEnvelope
	for _, e := range u.envelopes {
		if len(e.env.Items) > 0 && (e.env.Items[0].Type == "metric_buckets" || e.env.Items[0].Type == "client_report" && e.hdr["client"] == nil) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// outcomeBuckets returns all outcome buckets received, with the path they came on.
func (u *testUpstream) outcomeBuckets() []metricBucket {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []metricBucket
	for _, e := range u.envelopes {
		for _, it := range e.env.Items {
			if it.Type != "metric_buckets" {
				continue
			}
			var bs []metricBucket
			if err := json.Unmarshal(it.Payload, &bs); err != nil {
				u.fail("metric_buckets payload %s: %v", it.Payload, err)
			}
			out = append(out, bs...)
		}
	}
	return out
}

// standin is a stand-in relay running in-process.
type standin struct {
	*Relay
	url  string
	stop func() // cancels Run and waits for it
	logs *syncBuffer
}

// log returns what the stand-in logged so far.
func (s *standin) log() string {
	s.logs.mu.Lock()
	defer s.logs.mu.Unlock()
	return s.logs.String()
}

// baseConfig is a fast config for tests against up.
func baseConfig(upURL string) string {
	return fmt.Sprintf(`
relay:
  mode: managed
  upstream: %q
  host: 127.0.0.1
  port: 0
http:
  timeout: 2
  retry_delay: 0.05
outcomes:
  emit_outcomes: true
  source: standin-test
aggregator:
  bucket_interval: 0.1
  initial_delay: 0
cache:
  batch_interval: 5
  global_config_fetch_interval: 0.1
logging:
  level: debug
`, upURL+"/")
}

type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

// startStandin runs a stand-in with baseConfig merged with extra YAML
// (extra is appended: later top-level sections must not repeat earlier ones,
// so pass whole replacement sections via cfgYAML instead when needed).
func startStandin(t *testing.T, cfgYAML string) *standin {
	t.Helper()
	cfg, err := ParseConfig([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	r, err := New(cfg, creds, NewLogger(logs, cfg.LogLevel))
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
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("stand-in log:\n%s", logs.String())
			logs.mu.Unlock()
		}
	})
	return s
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// post sends an envelope body to the stand-in.
func post(t *testing.T, url string, body []byte, hdr map[string]string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-sentry-envelope")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Errorf("response %d is not JSON: %q", resp.StatusCode, b)
	}
	return resp.StatusCode, resp.Header, out
}

func authHeader(key string) map[string]string {
	return map[string]string{"X-Sentry-Auth": "Sentry sentry_key=" + key + ", sentry_version=7, sentry_client=test-sdk/1.0", "User-Agent": "test-agent/2.0", "X-Forwarded-For": "203.0.113.9"}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

var _ = filepath.Join

// leakedCanaries names the kinds of the canaries in b that should have been
// scrubbed.
func leakedCanaries(b []byte) []string {
	var leaks []string
	canary.Scan(b, func(f canary.Finding) {
		if f.Leaked {
			leaks = append(leaks, f.Kind.Name)
		}
	})
	return leaks
}
