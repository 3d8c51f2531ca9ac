package upstream

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/relayload/relayload/internal/compression"
)

// serveFastServer serves srv through srv.FastHTTPServer on a loopback
// port and returns the address.
func serveFastServer(t testing.TB, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := srv.ServeWith(FastHTTP, ln, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serving.Close() })
	return ln.Addr().String()
}

// TestFastServerServesEnvelopesNatively: on fasthttp, envelopes are served
// by serveEnvelopeFast; everything else, and envelopes while faults are set
// or a test hook is installed, reach the net/http handler.
func TestFastServerServesEnvelopesNatively(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	body := envelopeBody(p, "0123456789abcdef0123456789abcdef", item("event", `{"message":"x"}`))
	var slow atomic.Bool
	adaptor := fasthttpadaptor.NewFastHTTPHandler(f.srv.Handler())
	fs := f.srv.FastHTTPServer()
	fs.Handler = func(ctx *fasthttp.RequestCtx) {
		f.srv.serveFast(ctx, func(ctx *fasthttp.RequestCtx) { slow.Store(true); adaptor(ctx) })
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = fs.Serve(f.srv.Listener(ln)) }()
	t.Cleanup(func() { _ = fs.Shutdown() })
	for _, tc := range []struct {
		name, method, path string
		faults, hook       bool
		native             bool
	}{
		{name: "envelope", method: "POST", path: p.EnvelopePath(), native: true},
		{name: "envelope GET", method: "GET", path: p.EnvelopePath()},
		{name: "not digits", method: "POST", path: "/api/x1/envelope/"},
		{name: "no trailing slash", method: "POST", path: "/api/1/envelope"},
		{name: "projectconfigs", method: "POST", path: "/api/0/relays/projectconfigs/?version=3"},
		{name: "stats", method: "GET", path: "/stats"},
		{name: "faults set", method: "POST", path: p.EnvelopePath(), faults: true},
		{name: "hook", method: "POST", path: p.EnvelopePath(), hook: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faults := Faults{}
			if tc.faults {
				faults.Latency = map[string]Latency{"projectconfigs": {Fixed: Duration(time.Millisecond)}}
			}
			if err := f.srv.SetFaults(faults); err != nil {
				t.Fatal(err)
			}
			if tc.hook {
				f.srv.hook = func(*http.Request) {}
				defer func() { f.srv.hook = nil }()
			}
			slow.Store(false)
			req, _ := http.NewRequest(tc.method, "http://"+ln.Addr().String()+tc.path, strings.NewReader(string(body)))
			req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if slow.Load() == tc.native {
				t.Fatalf("net/http handler called: %v, want %v", slow.Load(), !tc.native)
			}
			if tc.native && (resp.StatusCode != 200 || string(got) != `{"id":"0123456789abcdef0123456789abcdef"}` ||
				resp.Header.Get("Content-Type") != "application/json") {
				t.Errorf("answer %d %v %s", resp.StatusCode, resp.Header, got)
			}
		})
	}
}

// FuzzEnvelopePath: envelopePath agrees with the routing table on every
// path: the envelope route, and the same project id.
func FuzzEnvelopePath(f *testing.F) {
	for _, s := range []string{"/api/1/envelope/", "/api/0123456789012345678/envelope/", "/api//envelope/",
		"/api/1/envelope", "/api/1/2/envelope/", "/api/-1/envelope/", "/api/1/envelope/x", "/stats"} {
		f.Add(s)
	}
	rt := newRouter()
	f.Fuzz(func(t *testing.T, path string) {
		if !strings.HasPrefix(path, "/") {
			return
		}
		id, ok := envelopePath([]byte(path))
		r, rid := rt.lookup(path)
		if ok != (r == routeEnvelope) || id != rid {
			t.Fatalf("%q: envelopePath %q %v, router %d %q", path, id, ok, r, rid)
		}
	})
}

