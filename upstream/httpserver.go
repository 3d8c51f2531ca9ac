package upstream

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/internal/tally"
)

// The limits of the server Start runs, and of each body and answer.
const (
	// HTTPReadHeaderTimeout bounds reading a request's header (slowloris).
	HTTPReadHeaderTimeout = 10 * time.Second
	// HTTPReadTimeout bounds reading a request on routes that read no
	// body; bodies have their own deadlines (HTTPBodyTimeout and on).
	HTTPReadTimeout = 60 * time.Second
	// HTTPIdleTimeout closes keep-alive connections idle for this long.
	HTTPIdleTimeout = 120 * time.Second
	// HTTPMaxHeaderBytes caps a request's header (431 beyond).
	HTTPMaxHeaderBytes = 64 << 10

	// HTTPBodyTimeout bounds the wait for a body's first BodyPreSlotBytes,
	// read holding no slot (408 body_timeout beyond), so a body that does
	// not come delays nobody.
	HTTPBodyTimeout = 10 * time.Second
	// BodyPreSlotBytes is how much of a body is read without a slot; the
	// rest of a larger body takes a large-body slot and must arrive at
	// HTTPMinBodyRate (bytes/s) on average after HTTPBodyGrace, or 408.
	BodyPreSlotBytes = 16 << 10
	HTTPMinBodyRate  = 1 << 20
	HTTPBodyGrace    = 2 * time.Second

	// HTTPWriteTimeout and HTTPMinWriteRate (bytes/s) bound each answer:
	// HTTPWriteTimeout plus its size at HTTPMinWriteRate from its first
	// byte, so injected latency before it is not cut. A client that does
	// not read is cut there (http_layer.write_timeouts).
	HTTPWriteTimeout = 10 * time.Second
	HTTPMinWriteRate = 1 << 20
)

// httpLimits are the per-body and per-answer limits (tests shorten them).
type httpLimits struct {
	bodyTimeout  time.Duration
	bodyGrace    time.Duration
	minBodyRate  int64
	writeTimeout time.Duration
	minWriteRate int64
}

// atRate is how long n bytes take at rate bytes/s, for any int64 n.
func atRate(n, rate int64) time.Duration {
	if n <= 0 || rate <= 0 {
		return 0
	}
	return time.Duration(n/rate)*time.Second + time.Duration(n%rate)*time.Second/time.Duration(rate)
}

// httpServer returns the http.Server that serves s.Handler() with the
// limits above. It has no WriteTimeout, which would run from the request's
// start and cut injected latency: each answer gets its own write deadline.
func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: HTTPReadHeaderTimeout,
		ReadTimeout:       HTTPReadTimeout,
		IdleTimeout:       HTTPIdleTimeout,
		MaxHeaderBytes:    HTTPMaxHeaderBytes,
		ConnState:         s.connState,
		ConnContext:       connContext,
		ErrorLog:          log.New(serverLog{s}, "", 0),
	}
}

// writeDeadliner sets a write deadline without the allocation of
// http.ResponseController.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// startWriteDeadline gives the answer about to be written its deadline:
// HTTPWriteTimeout plus its Content-Length (if set) at HTTPMinWriteRate.
func (w *statusWriter) startWriteDeadline() {
	w.writeStart = time.Now()
	var n int64
	if v := w.ResponseWriter.Header()["Content-Length"]; len(v) == 1 {
		n, _ = strconv.ParseInt(v[0], 10, 64)
	}
	w.extendWriteDeadline(n)
}

// extendWriteDeadline moves the answer's deadline to what total bytes may
// take, counted from its first byte.
func (w *statusWriter) extendWriteDeadline(total int64) {
	if d, ok := w.ResponseWriter.(writeDeadliner); ok {
		_ = d.SetWriteDeadline(w.writeStart.Add(w.lim.writeTimeout + atRate(total, w.lim.minWriteRate)))
	}
}

// setBodyDeadline sets conn's read deadline, if there is a conn.
func setBodyDeadline(conn net.Conn, t time.Time) {
	if conn != nil {
		_ = conn.SetReadDeadline(t)
	}
}

// What Go's HTTP server answers or cuts before any handler runs (431, 400,
// header timeouts) is counted in Stats.HTTPLayer from each connection's
// states (connState) and from a trackedConn wrapping it; lines net/http
// logs are counted by class too (and still printed).

// connKey is the context key of a request's connection (connContext).
type connKey struct{}

