package upstream

import (
	"log"
	"net"
	"net/http"
	"strconv"
	"time"
)

// The limits of the http.Server that HTTPServer builds, and of each body
// and answer it serves.
const (
	// HTTPReadHeaderTimeout bounds reading a request's header: a client
	// that trickles its header (slowloris) has its connection closed.
	HTTPReadHeaderTimeout = 10 * time.Second
	// HTTPReadTimeout bounds reading a whole request on routes that read
	// no body (net/http then drains what was sent). Routes that read a
	// body give it its own deadlines (HTTPBodyTimeout, HTTPMinBodyRate).
	HTTPReadTimeout = 60 * time.Second
	// HTTPIdleTimeout closes keep-alive connections idle for this long.
	HTTPIdleTimeout = 120 * time.Second
	// HTTPMaxHeaderBytes caps a request's header; larger ones are answered
	// 431 by net/http before any handler runs.
	HTTPMaxHeaderBytes = 64 << 10

	// HTTPBodyTimeout bounds the wait for a body's first BodyPreSlotBytes
	// (all of a smaller body), read before the request holds any ingest
	// slot: a body that does not come in time is answered 408
	// (body_timeout) and has delayed nobody else.
	HTTPBodyTimeout = 10 * time.Second
	// BodyPreSlotBytes is how much of a body is read without a slot. A
	// larger body then takes one of the few large-body slots and must
	// keep arriving at HTTPMinBodyRate on average, after a grace of
	// HTTPBodyGrace, or it is answered 408: a stalled large body holds
	// its slot for about HTTPBodyGrace, not for a read timeout.
	BodyPreSlotBytes = 16 << 10
	// HTTPMinBodyRate is the slowest average rate (bytes/s) at which the
	// rest of a large body is taken.
	HTTPMinBodyRate = 1 << 20
	// HTTPBodyGrace is added to the time the rest of a large body may take.
	HTTPBodyGrace = 2 * time.Second

	// HTTPWriteTimeout and HTTPMinWriteRate bound each answer: it must be
	// written within HTTPWriteTimeout plus its size at HTTPMinWriteRate
	// (bytes/s), counted from its first byte, so injected latency and
	// hanging outages, which hold an answer back before it starts, are
	// not cut. A client that does not read is cut at the deadline
	// (http_layer.write_timeouts) and the answer's memory let go.
	HTTPWriteTimeout = 10 * time.Second
	HTTPMinWriteRate = 1 << 20
)

// httpLimits are the per-body and per-answer limits a Server applies
// (the constants above; tests shorten them).
type httpLimits struct {
	bodyTimeout  time.Duration
	bodyGrace    time.Duration
	minBodyRate  int64
	writeTimeout time.Duration
	minWriteRate int64
}

func defaultHTTPLimits() httpLimits {
	return httpLimits{
		bodyTimeout: HTTPBodyTimeout, bodyGrace: HTTPBodyGrace, minBodyRate: HTTPMinBodyRate,
		writeTimeout: HTTPWriteTimeout, minWriteRate: HTTPMinWriteRate,
	}
}

// atRate is how long n bytes take at rate bytes/s (without overflowing
// for any int64 n).
func atRate(n, rate int64) time.Duration {
	if n <= 0 || rate <= 0 {
		return 0
	}
	return time.Duration(n/rate)*time.Second + time.Duration(n%rate)*time.Second/time.Duration(rate)
}

// HTTPServer returns an http.Server that serves s.Handler() with the limits
// above. It sets no WriteTimeout (that would run from the request's start
// and cut the injected latency, up to 5 min, and hanging outages, up to
// 1 h); each answer gets its own write deadline instead. Serve it with
// hs.Serve(s.Listener(listener)), which lets /stats count what Go's HTTP
// layer rejects (http_layer); hs.Shutdown lets requests in flight finish.
//
// cmd/fake-upstream and orchestrate's steps both serve through it, so what
// orchestrate measures is the server the binary runs.
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

// writeDeadliner is what http.ResponseController calls to set a write
// deadline; asserting it directly costs no allocation per answer.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// startWriteDeadline gives the answer about to be written its deadline:
// HTTPWriteTimeout plus its Content-Length (if set) at HTTPMinWriteRate.
func (w *statusWriter) startWriteDeadline() {
	d, ok := w.ResponseWriter.(writeDeadliner)
	if !ok || w.lim == nil {
		return
	}
	var n int64
	if v := w.ResponseWriter.Header()["Content-Length"]; len(v) == 1 {
		n, _ = strconv.ParseInt(v[0], 10, 64)
	}
	w.writeStart = time.Now()
	_ = d.SetWriteDeadline(w.writeStart.Add(w.lim.writeTimeout + atRate(n, w.lim.minWriteRate)))
}

// extendWriteDeadline moves the deadline of an answer of unknown length
// (streamed) to what total bytes may take, counted from its first byte.
func (w *statusWriter) extendWriteDeadline(total int64) {
	if d, ok := w.ResponseWriter.(writeDeadliner); ok && w.lim != nil {
		_ = d.SetWriteDeadline(w.writeStart.Add(w.lim.writeTimeout + atRate(total, w.lim.minWriteRate)))
	}
}

// setBodyDeadline sets conn's read deadline (nil conn: not served through
// HTTPServer, nothing to set).
func setBodyDeadline(conn net.Conn, t time.Time) {
	if conn != nil {
		_ = conn.SetReadDeadline(t)
	}
}
