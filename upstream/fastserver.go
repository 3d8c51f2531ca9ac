package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// FastHTTPServer returns a fasthttp.Server that serves s like HTTPServer's
// http.Server, for less CPU per forwarded envelope: orchestrate runs the fake
// upstream on the machine it measures Relay on, where every cycle the
// harness spends is one Relay cannot use (docs/harness-cost.md). Serve it
// with fs.Serve(s.Listener(ln)); fs.Shutdown lets requests in flight finish.
//
// Envelopes (POST /api/<project_id>/envelope/) are served natively by the
// same checks, decoding and counting as on net/http (sinkEnvelope). Every
// other request, and envelopes while faults are set or a test hook is
// installed, go to s.Handler() through fasthttpadaptor, with their bodies
// read first under the same limits (fastBufferBody). What differs from
// HTTPServer:
//
//   - fasthttp answers what it rejects before any handler itself, in
//     Relay's error form: a header over HTTPMaxHeaderBytes 431, a read
//     timeout 408 (the header within HTTPReadHeaderTimeout, a body's first
//     BodyPreSlotBytes within HTTPBodyTimeout after it), anything that does
//     not parse 400; each is counted in http_layer.rejected by status.
//     http_layer.header_timeouts, closed_before_request and
//     closed_mid_header stay 0: fasthttp does not tell them apart.
//   - A client that hangs up is noticed only when its answer is written,
//     so requests are not dropped as client_gone while they wait for a slot.
//   - An answer's write deadline is HTTPWriteTimeout from its start (for
//     GET /projects, plus 1 KiB a project at HTTPMinWriteRate), not from
//     its first byte: injected latency runs before it and is not cut.
func (s *Server) FastHTTPServer() *fasthttp.Server {
	slow := fasthttpadaptor.NewFastHTTPHandler(s.Handler())
	return &fasthttp.Server{
		Handler:        func(ctx *fasthttp.RequestCtx) { s.serveFast(ctx, slow) },
		HeaderReceived: s.fastHeaderReceived,
		ErrorHandler:   s.fastError,
		ConnState:      s.fastConnState,
		Logger:         fastLog{s},
		// The header and, until HeaderReceived moves it, a body's start.
		ReadTimeout:  HTTPReadHeaderTimeout,
		WriteTimeout: s.limits.writeTimeout,
		IdleTimeout:  HTTPIdleTimeout,
		// A header must fit the read buffer, else ErrSmallBuffer: 431.
		ReadBufferSize: HTTPMaxHeaderBytes,
		// With StreamRequestBody, MaxRequestBodySize is what fasthttp
		// reads of a body before the handler; readBody takes the rest
		// under a read slot at HTTPMinBodyRate, as on net/http.
		StreamRequestBody:            true,
		MaxRequestBodySize:           BodyPreSlotBytes,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
	}
}

// fastHeaderReceived gives a request's body its own read deadline once the
// header is in, like readBody on net/http, and GET /projects a write
// deadline that grows with the list it streams.
func (s *Server) fastHeaderReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	rc := fasthttp.RequestConfig{ReadTimeout: s.limits.bodyTimeout}
	if p := h.RequestURI(); bytes.HasPrefix(p, []byte("/projects")) {
		rc.WriteTimeout = s.limits.writeTimeout + atRate(int64(len(s.cfg.Projects))<<10, s.limits.minWriteRate)
	}
	return rc
}

// serveFast serves one request on fasthttp.
func (s *Server) serveFast(ctx *fasthttp.RequestCtx, slow fasthttp.RequestHandler) {
	if pid, ok := envelopePath(ctx.Path()); ok && ctx.IsPost() && s.hook == nil && !s.faultsSet() {
		s.serveEnvelopeFast(ctx, pid)
		return
	}
	if e := s.fastBufferBody(ctx); e != nil {
		c := s.acquire()
		defer c.inflight.Add(-1)
		r, _ := s.routes.lookup(string(ctx.Path()))
		s.writeErrorFast(ctx, c, r, e)
		return
	}
	slow(ctx)
}