// requestConn returns the connection req arrived on, or nil when the
// handler is served by another server (httptest with Handler).
func requestConn(req *http.Request) net.Conn {
	c, _ := req.Context().Value(connKey{}).(net.Conn)
	return c
}

// Phases of a tracked connection, between the states net/http reports.
const (
	phaseNew     int32 = iota // accepted, no request yet
	phasePending              // a request's header was read (or failed), no handler yet
	phaseServing              // a handler took the request
	phaseIdle                 // between requests of a keep-alive connection
)

// trackedConn is an accepted connection that remembers what the HTTP layer
// did on it, including answers net/http wrote to it before any handler.
type trackedConn struct {
	net.Conn
	s            *Server
	phase        atomic.Int32
	readTimedOut atomic.Bool // a read hit its deadline since the last request
	readEOF      atomic.Bool // the client closed its side
	rejected     atomic.Bool // net/http answered the pending request itself
	writeTimeout atomic.Bool // a write hit its deadline (counted once)
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.readTimedOut.Store(true)
		case errors.Is(err, io.EOF):
			c.readEOF.Store(true)
		}
	}
	return n, err
}

func (c *trackedConn) Write(b []byte) (int, error) {
	if c.phase.Load() == phasePending && c.rejected.CompareAndSwap(false, true) {
		c.s.countOnce(func(g *counters) {
			if c.readEOF.Load() {
				// net/http answers a header cut short by a close, to nobody.
				g.http.closedMidHeader.Add(1)
			} else {
				g.http.rejected[rejectedStatus(b)].Add(1)
			}
		})
	}
	n, err := c.Conn.Write(b)
	if errors.Is(err, os.ErrDeadlineExceeded) && c.writeTimeout.CompareAndSwap(false, true) {
		c.s.countOnce(func(g *counters) { g.http.writeTimeouts.Add(1) })
	}
	return n, err
}

// countOnce counts outside a request into the current generation, holding
// it as a request does, so that a reset waits for the count.
func (s *Server) countOnce(count func(*counters)) {
	g := s.acquire()
	count(g)
	g.inflight.Add(-1)
}

// SetLinger lets the reset fault reset the connection through the wrapper.
func (c *trackedConn) SetLinger(sec int) error {
	if tc, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
		return tc.SetLinger(sec)
	}
	return errors.ErrUnsupported
}

// CloseWrite keeps net/http's half-close after a 431 answer working.
func (c *trackedConn) CloseWrite() error {
	if tc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return tc.CloseWrite()
	}
	return errors.ErrUnsupported
}

// rejectedStatus reads the status of an answer net/http wrote itself
// ("HTTP/1.1 431 …"); 0 if b is not one.
func rejectedStatus(b []byte) int {
	if len(b) < 12 || string(b[:7]) != "HTTP/1." || b[8] != ' ' {
		return 0
	}
	code, err := strconv.Atoi(string(b[9:12]))
	if err != nil || code < 100 || code >= 600 {
		return 0
	}
	return code
}

// trackingListener wraps every accepted connection in a trackedConn.
type trackingListener struct {
	net.Listener
	s *Server
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: c, s: l.s}, nil
}

// listener wraps ln so that connections are counted in Stats.HTTPLayer.
func (s *Server) listener(ln net.Listener) net.Listener { return trackingListener{ln, s} }

// connContext puts the connection into every request's context, for body
// read deadlines and markServing.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// connState follows a connection through net/http's states and counts,
// when it closes, what it was doing if no handler had its request.
func (s *Server) connState(conn net.Conn, state http.ConnState) {
	if state == http.StateIdle {
		// No answer's write deadline carries over to the next request.
		_ = conn.SetWriteDeadline(time.Time{})
	}
	c, ok := conn.(*trackedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateNew:
		s.countOnce(func(g *counters) { g.http.connections.Add(1) })
	case http.StateActive:
		c.phase.Store(phasePending)
		c.rejected.Store(false)
	case http.StateIdle:
		c.phase.Store(phaseIdle)
		c.readTimedOut.Store(false)
	case http.StateClosed:
		s.countClosed(c)
	}
}

// countClosed counts a connection that closed before a handler had its
// request (closing while idle or after a handler is normal).
func (s *Server) countClosed(c *trackedConn) {
	phase := c.phase.Load()
	if phase != phaseNew && (phase != phasePending || c.rejected.Load()) {
		return // closed normally, or counted when the answer was written
	}
	s.countOnce(func(g *counters) {
		switch {
		case c.readTimedOut.Load():
			g.http.headerTimeouts.Add(1)
		case phase == phaseNew:
			g.http.closedBeforeRequest.Add(1)
		default:
			g.http.closedMidHeader.Add(1)
		}
	})
}

