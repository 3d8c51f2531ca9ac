package upstream

import (
	"net/http"
	"time"
)

// The limits of the http.Server that HTTPServer builds.
const (
	// HTTPReadHeaderTimeout bounds reading a request's header: a client
	// that trickles its header (slowloris) has its connection closed.
	HTTPReadHeaderTimeout = 10 * time.Second
	// HTTPReadTimeout bounds reading a whole request, body included. The
	// body is read into a buffer while one of the server's few body slots
	// is held, so a stalled body must not hold it for long: reading fails,
	// the request is answered 400 (body_read_error) and the slot released.
	HTTPReadTimeout = 60 * time.Second
	// HTTPIdleTimeout closes keep-alive connections idle for this long.
	HTTPIdleTimeout = 120 * time.Second
	// HTTPMaxHeaderBytes caps a request's header; larger ones are answered
	// 431 by net/http before any handler runs.
	HTTPMaxHeaderBytes = 64 << 10
)

// HTTPServer returns an http.Server that serves s.Handler() with the limits
// above. There is no WriteTimeout: injected latency (up to 5 min) and hanging
// outages (up to 1 h) hold answers back on purpose. Serve it with
// hs.Serve(listener); hs.Shutdown lets requests in flight finish.
//
// cmd/fake-upstream and orchestrate's steps both serve through it, so what
// orchestrate measures is the server the binary runs.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: HTTPReadHeaderTimeout,
		ReadTimeout:       HTTPReadTimeout,
		IdleTimeout:       HTTPIdleTimeout,
		MaxHeaderBytes:    HTTPMaxHeaderBytes,
	}
}