// faultsSet reports whether any fault may apply to a request.
func (s *Server) faultsSet() bool {
	st := s.faults.Load()
	return st != nil && st.active
}

// envelopePath returns the project id of an envelope route's path
// (/api/<1–18 digits>/envelope/, the route table's pattern and check).
func envelopePath(p []byte) (string, bool) {
	const prefix, suffix = "/api/", "/envelope/"
	if len(p) <= len(prefix)+len(suffix) || string(p[:len(prefix)]) != prefix || string(p[len(p)-len(suffix):]) != suffix {
		return "", false
	}
	id := p[len(prefix) : len(p)-len(suffix)]
	if len(id) > 18 {
		return "", false
	}
	for _, ch := range id {
		if ch < '0' || ch > '9' {
			return "", false
		}
	}
	return string(id), true
}

// fastBody is the body of a request on fasthttp: the part fasthttp read
// before the handler, then the rest from the connection.
func fastBody(ctx *fasthttp.RequestCtx) bodySource {
	r := ctx.RequestBodyStream()
	if r == nil {
		r = bytes.NewReader(ctx.Request.Body())
	}
	return bodySource{r: r, n: int64(ctx.Request.Header.ContentLength()), conn: ctx.Conn(), ctx: ctx, preRead: true}
}

// fastBufferBody reads the body of a request for fasthttpadaptor (which
// would read all of it into memory, whatever its size) with readBody's
// limits and slots, and hands it over as the request's body.
func (s *Server) fastBufferBody(ctx *fasthttp.RequestCtx) *httpError {
	if !ctx.Request.IsBodyStream() {
		return nil
	}
	bp, large, e := s.readBody(fastBody(ctx))
	if e != nil {
		return e
	}
	ctx.Request.SetBody(*bp)
	s.putBuf(bp)
	if large {
		<-s.readSlots
	}
	return nil
}

// serveEnvelopeFast is serveRoute and handleEnvelope for an envelope on
// fasthttp (no faults, no hook: serveFast sends those to the adaptor).
func (s *Server) serveEnvelopeFast(ctx *fasthttp.RequestCtx, projectID string) {
	c := s.acquire()
	status := http.StatusOK
	defer func() {
		if p := recover(); p != nil {
			c.panics.Add(1)
			status = http.StatusInternalServerError
			s.writeErrorFast(ctx, c, -1, newError(status, "panic", "internal error", fmt.Sprint(p)))
		}
		c.requests[routeEnvelope][status].Add(1)
		c.inflight.Add(-1)
	}()
	h := &ctx.Request.Header
	in := envelopeRequest{
		projectID: projectID,
		relayID:   string(h.Peek("X-Sentry-Relay-Id")),
		signature: string(h.Peek("X-Sentry-Relay-Signature")),
		auth:      string(h.Peek("X-Sentry-Auth")),
		authz:     string(h.Peek("Authorization")),
		rawQuery:  string(ctx.URI().QueryString()),
		body:      fastBody(ctx),
	}
	for _, v := range h.PeekAll("Content-Encoding") {
		in.encLines = append(in.encLines, string(v))
	}
	if s.batch != nil && in.relayID != "" {
		if handled, e := s.batchForward(ctx, c, &in); handled {
			if e != nil {
				status = e.status
				s.writeErrorFast(ctx, c, -1, e)
			}
			return
		}
	}
	if e := s.sinkEnvelope(c, &in, (*fastAnswer)(ctx)); e != nil {
		status = e.status
		s.writeErrorFast(ctx, c, -1, e)
	}
}

// fastAnswer answers an accepted envelope on fasthttp.
type fastAnswer fasthttp.RequestCtx

func (a *fastAnswer) answerEnvelope(id []byte) {
	ctx := (*fasthttp.RequestCtx)(a)
	var buf [envelopeAnswerLen]byte
	ctx.SetContentType("application/json")
	ctx.Response.SetBody(appendEnvelopeAnswer(buf[:0], id))
}

