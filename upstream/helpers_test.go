package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	t     testing.TB
	srv   *Server
	http  *fixtureHTTP
	ps    []projects.Project
	clock *clock
}

// fixtureHTTP is where a fixture's server listens, and a client for it.
type fixtureHTTP struct {
	URL    string
	client *http.Client
}

func (h *fixtureHTTP) Client() *http.Client { return h.client }

// serveFixture serves srv through httptest on a loopback port.
func serveFixture(t testing.TB, srv *Server) *fixtureHTTP {
	t.Helper()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &fixtureHTTP{URL: hs.URL, client: hs.Client()}
}

func newFixture(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	ps, err := projects.Generate(7, 10)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	cfg := Config{Projects: ps, VerifySignatures: true, Now: clk.Now, Seed: 1}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := newServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, srv: srv, http: serveFixture(t, srv), ps: ps, clock: clk}
}

// testRelay plays a Relay with real keys.
type testRelay struct {
	id  string
	sk  relayauth.SecretKey
	pub relayauth.PublicKey
}

func newRelay(t testing.TB) *testRelay {
	t.Helper()
	c, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		t.Fatal(err)
	}
	sk, pub, err := c.Keys()
	if err != nil {
		t.Fatal(err)
	}
	return &testRelay{id: c.ID, sk: sk, pub: pub}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response %d is not a JSON object: %v: %s", r.status, err, r.body)
	}
	return m
}

func (f *fixture) do(method, path string, body []byte, hdr map[string]string) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.http.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.http.Client().Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// signed posts a JSON body signed by r (at the fixture's clock).
func (f *fixture) signed(r *testRelay, path string, body string) response {
	return f.do("POST", path, []byte(body), map[string]string{
		"Content-Type":             "application/json",
		"X-Sentry-Relay-Id":        r.id,
		"X-Sentry-Relay-Signature": r.sk.Sign([]byte(body), f.clock.Now()),
	})
}

func (f *fixture) register(r *testRelay) {
	f.t.Helper()
	body := `{"relay_id":"` + r.id + `","public_key":"` + r.pub.String() + `","version":"26.6.0"}`
	resp := f.signed(r, "/api/0/relays/register/challenge/", body)
	if resp.status != 200 {
		f.t.Fatalf("challenge: %d %s", resp.status, resp.body)
	}
	token := resp.json(f.t)["token"].(string)
	body = `{"relay_id":"` + r.id + `","token":"` + token + `","version":"26.6.0"}`
	resp = f.signed(r, "/api/0/relays/register/response/", body)
	if resp.status != 200 {
		f.t.Fatalf("response: %d %s", resp.status, resp.body)
	}
}

// envelopeBody builds an envelope for project p with the given items.
func envelopeBody(p projects.Project, eventID string, items ...envelope.Item) []byte {
	hdr := `{"dsn":"http://` + p.PublicKey + `@127.0.0.1:3000/` + itoa(p.ID) + `"`
	if eventID != "" {
		hdr += `,"event_id":"` + eventID + `"`
	}
	hdr += `,"sent_at":"2026-01-01T00:00:00Z"}`
	e := envelope.Envelope{Header: []byte(hdr), Items: items}
	return e.Marshal()
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func item(typ, payload string) envelope.Item {
	return envelope.Item{Type: typ, Payload: []byte(payload)}
}

var encoder = compression.NewEncoder()

func encode(t testing.TB, enc compression.Encoding, raw []byte) []byte {
	t.Helper()
	if enc == compression.Identity {
		return raw
	}
	b, err := encoder.Encode(enc, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postEnvelope posts raw (encoded with enc) as an SDK would.
func (f *fixture) postEnvelope(p projects.Project, enc compression.Encoding, raw []byte, extra map[string]string) response {
	f.t.Helper()
	hdr := map[string]string{
		"Content-Type":  "application/x-sentry-envelope",
		"X-Sentry-Auth": p.AuthHeader("test/1.0"),
	}
	if enc != compression.Identity {
		hdr["Content-Encoding"] = string(enc)
	}
	for k, v := range extra {
		if v == "" {
			delete(hdr, k)
		} else {
			hdr[k] = v
		}
	}
	return f.do("POST", p.EnvelopePath(), encode(f.t, enc, raw), hdr)
}

// relayHeaders are what a Relay adds to a forwarded envelope.
func (f *fixture) relayHeaders(r *testRelay) map[string]string {
	return map[string]string{
		"X-Sentry-Relay-Id":        r.id,
		"X-Sentry-Relay-Signature": r.sk.Sign(nil, f.clock.Now()),
	}
}

func wantStatus(t testing.TB, r response, status int, detailContains string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if status >= 400 {
		m := r.json(t)
		d, _ := m["detail"].(string)
		if _, ok := m["causes"].([]any); !ok {
			t.Errorf("error body lacks causes: %s", r.body)
		}
		if !strings.Contains(d, detailContains) {
			t.Errorf("detail %q does not contain %q", d, detailContains)
		}
	}
}
