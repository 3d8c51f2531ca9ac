package blast

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// Client names accepted by Config.Client.
const (
	ClientFastHTTP = "fasthttp" // default: see the package doc for the measurement
	ClientNetHTTP  = "net/http"
)

// request is one pool entry prepared for sending: everything a sender
// needs, computed once before the clock starts.
type request struct {
	url     string // absolute URL of the project's envelope endpoint
	auth    string // X-Sentry-Auth
	ua, xff string
	body    []byte // pre-encoded; never modified
	kind    uint8  // index into runner.kinds
}

// httpClient makes senders; one sender per worker goroutine, each used by
// that goroutine only. There are two implementations, fasthttp and net/http,
// chosen by measurement (package doc).
type httpClient interface {
	newSender() sender
	close()
}

type sender interface {
	// send posts r and returns the response status, or an error once the
	// request failed or its timeout passed.
	send(r *request) (status int, err error)
}

type clientOptions struct {
	host     string // host:port
	encoding string // Content-Encoding; "" for identity
	timeout  time.Duration
	maxConns int
}

func newHTTPClient(name string, o clientOptions) (httpClient, error) {
	switch name {
	case "", ClientFastHTTP:
		return newFastClient(o), nil
	case ClientNetHTTP, "nethttp":
		return newNetClient(o), nil
	}
	return nil, fmt.Errorf("blast: unknown client %q (want %s or %s)", name, ClientFastHTTP, ClientNetHTTP)
}

const contentType = "application/x-sentry-envelope"

// idleTimeout closes idle connections before a server's keep-alive timeout
// would (Relay's limits.keepalive_timeout defaults to 5 s): a POST on a
// connection the server just closed fails and is not retried (it is not
// idempotent), which would count as a spurious reset.
const idleTimeout = 3 * time.Second

// fastClient uses one fasthttp.HostClient with up to maxConns connections;
// requests beyond wait for one (bounded by the request timeout).
type fastClient struct {
	hc       *fasthttp.HostClient
	encoding string
	timeout  time.Duration
}

func newFastClient(o clientOptions) *fastClient {
	return &fastClient{
		hc: &fasthttp.HostClient{
			Addr:                     o.host,
			MaxConns:                 o.maxConns,
			MaxConnWaitTimeout:       o.timeout, // DoTimeout's own deadline ends the wait first
			NoDefaultUserAgentHeader: true,
			MaxIdleConnDuration:      idleTimeout,
			MaxResponseBodySize:      1 << 20,
			DisablePathNormalizing:   true,
			// LIFO reuses the most recent idle connection: after a burst the
			// extra connections go idle and close instead of all rotating.
			ConnPoolStrategy: fasthttp.LIFO,
			// Writers are pooled per request, not per connection: a buffer
			// that holds headers and a typical body makes one write(2) per
			// request instead of two, which shows in blast's CPU per request
			// (BenchmarkSendFastHTTP; internal/cmd/blastbench).
			WriteBufferSize: 32 << 10,
			// Dual stack: a target on an IPv6 address (or a name that
			// resolves only to one) is reached too; fasthttp's Dial is
			// IPv4 only.
			Dial: (&fasthttp.TCPDialer{Concurrency: 0}).DialDualStack,
		},
		encoding: o.encoding,
		timeout:  o.timeout,
	}
}

func (c *fastClient) close() { c.hc.CloseIdleConnections() }

func (c *fastClient) newSender() sender {
	req := fasthttp.AcquireRequest()
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType(contentType)
	if c.encoding != "" {
		req.Header.Set("Content-Encoding", c.encoding)
	}
	return &fastSender{c: c, req: req, resp: fasthttp.AcquireResponse()}
}

type fastSender struct {
	c    *fastClient
	req  *fasthttp.Request
	resp *fasthttp.Response
}

func (s *fastSender) send(r *request) (int, error) {
	req := s.req
	req.SetRequestURI(r.url)
	req.Header.Set("X-Sentry-Auth", r.auth)
	req.Header.SetUserAgent(r.ua)
	req.Header.Set("X-Forwarded-For", r.xff)
	req.SetBodyRaw(r.body)
	if err := s.c.hc.DoTimeout(req, s.resp, s.c.timeout); err != nil {
		return 0, err
	}
	return s.resp.StatusCode(), nil
}

// netClient uses net/http with a Transport tuned for one host: up to
// maxConns connections, all kept idle between requests, no transparent
// response decompression.
type netClient struct {
	c        *http.Client
	tr       *http.Transport
	encoding string
}

func newNetClient(o clientOptions) *netClient {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: o.timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        o.maxConns,
		MaxIdleConnsPerHost: o.maxConns,
		MaxConnsPerHost:     o.maxConns,
		IdleConnTimeout:     idleTimeout,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &netClient{c: &http.Client{Transport: tr, Timeout: o.timeout}, tr: tr, encoding: o.encoding}
}

func (c *netClient) close() { c.tr.CloseIdleConnections() }

func (c *netClient) newSender() sender { return &netSender{c: c, urls: map[string]*url.URL{}} }

type netSender struct {
	c    *netClient
	urls map[string]*url.URL // parsed once per project URL, read-only afterwards
}

func (s *netSender) send(r *request) (int, error) {
	u := s.urls[r.url]
	if u == nil {
		var err error
		if u, err = url.Parse(r.url); err != nil {
			return 0, err
		}
		s.urls[r.url] = u
	}
	h := make(http.Header, 5)
	h["Content-Type"] = []string{contentType}
	h["X-Sentry-Auth"] = []string{r.auth}
	h["User-Agent"] = []string{r.ua}
	h["X-Forwarded-For"] = []string{r.xff}
	if s.c.encoding != "" {
		h["Content-Encoding"] = []string{s.c.encoding}
	}
	req := &http.Request{
		Method:        http.MethodPost,
		URL:           u,
		Host:          u.Host,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(r.body)),
		ContentLength: int64(len(r.body)),
		Proto:         "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
	resp, err := s.c.c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// Error classes of Result.Errors.
const (
	ClassRefused = "refused" // connection refused
	ClassReset   = "reset"   // connection reset or closed by the peer mid-request
	ClassTimeout = "timeout" // --timeout passed (dial, write or read)
	ClassOther   = "other"
)

var errorClasses = [...]string{ClassRefused, ClassReset, ClassTimeout, ClassOther}

// classify maps a client error to an index of errorClasses.
func classify(err error) int {
	var te interface{ Timeout() bool }
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return 0
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, net.ErrClosed): // net/http: the peer reset while we were still writing
		return 1
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout),
		errors.Is(err, fasthttp.ErrNoFreeConns), // waited --timeout for a connection
		errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &te) && te.Timeout():
		return 2
	}
	return 3
}
