package upstream

import (
	"log"
	"net"
	"net/http"
	"strconv"
	"time"
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
