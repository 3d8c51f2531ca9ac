package upstream

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
	"github.com/relayload/relayload/projects"
)

// serveHTTPServer serves srv through srv.HTTPServer on a loopback port;
// adjust may shorten its timeouts first. It returns the address.
func serveHTTPServer(t testing.TB, srv *Server, adjust func(*http.Server)) string {
	t.Helper()
	hs := srv.httpServer()
	if adjust != nil {
		adjust(hs)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(srv.listener(ln)) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

func newTestServer(t testing.TB) *Server {
	t.Helper()
	ps, err := projects.Generate(7, 3)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newServer(Config{Projects: ps})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestHTTPServerLimits(t *testing.T) {
	srv := newTestServer(t)
	hs := srv.httpServer()
	if hs.ReadHeaderTimeout != 10*time.Second || hs.ReadTimeout != 60*time.Second || hs.IdleTimeout != 120*time.Second ||
		hs.MaxHeaderBytes != 64<<10 || hs.WriteTimeout != 0 {
		t.Errorf("read header %s, read %s, idle %s, write %s, max header %d; want 10s, 60s, 120s, 0s, 64 KiB",
			hs.ReadHeaderTimeout, hs.ReadTimeout, hs.IdleTimeout, hs.WriteTimeout, hs.MaxHeaderBytes)
	}
	addr := serveHTTPServer(t, srv, nil)
	resp, err := http.Get("http://" + addr + "/api/0/relays/live/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || srv.Stats().Requests["live"]["200"] != 1 {
		t.Fatalf("live: %d, requests %v", resp.StatusCode, srv.Stats().Requests)
	}
}

// TestHTTPServerCutsSlowHeader: a client that never finishes its header has
// its connection closed after ReadHeaderTimeout, without an answer and
// without reaching the handler. (The timeout is shortened from 10 s to keep
// the test quick; TestHTTPServerLimits checks the real value.)
func TestHTTPServerCutsSlowHeader(t *testing.T) {
	srv := newTestServer(t)
	const timeout = 300 * time.Millisecond
	addr := serveHTTPServer(t, srv, func(hs *http.Server) { hs.ReadHeaderTimeout = timeout })
	// The server's header deadline starts when it accepts, which can be
	// before Dial returns here: start the clock before dialling.
	stalls := testutil.StartStalls()
	start := time.Now()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /api/0/relays/live/ HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(make([]byte, 1024))
	elapsed, lost := time.Since(start), stalls.Stop()
	var ne net.Error
	if n != 0 || err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("read %d bytes, err %v after %s: want the server to close the connection", n, err, elapsed)
	}
	if elapsed < timeout || elapsed > timeout+5*time.Second+lost {
		t.Errorf("connection closed after %s, want about %s (%s lost to the machine)", elapsed, timeout, lost)
	}
	if n := len(srv.Stats().Requests); n != 0 {
		t.Errorf("the handler saw the request: %v", srv.Stats().Requests)
	}
}

// TestHTTPServerCutsSlowBody: a body that stalls is cut at its own read
// deadline (HTTPBodyTimeout, shortened from 10 s): the request is answered
// 408 and holds no slot.
func TestHTTPServerCutsSlowBody(t *testing.T) {
	srv := newTestServer(t)
	srv.limits.bodyTimeout = 300 * time.Millisecond
	addr := serveHTTPServer(t, srv, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p := srv.cfg.Projects[0]
	req := "POST " + p.EnvelopePath() + " HTTP/1.1\r\nHost: x\r\nX-Sentry-Auth: " + p.AuthHeader("t") +
		"\r\nContent-Length: 1000\r\n\r\n{}\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "request body not received in time") {
		t.Fatalf("stalled body: %d %s", resp.StatusCode, b)
	}
	if st := srv.Stats(); st.Errors["body_timeout"] != 1 || len(srv.slots) != 0 || len(srv.readSlots) != 0 {
		t.Errorf("errors %v, slots held %d + %d", st.Errors, len(srv.slots), len(srv.readSlots))
	}
}

// TestHTTPServerHeaderCap: headers up to MaxHeaderBytes are served, larger
// ones get 431 before any handler runs.
func TestHTTPServerHeaderCap(t *testing.T) {
	srv := newTestServer(t)
	addr := serveHTTPServer(t, srv, nil)
	get := func(headerBytes int) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/0/relays/live/", nil)
		req.Header.Set("X-Big", strings.Repeat("a", headerBytes))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(32 << 10); code != 200 {
		t.Errorf("32 KiB header: %d, want 200", code)
	}
	if code := get(HTTPMaxHeaderBytes + 8<<10); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("72 KiB header: %d, want 431", code)
	}
	if n := srv.Stats().Requests["live"]["200"]; n != 1 {
		t.Errorf("live answered %d times, want 1", n)
	}
}

// TestHTTPServerResetThroughListener: the reset fault still closes with a
// TCP reset when the connection is wrapped by Server.Listener.
func TestHTTPServerResetThroughListener(t *testing.T) {
	srv := newTestServer(t)
	if err := srv.SetFaults(Faults{Inject: []Injection{{Route: "live", Reset: true, Probability: 1}}}); err != nil {
		t.Fatal(err)
	}
	addr := serveHTTPServer(t, srv, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /api/0/relays/live/ HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 64))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after the reset fault: %v, want ECONNRESET", err)
	}
}