// TestFastServerRejects: what fasthttp rejects before a handler is answered
// in Relay's error form and counted in http_layer.rejected.
func TestFastServerRejects(t *testing.T) {
	srv := newTestServer(t)
	srv.limits.bodyTimeout = 300 * time.Millisecond
	addr := serveFastServer(t, srv)
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"header over the cap", "GET /api/0/relays/live/ HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", HTTPMaxHeaderBytes+1024) + "\r\n\r\n", 431},
		{"not HTTP", "HELLO\r\n\r\n", 400},
		{"stalled body", "POST /api/1/envelope/ HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{", 408},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := rawConn(t, addr, tc.req)
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e apiError
			if resp.StatusCode != tc.status || json.Unmarshal(b, &e) != nil || e.Detail == "" || e.Causes == nil {
				t.Fatalf("answer %d %s, want %d in Relay's error form", resp.StatusCode, b, tc.status)
			}
			if n := srv.Stats().HTTPLayer.Rejected[itoaStatus(tc.status)]; n != 1 {
				t.Errorf("http_layer.rejected[%d] = %d, want 1", tc.status, n)
			}
		})
	}
	if n := srv.Stats().HTTPLayer.Connections; n != 3 {
		t.Errorf("connections %d, want 3", n)
	}
}

// TestFastServerLargeBodies: a body larger than what fasthttp reads before
// the handler is read under a large-body slot at the minimum rate: whole,
// it is counted like any other; stalled, it is answered 408 body_timeout.
func TestFastServerLargeBodies(t *testing.T) {
	srv := newTestServer(t)
	srv.limits.bodyGrace = 300 * time.Millisecond
	addr := serveFastServer(t, srv)
	p := srv.cfg.Projects[0]
	big := envelopeBody(p, "", item("event", `{"message":"`+strings.Repeat("x", 3*BodyPreSlotBytes)+`"}`))
	for _, enc := range []compression.Encoding{compression.Identity, compression.Gzip} {
		req, _ := http.NewRequest("POST", "http://"+addr+p.EnvelopePath(), strings.NewReader(string(encode(t, enc, big))))
		req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
		if enc != compression.Identity {
			req.Header.Set("Content-Encoding", string(enc))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", enc, resp.StatusCode)
		}
	}
	if st := srv.Stats(); st.Envelopes != 2 || st.ItemsByType["event"] != 2 {
		t.Fatalf("envelopes %d items %v, want 2 events", st.Envelopes, st.ItemsByType)
	}
	stalled := "POST " + p.EnvelopePath() + " HTTP/1.1\r\nHost: x\r\nX-Sentry-Auth: " + p.AuthHeader("t") +
		"\r\nContent-Length: 1000000\r\n\r\n" + strings.Repeat("x", 2*BodyPreSlotBytes)
	conn := rawConn(t, addr, stalled)
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled large body: %v", err)
	}
	resp.Body.Close()
	if st := srv.Stats(); resp.StatusCode != 408 || st.Errors["body_timeout"] != 1 || st.Requests["envelope"]["408"] != 1 {
		t.Fatalf("stalled large body: %d, errors %v, requests %v", resp.StatusCode, st.Errors, st.Requests)
	}
	// Every slot was given back.
	if len(srv.readSlots) != 0 || len(srv.slots) != 0 {
		t.Errorf("slots held: %d read, %d ingest", len(srv.readSlots), len(srv.slots))
	}
}

// TestFastServerResetFault: through fasthttpadaptor's hijack the reset
// fault still closes with a TCP reset.
func TestFastServerResetFault(t *testing.T) {
	srv := newTestServer(t)
	if err := srv.SetFaults(Faults{Inject: []Injection{{Route: "live", Reset: true, Probability: 1}}}); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t, serveFastServer(t, srv), "GET /api/0/relays/live/ HTTP/1.1\r\nHost: x\r\n\r\n")
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := conn.Read(make([]byte, 64))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after the reset fault: %v, want ECONNRESET", err)
	}
}

// TestFastServerStreamsProjects: GET /projects through fasthttpadaptor
// streams the whole list.
func TestFastServerStreamsProjects(t *testing.T) {
	f := newFixture(t, nil)
	srv := f.srv
	addr := serveFastServer(t, srv)
	resp, err := http.Get("http://" + addr + "/projects")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []ProjectDSN
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(srv.cfg.Projects) || got[0].DSN == "" {
		t.Fatalf("%d projects, want %d", len(got), len(srv.cfg.Projects))
	}
}