// markServing records that a handler took the request on req's connection.
func markServing(req *http.Request) {
	if c, ok := requestConn(req).(*trackedConn); ok {
		c.phase.Store(phaseServing)
		c.readTimedOut.Store(false)
	}
}

// Classes of the lines net/http writes to its ErrorLog.
var serverLogClasses = [...]struct{ contains, class string }{
	{"http: TLS handshake error", "tls_handshake"},
	{"http: panic serving", "panic"},
	{"http: Accept error", "accept"},
	{"superfluous response.WriteHeader", "superfluous_write_header"},
	{"on hijacked connection", "hijacked_write"},
	{"http: invalid Content-Length", "invalid_content_length"},
	{"Transfer-Encoding of", "conflicting_length"},
	{"http2: ", "http2"},
}

// otherServerLog is the class of a line no entry matches.
const otherServerLog = "other"

// classifyServerLog names the class of an ErrorLog line, from a fixed set
// so that clients cannot grow the table.
func classifyServerLog(line string) string {
	for _, c := range serverLogClasses {
		if strings.Contains(line, c.contains) {
			return c.class
		}
	}
	return otherServerLog
}

// serverLog counts each ErrorLog line by class and prints it to the
// standard logger, as net/http does without an ErrorLog.
type serverLog struct{ s *Server }

func (l serverLog) Write(p []byte) (int, error) {
	line := string(p)
	l.s.countOnce(func(g *counters) { g.http.errorLog.Add(classifyServerLog(line)) })
	log.Print(strings.TrimSuffix(line, "\n"))
	return len(p), nil
}

// httpLayerCounters are the HTTPLayer counters of one generation.
type httpLayerCounters struct {
	connections         atomic.Int64
	closedBeforeRequest atomic.Int64
	closedMidHeader     atomic.Int64
	headerTimeouts      atomic.Int64
	rejected            [600]atomic.Int64 // by status; 0: unreadable
	writeTimeouts       atomic.Int64
	errorLog            tally.Reasons // by class (a fixed set)
}

// HTTPLayer counts what Go's HTTP server did on connections before (or
// instead of) a handler, and the answers it cut.
type HTTPLayer struct {
	Connections int64 `json:"connections" prom:"http_connections_total" help:"Connections accepted."`
	// ClosedBeforeRequest: closed without sending a byte (clients' spare
	// connections do this too).
	ClosedBeforeRequest int64 `json:"closed_before_request" prom:"http_layer_closed_total,when=before_request" help:"Connections closed before a handler had their request, by when."`
	// ClosedMidHeader: the client closed in the middle of a header.
	ClosedMidHeader int64 `json:"closed_mid_header" prom:"http_layer_closed_total,when=mid_header"`
	// HeaderTimeouts: cut by ReadHeaderTimeout before the header was complete.
	HeaderTimeouts int64 `json:"header_timeouts" prom:"http_layer_closed_total,when=header_timeout"`
	// Rejected: answered by the HTTP server itself, by status ("431"
	// header over the cap, "400" a request that does not parse, "501"
	// unknown transfer coding, "417" unknown expectation).
	Rejected map[string]int64 `json:"rejected" prom:"http_layer_rejected_total,status" help:"Requests answered by Go's HTTP server itself, by status."`
	// WriteTimeouts: connections whose answer missed its write deadline
	// (the client did not read it in time).
	WriteTimeouts int64            `json:"write_timeouts" prom:"http_write_timeouts_total" help:"Connections whose answer missed its write deadline."`
	ErrorLog      map[string]int64 `json:"error_log" prom:"http_error_log_total,class" help:"Lines of Go's HTTP server error log, by class."`
}

func (h *httpLayerCounters) snapshot() HTTPLayer {
	rejectedNames := statusNames
	rejectedNames[0] = "unreadable"
	return HTTPLayer{
		Connections:         h.connections.Load(),
		ClosedBeforeRequest: h.closedBeforeRequest.Load(),
		ClosedMidHeader:     h.closedMidHeader.Load(),
		HeaderTimeouts:      h.headerTimeouts.Load(),
		Rejected:            loadNonZero(rejectedNames[:], h.rejected[:]),
		WriteTimeouts:       h.writeTimeouts.Load(),
		ErrorLog:            h.errorLog.Snapshot(),
	}
}