// writeErrorFast answers with e on fasthttp and counts it in c, and under
// route r unless r < 0 (the caller counts the status). An error of status 0
// (the client is gone) gets no answer: the connection is closed.
func (s *Server) writeErrorFast(ctx *fasthttp.RequestCtx, c *counters, r int, e *httpError) {
	c.errors.add(e.reason, 1)
	if r >= 0 {
		c.requests[r][e.status].Add(1)
	}
	if e.status == 0 {
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(net.Conn) {})
		return
	}
	writeJSONFast(ctx, e.status, e.body)
}

func writeJSONFast(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"detail":"internal error encoding the response","causes":[]}`)
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.SetBody(b)
}

// fastError answers what fasthttp rejects before any handler, in Relay's
// error form, and counts it in http_layer.rejected by status.
func (s *Server) fastError(ctx *fasthttp.RequestCtx, err error) {
	var e *httpError
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		e = newError(http.StatusRequestHeaderFieldsTooLarge, "header_too_large", "request header too large",
			fmt.Sprintf("more than %d bytes", HTTPMaxHeaderBytes))
	case errors.As(err, &ne) && ne.Timeout():
		e = newError(http.StatusRequestTimeout, "read_timeout", "request not received in time", err.Error())
	default:
		e = newError(http.StatusBadRequest, "bad_request", "malformed HTTP request", err.Error())
	}
	g := s.acquire()
	g.http.rejected[e.status].Add(1)
	g.inflight.Add(-1)
	writeJSONFast(ctx, e.status, e.body)
}

// fastConnState counts accepted connections.
func (s *Server) fastConnState(_ net.Conn, state fasthttp.ConnState) {
	if state == fasthttp.StateNew {
		g := s.acquire()
		g.http.connections.Add(1)
		g.inflight.Add(-1)
	}
}

// fastLog counts what fasthttp logs (http_layer.error_log, by class) and
// prints it.
type fastLog struct{ s *Server }

func (l fastLog) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	g := l.s.acquire()
	g.http.errorLog.add(classifyServerLog(line), 1)
	g.inflight.Add(-1)
	log.Print(line)
}

// The HTTP servers a Server can be served by (ServeWith).
const (
	NetHTTP  = "net"      // HTTPServer: net/http
	FastHTTP = "fasthttp" // FastHTTPServer: fasthttp, less CPU per envelope
)

// HTTPServers are the names ServeWith takes.
var HTTPServers = []string{NetHTTP, FastHTTP}

// Serving is a running HTTP server of either kind.
type Serving interface {
	// Shutdown stops accepting and waits until requests in flight finish
	// or ctx is done.
	Shutdown(ctx context.Context) error
	// Close stops at once.
	Close() error
}

// ServeWith serves s on ln (wrapped by Listener) with the named server,
// NetHTTP or FastHTTP, in a goroutine; Serve's error, if it fails before
// Shutdown, goes to errc (which may be nil).
func (s *Server) ServeWith(kind string, ln net.Listener, errc chan<- error) (Serving, error) {
	var srv Serving
	var serve func() error
	switch kind {
	case NetHTTP, "":
		hs := s.HTTPServer()
		srv, serve = hs, func() error { return hs.Serve(s.Listener(ln)) }
	case FastHTTP:
		fs := fastServing{s.FastHTTPServer()}
		srv, serve = fs, func() error { return fs.Serve(s.Listener(ln)) }
	default:
		return nil, fmt.Errorf("unknown HTTP server %q (want %s)", kind, strings.Join(HTTPServers, " or "))
	}
	go func() {
		err := serve()
		if errc != nil && err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	return srv, nil
}

// fastServing is a fasthttp.Server as a Serving.
type fastServing struct{ *fasthttp.Server }

func (f fastServing) Shutdown(ctx context.Context) error { return f.ShutdownWithContext(ctx) }

func (f fastServing) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = f.ShutdownWithContext(ctx)
	return nil
}
