// Package upstream is a fake Sentry that a Relay in managed mode registers
// with, pulls project and global configs from, and forwards envelopes,
// metrics and outcomes to (docs/protocol.md). It counts everything it
// receives and serves the counts at GET /stats.
//
// Routes (Handler):
//
//	POST /api/0/relays/register/challenge/   registration step 1 (signed with the key in the body)
//	POST /api/0/relays/register/response/    registration step 2 (stateless HMAC token)
//	POST /api/0/relays/projectconfigs/       project configs v3 and the global config (signed)
//	POST /api/0/relays/publickeys/           public keys of registered relays (signed)
//	POST /api/0/relays/outcomes/             legacy outcome batches (signed, Relay ≤ 26.5)
//	POST /api/0/relays/metrics/              global metric batches (compressed, signed over the decoded body)
//	GET  /api/0/relays/live/                 {"is_healthy": true}
//	POST /api/<project_id>/envelope/         the envelope sink (Relay or SDKs)
//	GET  /stats[?format=prometheus]          counters; POST /stats/reset zeroes them atomically
//	GET  /projects[?origin=http://host:port] the projects with ready-made DSNs
//	GET|POST /control                        fault injection (see Faults)
//
// Every bad request is answered with a 4xx JSON body {"detail", "causes"} and
// counted by reason in Stats.Errors; unknown routes get 404 JSON; a panic in
// a handler is recovered, counted and answered 500. The routes are a chi
// routing table (router.go). Server.HTTPServer is the http.Server to serve
// Handler with, on a listener wrapped by Server.Listener: the timeouts,
// header cap and per-body and per-answer deadlines cmd/fake-upstream and
// orchestrate both use. /control and /stats/reset answer only the clients
// in Config.ControlFrom (loopback by default).
//
// # Envelope signatures
//
// Relay signs every forwarded envelope over empty data: the signature only
// proves key possession and time (docs/protocol.md, Signatures). An Ed25519
// verification costs about 36 µs on the reference machine, more than half of
// the sink's per-envelope CPU budget, so the sink
//
//   - caches verified signature values per relay: an identical
//     X-Sentry-Relay-Signature value for the same relay id and key covers the
//     same bytes (header ‖ 0x00 ‖ empty data), so it verifies identically;
//     the entry expires when the signed timestamp ages past the max age, so
//     a replayed value is rejected exactly when a fresh verification would
//     reject it. Relay itself signs each request afresh (the timestamp has
//     microsecond precision), so this cache only hits for clients that reuse
//     a signature value within its max age (load drivers, the stand-in relay);
//   - with Config.VerifyEnvelopeEvery = N > 1, fully verifies only every Nth
//     uncached envelope signature; the others are checked for form, relay id
//     and age only (counted as Signatures.SampledOut). N = 1 (default)
//     verifies every uncached signature.
//
// JSON queries (registration, configs, outcomes, metrics) are always verified
// in full over their body when Config.VerifySignatures is on.
package upstream

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
)

// Defaults for Config fields left zero.
const (
	DefaultMaxSignatureAge    = 300 * time.Second
	DefaultRegistrationMaxAge = 60 * time.Second
	DefaultMaxWireBytes       = 20 << 20 // Relay's max_api_payload_size
	DefaultMaxDecodedBytes    = 16 << 20
	// MaxPendingFor bounds --pending-for (which must stay below it): Relay
	// abandons a key still pending after limits.query_timeout (30 s) and
	// caches the project as disabled.
	MaxPendingFor = 25 * time.Second
	// MaxKeysPerRequest caps publicKeys in one project-config request
	// (Relay's cache.batch_size default is 500).
	MaxKeysPerRequest = 500
)

// Config configures a Server. The zero value of every field is usable except
// Projects, which must not be empty.
type Config struct {
	Projects []projects.Project

	// VerifySignatures checks X-Sentry-Relay-Signature on every relay
	// request (New's caller sets it; cmd/fake-upstream defaults it to true).
	VerifySignatures bool
	// MaxSignatureAge bounds the age of signatures on relay requests after
	// registration (default 300 s, like Sentry). Negative: no age check.
	MaxSignatureAge time.Duration
	// RegistrationMaxAge bounds signature and token age in the registration
	// steps (default 60 s, like Sentry). Negative: no age check.
	RegistrationMaxAge time.Duration
	// VerifyEnvelopeEvery N > 1 fully verifies only every Nth uncached
	// envelope signature (see the package doc). 0 or 1: verify all.
	VerifyEnvelopeEvery int
	// BatchForwards > 0 answers Relay's envelope forwards on fasthttp once
	// their header is checked and their body read, and checks, decodes and
	// counts their bodies in batches, the oldest waiting about this long
	// (forwardbatch.go). 0: each forward is checked before it is answered.
	BatchForwards time.Duration
	// HoldForwards > 0, with BatchForwards, holds batched forwards until
	// their counts are read (Stats, /stats, ResetStats, DataEnvelopes,
	// CheckForwards) instead of checking a batch a period after its first
	// forward, and only the relay's registration is checked before a held
	// forward is answered (forwardbatch.go says why that is all Relay
	// needs). Their bodies are copied into slabs of the hold's own, and
	// what they take (body plus holdForwardOverhead each) is bounded by
	// this many bytes: a hold half full is checked in the background
	// (BatchedForwards.HoldFull), a forward that finds it full is checked
	// before it is answered. For a harness that reads counts only after
	// its measured window, so that the checks do not compete with what it
	// measures (ReserveHold, forwardbatch.go).
	HoldForwards int64

	// AllowList, when true, lets only relays added with RegisterRelay (or
	// Relays) register; otherwise any relay may register.
	AllowList bool
	// Relays are known relays (id → public key), e.g. from --relay-credentials.
	Relays map[string]relayauth.PublicKey
	// DenyRelays answers every registration with 403 {"relay":"stop"}.
	DenyRelays bool
	// TokenSecret is the HMAC key for registration tokens (random if empty).
	TokenSecret []byte

	// PendingFor answers each project key as pending until this long after
	// it was first requested (0: never pending; under MaxPendingFor).
	PendingFor time.Duration
	// Quotas are added verbatim to every project config's "quotas".
	Quotas []json.RawMessage
	// InboundFilters turns on the webCrawlers, legacyBrowsers, localhost and
	// browserExtensions inbound filters.
	InboundFilters bool
	// Features replaces the default project feature list when non-nil.
	Features []string

	// MaxWireBytes caps request bodies as received (default 20 MiB);
	// MaxDecodedBytes caps them after Content-Encoding (default 16 MiB).
	MaxWireBytes, MaxDecodedBytes int64

	// ControlFrom are the client networks /control and /stats/reset
	// answer (others get 403); nil: loopback only (127.0.0.0/8, ::1).
	ControlFrom []netip.Prefix

	// Faults in effect from the start (see SetFaults).
	Faults Faults
	// Seed seeds the fault-injection randomness.
	Seed uint64

	// Now is the clock (time.Now if nil); tests move it.
	Now func() time.Time
}

// Server is the fake upstream. All methods are safe for concurrent use.
type Server struct {
	cfg     Config
	batch   *forwardBatch // nil unless Config.BatchForwards
	started time.Time
	now     func() time.Time

	stats atomic.Pointer[counters]

	byKey           projects.Index
	byID            map[int64]int
	relays          sync.Map     // relay id → *relay
	nSelfRegistered atomic.Int64 // relays added by the registration handshake
	secret          []byte
	dec             *compression.Decoder
	bufs            sync.Pool // *[]byte
	writers         sync.Pool // *statusWriter
	sums            sync.Pool // *envelope.Summary
	sampleN         atomic.Uint64
	// slots (ingest slots) bound the requests that decode and scan a body
	// at once: that work is CPU-bound, so a few per core lose nothing. A
	// request takes one only once its whole body is in, so a body that
	// stalls delays nobody.
	slots chan struct{}
	// readSlots bound the bodies larger than BodyPreSlotBytes being read
	// at once, so memory stays under readSlots × wire cap + slots ×
	// decoded cap (+ BodyPreSlotBytes per connection).
	readSlots chan struct{}
	limits    httpLimits
	// controlFrom are the clients /control and /stats/reset answer.
	controlFrom []netip.Prefix

	pendingMu    sync.Mutex
	pendingSince map[int]time.Time // project index → first request
	configRev    string
	globalJSON   []byte

	routes *router
	hook   func(*http.Request) // test hook, called first for every request

	faultMu sync.Mutex // guards faults writes and rng
	faults  atomic.Pointer[faultState]
	rng     *mrand.Rand
}

// relay is one known relay. Entries are replaced, never mutated, except for
// the signature cache.
type relay struct {
	id         string
	pub        relayauth.PublicKey
	registered bool
	known      bool // allow-listed / pre-registered

	sigs      sync.Map // signature value → expiry (unix nanos, math.MaxInt64 = never)
	nSigs     atomic.Int64
	lastSweep atomic.Int64 // unix nanos of the last sweep of a full cache
}

// maxCachedSignatures bounds the signature cache per relay.
const maxCachedSignatures = 4096

// MaxRegisteredRelays bounds the relays that may register on their own
// (relays from Config.Relays and RegisterRelay do not count): each holds a
// signature cache of up to maxCachedSignatures values, so this keeps memory
// bounded (≈ 64 MB at worst) whatever clients do.
const MaxRegisteredRelays = 64

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	if len(cfg.Projects) == 0 {
		return nil, errors.New("upstream: no projects")
	}
	if cfg.MaxSignatureAge == 0 {
		cfg.MaxSignatureAge = DefaultMaxSignatureAge
	}
	if cfg.RegistrationMaxAge == 0 {
		cfg.RegistrationMaxAge = DefaultRegistrationMaxAge
	}
	if cfg.MaxWireBytes <= 0 {
		cfg.MaxWireBytes = DefaultMaxWireBytes
	}
	if cfg.MaxDecodedBytes <= 0 {
		cfg.MaxDecodedBytes = DefaultMaxDecodedBytes
	}
	if cfg.VerifyEnvelopeEvery < 1 {
		cfg.VerifyEnvelopeEvery = 1
	}
	if cfg.PendingFor < 0 || cfg.PendingFor >= MaxPendingFor {
		return nil, fmt.Errorf("upstream: pending-for %s must be ≥ 0 and under %s (Relay gives up on pending keys after 30 s)", cfg.PendingFor, MaxPendingFor)
	}
	for i, q := range cfg.Quotas {
		var obj map[string]any
		if err := json.Unmarshal(q, &obj); err != nil {
			return nil, fmt.Errorf("upstream: quota %d is not a JSON object: %w", i, err)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		cfg:          cfg,
		now:          cfg.Now,
		byKey:        projects.NewIndex(cfg.Projects),
		byID:         make(map[int64]int, len(cfg.Projects)),
		dec:          compression.NewDecoder(cfg.MaxDecodedBytes),
		pendingSince: map[int]time.Time{},
		rng:          mrand.New(mrand.NewPCG(cfg.Seed, 0x6661756c7473)),
		slots:        make(chan struct{}, 2*runtime.GOMAXPROCS(0)+2),
		readSlots:    make(chan struct{}, 2*runtime.GOMAXPROCS(0)+2),
		limits:       defaultHTTPLimits(),
		controlFrom:  append([]netip.Prefix(nil), cfg.ControlFrom...),
		routes:       newRouter(),
	}
	s.started = s.now()
	if cfg.BatchForwards > 0 {
		s.batch = newForwardBatch(s, cfg.BatchForwards, cfg.HoldForwards)
	}
	if s.controlFrom == nil {
		s.controlFrom = loopbackNets()
	}
	for _, p := range s.controlFrom {
		if !p.IsValid() {
			return nil, fmt.Errorf("upstream: control-from: invalid network %v", p)
		}
	}
	for i, p := range cfg.Projects {
		if _, dup := s.byID[p.ID]; dup {
			return nil, fmt.Errorf("upstream: duplicate project id %d", p.ID)
		}
		s.byID[p.ID] = i
	}
	if len(s.byKey) != len(cfg.Projects) {
		return nil, errors.New("upstream: duplicate project public key")
	}
	s.secret = cfg.TokenSecret
	if len(s.secret) == 0 {
		s.secret = make([]byte, 32)
		if _, err := rand.Read(s.secret); err != nil {
			return nil, fmt.Errorf("upstream: token secret: %w", err)
		}
	}
	for id, pub := range cfg.Relays {
		s.relays.Store(id, &relay{id: id, pub: pub, known: true})
	}
	s.stats.Store(newCounters(len(cfg.Projects), s.started))
	if err := s.buildConfigs(); err != nil {
		return nil, err
	}
	if err := s.SetFaults(cfg.Faults); err != nil {
		return nil, err
	}
	return s, nil
}

// RegisterRelay makes a relay known (allow-listed) and registered at once,
// so its requests are accepted without a challenge. A relay that registers
// again with the same id must use the same key.
func (s *Server) RegisterRelay(id string, pub relayauth.PublicKey) {
	s.relays.Store(id, &relay{id: id, pub: pub, known: true, registered: true})
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.checkBatch()
	c := s.stats.Load()
	st := c.snapshot(s)
	st.InFlight = c.inflight.Load()
	return st
}

// resetWait bounds how long ResetStats waits for requests still counting
// into the old generation (a hanging-outage fault can hold one for long).
const resetWait = 2 * time.Second

// ResetStats zeroes every counter atomically and returns the final snapshot
// of the generation it replaced. Requests in flight at the swap finish
// counting into the old generation first (ResetStats waits up to 2 s for
// them; forwards waiting in a batch it checks itself, each taking no
// ingest slot, so they cannot keep it waiting), so the returned snapshot
// plus later ones account for every request.
func (s *Server) ResetStats() Stats {
	old := s.stats.Swap(newCounters(len(s.cfg.Projects), s.now()))
	deadline := time.Now().Add(resetWait)
	for s.checkBatch(); old.inflight.Load() > 0 && time.Now().Before(deadline); s.checkBatch() {
		time.Sleep(100 * time.Microsecond)
	}
	return old.snapshot(s)
}

// Handler returns the HTTP handler serving every route.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// statusWriter records the status for request statistics and gives the
// answer its write deadline as it starts.
type statusWriter struct {
	http.ResponseWriter
	status     int
	lim        *httpLimits
	writeStart time.Time
	answer     [envelopeAnswerLen]byte // the envelope sink's answer
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.startWriteDeadline()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.startWriteDeadline()
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (hijack).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// protocolRoute reports whether faults apply to the route: everything Relay
// talks to, never the harness's own /stats, /projects and /control.
func protocolRoute(r int) bool {
	return r <= routeLive || r == routeNotFound
}

// acquire pins the current counter generation for one request: ResetStats
// waits until no request holds the generation it replaced, so every request
// is counted entirely in one generation and no increment is lost.
func (s *Server) acquire() *counters {
	for {
		c := s.stats.Load()
		c.inflight.Add(1)
		if s.stats.Load() == c {
			return c
		}
		c.inflight.Add(-1)
	}
}

// serveHTTP routes a request (router.lookup) and serves it.
func (s *Server) serveHTTP(rw http.ResponseWriter, req *http.Request) {
	r, projectID := s.routes.lookup(req.URL.Path)
	s.serveRoute(rw, req, r, projectID)
}

// serveRoute serves a request for route r: it pins the counter generation,
// records the answer's status under the route, recovers a panic (counted,
// answered 500 in Relay's error form), applies faults to the Relay-facing
// routes and calls the route's handler.
func (s *Server) serveRoute(rw http.ResponseWriter, req *http.Request, r int, projectID string) {
	c := s.acquire()
	defer func() { c.inflight.Add(-1) }() // c changes on /stats/reset
	w, _ := s.writers.Get().(*statusWriter)
	if w == nil {
		w = new(statusWriter)
	}
	w.ResponseWriter, w.status, w.lim = rw, 0, &s.limits
	markServing(req)
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			c.panics.Add(1)
			if w.status == 0 {
				s.writeError(w, c, newError(http.StatusInternalServerError, "panic", "internal error", fmt.Sprint(p)))
			}
		}
		// Status 0: the connection was dropped without an answer (reset
		// and outage faults).
		if status := w.status; status >= 0 && status < 600 {
			c.requests[r][status].Add(1)
		}
		w.ResponseWriter = nil
		s.writers.Put(w)
	}()
	if s.hook != nil {
		s.hook(req)
	}
	if protocolRoute(r) {
		if done := s.applyFaults(w, req, r, c); done {
			return
		}
	}
	switch r {
	case routeEnvelope:
		s.handleEnvelope(w, req, c, projectID)
	case routeChallenge:
		s.handleChallenge(w, req, c)
	case routeResponse:
		s.handleResponse(w, req, c)
	case routeProjectConfigs:
		s.handleProjectConfigs(w, req, c)
	case routePublicKeys:
		s.handlePublicKeys(w, req, c)
	case routeMetrics:
		s.handleMetrics(w, req, c)
	case routeOutcomes:
		s.handleLegacyOutcomes(w, req, c)
	case routeLive:
		writeRawJSON(w, http.StatusOK, []byte(`{"is_healthy":true}`))
	case routeStats:
		s.handleStats(w, req, c)
	case routeStatsReset:
		if e := s.controlRefused(req); e != nil {
			s.writeError(w, c, e)
			return
		}
		if req.Method != http.MethodPost {
			s.writeError(w, c, methodNotAllowed(req))
			return
		}
		// Release the old generation (ResetStats waits for it), count the
		// reset request itself in the new one.
		c.inflight.Add(-1)
		st := s.ResetStats()
		c = s.acquire()
		writeJSON(w, http.StatusOK, st)
	case routeProjects:
		s.handleProjects(w, req, c)
	case routeControl:
		if e := s.controlRefused(req); e != nil {
			s.writeError(w, c, e)
			return
		}
		s.handleControl(w, req, c)
	case routeStore:
		s.writeError(w, c, newError(http.StatusNotFound, "store_endpoint", "the legacy store endpoint is not implemented; send envelopes to /api/<project_id>/envelope/"))
	default:
		s.writeError(w, c, newError(http.StatusNotFound, "unknown_route", "unknown route", req.Method+" "+req.URL.Path))
	}
}

func methodNotAllowed(req *http.Request) *httpError {
	return newError(http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed", req.Method+" "+req.URL.Path)
}

// bodySource is a request body as either HTTP server hands it over: net/http
// (requestBody) or fasthttp (fastserver.go).
type bodySource struct {
	r io.Reader
	// n is the Content-Length, -1 when unknown (chunked).
	n int64
	// conn takes the body's read deadlines (nil: none to set).
	conn net.Conn
	// ctx is done when the client has gone (net/http) or the server
	// shuts down (fasthttp).
	ctx context.Context
	// preRead: the server has already read the body's first
	// BodyPreSlotBytes (all of a smaller body) under its own deadline.
	preRead bool
}

// requestBody is the body of a request served by net/http.
func requestBody(req *http.Request) bodySource {
	return bodySource{r: req.Body, n: req.ContentLength, conn: requestConn(req), ctx: req.Context()}
}

// readBody reads the whole body into a pooled buffer, capped at
// MaxWireBytes. Its first BodyPreSlotBytes (all of a smaller body) are read
// without any slot, within HTTPBodyTimeout: a client that announces a body
// and stalls holds nothing others need. The rest of a larger body is read
// holding a read slot (large is then true) and must arrive at
// HTTPMinBodyRate after HTTPBodyGrace. The caller gives back the buffer
// with putBuf and a read slot with <-s.readSlots.
func (s *Server) readBody(src bodySource) (bp *[]byte, large bool, e *httpError) {
	if src.n > s.cfg.MaxWireBytes {
		return nil, false, newError(http.StatusRequestEntityTooLarge, "too_large_wire", "request body too large",
			fmt.Sprintf("Content-Length %d > limit %d", src.n, s.cfg.MaxWireBytes))
	}
	conn := src.conn
	if !src.preRead {
		setBodyDeadline(conn, time.Now().Add(s.limits.bodyTimeout))
	}
	n := src.n
	first := int64(BodyPreSlotBytes)
	if n >= 0 && n < first {
		first = n
	}
	bp = s.getBuf()
	if int64(cap(*bp)) < first {
		*bp = make([]byte, 0, first)
	}
	b, err := readUpTo(src.r, (*bp)[:0], int(first))
	*bp = b
	switch {
	case err != nil && (n >= 0 || !errors.Is(err, io.EOF)):
		s.putBuf(bp)
		return nil, false, bodyReadError(err)
	case n >= 0 && n == first, n < 0 && err != nil: // all of it (a chunked body ended)
		bodyDone(conn)
		return bp, false, nil
	}
	select {
	case s.readSlots <- struct{}{}:
	case <-src.ctx.Done():
		s.putBuf(bp)
		return nil, false, clientGone("while waiting for a large-body slot")
	}
	if n >= 0 {
		err = s.readRest(src.r, bp, int(n), conn)
	} else {
		err = s.readRestChunked(src.r, bp, conn)
	}
	if err != nil {
		s.putBuf(bp)
		<-s.readSlots
		if errors.Is(err, errTooLargeWire) {
			return nil, false, newError(http.StatusRequestEntityTooLarge, "too_large_wire", "request body too large",
				fmt.Sprintf("more than %d bytes", s.cfg.MaxWireBytes))
		}
		return nil, false, bodyReadError(err)
	}
	bodyDone(conn)
	return bp, true, nil
}

// bodyDone clears the read deadline of a body read in full. The deadline
// must not outlive the body: net/http's background read (which notices a
// client that hangs up) would hit it and cancel the request's context as if
// the client had gone. After a failed read it stays: net/http drains what
// is left of the body after the handler, and must not wait for it forever.
func bodyDone(conn net.Conn) { setBodyDeadline(conn, time.Time{}) }

// readUpTo reads from r into b until it holds limit bytes or r fails
// (io.EOF at the end of a body of unknown length). A body's last bytes may
// come with io.EOF: once limit bytes are in, that is no error.
func readUpTo(r io.Reader, b []byte, limit int) ([]byte, error) {
	for len(b) < limit {
		n, err := r.Read(b[len(b):limit])
		b = b[:len(b)+n]
		if err != nil && (len(b) < limit || !errors.Is(err, io.EOF)) {
			return b, err
		}
	}
	return b, nil
}

// bodyChunk is how much of a large body is read under one deadline.
const bodyChunk = 64 << 10

// rateDeadline is when a large body, whose read slot was taken at t0, must
// have delivered `got` bytes past its first BodyPreSlotBytes.
func (s *Server) rateDeadline(t0 time.Time, got int) time.Time {
	return t0.Add(s.limits.bodyGrace + atRate(int64(got), s.limits.minBodyRate))
}

// readRest reads the rest of a body of known length n into *bp (which holds
// its start), at the minimum rate.
func (s *Server) readRest(r io.Reader, bp *[]byte, n int, conn net.Conn) error {
	if cap(*bp) < n {
		// Replace the pooled buffer's array instead of putting it back
		// and taking a new one: that added a buffer to the pool for
		// every body larger than the one it got, so between two GCs
		// the pool grew with the request count (50 MB in 4 s at
		// 1000/s), not with the requests in flight.
		b := make([]byte, len(*bp), n)
		copy(b, *bp)
		*bp = b
	}
	b := *bp
	t0, start := time.Now(), len(b)
	for len(b) < n {
		end := min(len(b)+bodyChunk, n)
		setBodyDeadline(conn, s.rateDeadline(t0, end-start))
		m, err := io.ReadFull(r, b[len(b):end])
		b = b[:len(b)+m]
		*bp = b
		if err != nil {
			return err
		}
	}
	return nil
}

// errTooLargeWire: a body of unknown length ran past MaxWireBytes.
var errTooLargeWire = errors.New("body over the wire cap")

// readRestChunked reads the rest of a body of unknown length into *bp, up
// to the wire cap plus one byte, at the minimum rate.
func (s *Server) readRestChunked(r io.Reader, bp *[]byte, conn net.Conn) error {
	b := *bp
	limit := int(s.cfg.MaxWireBytes)
	t0, start := time.Now(), len(b)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		end := min(cap(b), limit+1, len(b)+bodyChunk)
		setBodyDeadline(conn, s.rateDeadline(t0, end-start))
		m, err := r.Read(b[len(b):end])
		b = b[:len(b)+m]
		*bp = b
		if len(b) > limit {
			return errTooLargeWire
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// bodyReadError answers a body that could not be read: 408 when it did
// not come in time, else 400.
func bodyReadError(err error) *httpError {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return newError(http.StatusRequestTimeout, "body_timeout", "request body not received in time", err.Error())
	}
	return newError(http.StatusBadRequest, "body_read_error", "reading the request body failed", err.Error())
}

// clientGone is the outcome of a request whose client hung up before its
// body was processed: counted, not answered, and not processed.
func clientGone(when string) *httpError {
	return newError(0, "client_gone", "the client closed the connection", when)
}

// maxPooledBuf keeps huge one-off bodies from pinning memory in the pool.
const maxPooledBuf = 1 << 20

func (s *Server) getBuf() *[]byte {
	if v := s.bufs.Get(); v != nil {
		return v.(*[]byte)
	}
	b := make([]byte, 0, 16<<10)
	return &b
}

func (s *Server) putBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBuf {
		return
	}
	*bp = (*bp)[:0]
	s.bufs.Put(bp)
}

// decodeBody undoes Content-Encoding. For identity the body is returned as
// is (out is untouched).
func (s *Server) decodeBody(c *counters, enc compression.Encoding, body []byte, out *[]byte) ([]byte, *httpError) {
	var decoded []byte
	if enc == compression.Identity {
		if int64(len(body)) > s.cfg.MaxDecodedBytes {
			return nil, newError(http.StatusRequestEntityTooLarge, "too_large_decoded", "decoded body too large",
				fmt.Sprintf("%d bytes > limit %d", len(body), s.cfg.MaxDecodedBytes))
		}
		decoded = body
	} else {
		var err error
		decoded, err = s.dec.Decode(enc, body, (*out)[:0])
		if cap(decoded) >= cap(*out) {
			*out = decoded[:0]
		}
		if err != nil {
			if errors.Is(err, compression.ErrTooLarge) {
				return nil, newError(http.StatusRequestEntityTooLarge, "too_large_decoded", "decoded body too large", err.Error())
			}
			return nil, newError(http.StatusBadRequest, "bad_compression", "body does not decode as "+string(enc), err.Error())
		}
	}
	i := encodingIndex(enc)
	c.encRequests[i].Add(1)
	c.encWire[i].Add(int64(len(body)))
	c.encDecoded[i].Add(int64(len(decoded)))
	return decoded, nil
}

// parseEncoding reads Content-Encoding from every header line it is on
// (compression.ParseContentEncoding): an unknown coding, or two codings
// stacked on one line or on two, is 415.
func parseEncoding(req *http.Request) (compression.Encoding, *httpError) {
	lines := req.Header.Values("Content-Encoding")
	if len(lines) == 0 {
		return compression.Identity, nil
	}
	enc, err := compression.ParseContentEncoding(lines)
	if err != nil {
		return "", newError(http.StatusUnsupportedMediaType, "bad_encoding", "unsupported Content-Encoding", err.Error())
	}
	return enc, nil
}

// readDecoded reads a request body and undoes its Content-Encoding; the
// caller must call release when done with body.
func (s *Server) readDecoded(req *http.Request, c *counters) (body []byte, release func(), e *httpError) {
	enc, e := parseEncoding(req)
	if e != nil {
		return nil, nil, e
	}
	body, held, e := s.readDecodedAs(requestBody(req), c, enc)
	if e != nil {
		return nil, nil, e
	}
	return body, func() { s.releaseBody(held) }, nil
}

// heldBody is what readDecodedAs holds for a request until releaseBody: a
// pooled buffer the body aliases, an ingest slot and, for a body larger
// than BodyPreSlotBytes still in its wire buffer, a read slot.
type heldBody struct {
	buf   *[]byte // nil: nothing of the server's (decodeRead's identity body)
	large bool
	// unslotted: no ingest slot was taken (decodeRead).
	unslotted bool
}

// readDecodedAs is readDecoded for a Content-Encoding already parsed. It
// takes an ingest slot only once the whole body is in, and drops the
// request (client_gone) if its client has hung up by then. What it holds
// is given back by s.releaseBody(held); an encoded body's wire buffer (and
// read slot) go back as soon as it is decoded. It returns no closure: the
// envelope sink allocates nothing per request.
func (s *Server) readDecodedAs(src bodySource, c *counters, enc compression.Encoding) (body []byte, held heldBody, e *httpError) {
	bp, large, e := s.readBody(src)
	if e != nil {
		return nil, heldBody{}, e
	}
	if e := s.takeSlot(src.ctx); e != nil {
		s.putBuf(bp)
		if large {
			<-s.readSlots
		}
		return nil, heldBody{}, e
	}
	held = heldBody{buf: bp, large: large}
	if enc == compression.Identity {
		body, e = s.decodeBody(c, enc, *bp, nil)
	} else {
		held.buf = s.getBuf()
		body, e = s.decodeBody(c, enc, *bp, held.buf)
		s.putBuf(bp)
		if large {
			<-s.readSlots
			held.large = false
		}
	}
	if e != nil {
		s.releaseBody(held)
		return nil, heldBody{}, e
	}
	return body, held, nil
}

// takeSlot takes an ingest slot, unless the client hangs up first (net/http
// cancels the request's context once it notices, which it can only after
// the body was read).
func (s *Server) takeSlot(ctx context.Context) *httpError {
	select {
	case s.slots <- struct{}{}:
	default:
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return clientGone("while waiting for an ingest slot")
		}
	}
	if ctx.Err() != nil {
		<-s.slots
		return clientGone("before its body was processed")
	}
	return nil
}

// decodeRead decodes a body read already, in wire, which stays the
// caller's. It takes no ingest slot: its one caller, checkBatch, decodes one
// body at a time, and what waits in a batch is bounded on its own.
func (s *Server) decodeRead(wire []byte, c *counters, enc compression.Encoding) (body []byte, held heldBody, e *httpError) {
	held = heldBody{unslotted: true}
	if enc == compression.Identity {
		body, e = s.decodeBody(c, enc, wire, nil)
	} else {
		held.buf = s.getBuf()
		body, e = s.decodeBody(c, enc, wire, held.buf)
	}
	if e != nil {
		s.releaseBody(held)
		return nil, heldBody{}, e
	}
	return body, held, nil
}

// releaseBody gives back what readDecodedAs or decodeRead holds.
func (s *Server) releaseBody(held heldBody) {
	if held.buf != nil {
		s.putBuf(held.buf)
	}
	if held.large {
		<-s.readSlots
	}
	if !held.unslotted {
		<-s.slots
	}
}

// lookupRelay returns the relay with the given id, or nil.
func (s *Server) lookupRelay(id string) *relay {
	if v, ok := s.relays.Load(id); ok {
		return v.(*relay)
	}
	return nil
}

// authRelay checks X-Sentry-Relay-Id and X-Sentry-Relay-Signature over data
// on a request after registration. cacheable marks signatures over empty
// data (envelopes), whose verified values may be cached.
func (s *Server) authRelay(req *http.Request, c *counters, data []byte, cacheable bool) (*relay, *httpError) {
	return s.authRelayAs(req.Header.Get("X-Sentry-Relay-Id"), req.Header.Get("X-Sentry-Relay-Signature"), c, data, cacheable, s.now())
}

// registeredRelay is the registered relay of id, or the error that
// answers a request from any other.
func (s *Server) registeredRelay(id string) (*relay, *httpError) {
	if id == "" {
		return nil, newError(http.StatusUnauthorized, "missing_relay_id", "missing X-Sentry-Relay-Id header")
	}
	rl := s.lookupRelay(id)
	if rl == nil || !rl.registered {
		return nil, newError(http.StatusForbidden, "unknown_relay", "relay not registered", "relay id "+id)
	}
	return rl, nil
}

// authRelayAs is authRelay on the two header values, for a request that
// arrived at now (a signature's age is its age then).
func (s *Server) authRelayAs(id, sig string, c *counters, data []byte, cacheable bool, now time.Time) (*relay, *httpError) {
	rl, e := s.registeredRelay(id)
	if e != nil {
		return nil, e
	}
	if !s.cfg.VerifySignatures {
		c.sigNotChecked.Add(1)
		return rl, nil
	}
	if sig == "" {
		return nil, newError(http.StatusUnauthorized, "missing_signature", "missing X-Sentry-Relay-Signature header")
	}
	if cacheable {
		if v, ok := rl.sigs.Load(sig); ok {
			if now.UnixNano() <= v.(int64) {
				c.sigCacheHits.Add(1)
				return rl, nil
			}
			rl.sigs.Delete(sig)
			rl.nSigs.Add(-1)
		}
		if n := s.cfg.VerifyEnvelopeEvery; n > 1 && s.sampleN.Add(1)%uint64(n) != 0 {
			if _, e := s.checkSignatureForm(sig, now); e != nil {
				return nil, e
			}
			c.sigSampledOut.Add(1)
			return rl, nil
		}
	}
	signed, err := rl.pub.VerifyTime(data, sig, s.cfg.MaxSignatureAge, now)
	if err != nil {
		return nil, signatureError(err)
	}
	c.sigVerified.Add(1)
	if cacheable {
		s.cacheSignature(rl, sig, signed, now)
	}
	return rl, nil
}

// cacheSignature remembers a verified empty-data signature, signed at
// signed, until it ages past MaxSignatureAge.
func (s *Server) cacheSignature(rl *relay, sig string, signed, now time.Time) {
	expiry := int64(math.MaxInt64)
	if s.cfg.MaxSignatureAge > 0 {
		expiry = signed.Add(s.cfg.MaxSignatureAge).UnixNano()
	}
	if rl.nSigs.Load() >= maxCachedSignatures {
		// Full: sweep expired entries, at most once a second (a Relay signs
		// every request afresh, so a full cache is the normal case there).
		nowNanos := now.UnixNano()
		last := rl.lastSweep.Load()
		if nowNanos-last < int64(time.Second) || !rl.lastSweep.CompareAndSwap(last, nowNanos) {
			return
		}
		rl.sigs.Range(func(k, v any) bool {
			if v.(int64) < nowNanos {
				rl.sigs.Delete(k)
				rl.nSigs.Add(-1)
			}
			return true
		})
		if rl.nSigs.Load() >= maxCachedSignatures {
			return
		}
	}
	// A copy: the value may alias a buffer the HTTP server reuses.
	if _, loaded := rl.sigs.LoadOrStore(strings.Clone(sig), expiry); !loaded {
		rl.nSigs.Add(1)
	}
}

// checkSignatureForm checks what can be checked without Ed25519: the value's
// shape, its header and the timestamp's age (relayauth's rules).
func (s *Server) checkSignatureForm(sig string, now time.Time) (time.Time, *httpError) {
	t, err := relayauth.CheckSignatureTime(sig, s.cfg.MaxSignatureAge, now)
	if err != nil {
		return t, signatureError(err)
	}
	return t, nil
}

// signatureError maps a relayauth error to an answer and a counted reason.
func signatureError(err error) *httpError {
	switch {
	case errors.Is(err, relayauth.ErrExpired):
		return newError(http.StatusUnauthorized, "expired_signature", "relay signature expired", err.Error())
	case errors.Is(err, relayauth.ErrBadSignature):
		return newError(http.StatusUnauthorized, "bad_signature", "invalid relay signature", err.Error())
	default:
		return newError(http.StatusUnauthorized, "malformed_signature", "malformed relay signature", err.Error())
	}
}

// handleStats serves GET /stats (JSON or Prometheus text).
func (s *Server) handleStats(w http.ResponseWriter, req *http.Request, c *counters) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		s.writeError(w, c, methodNotAllowed(req))
		return
	}
	st := s.Stats()
	st.InFlight-- // not this request
	switch f := req.URL.Query().Get("format"); f {
	case "", "json":
		writeJSON(w, http.StatusOK, st)
	case "prometheus", "prom", "text":
		b := st.AppendPrometheus(nil)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
	default:
		s.writeError(w, c, newError(http.StatusBadRequest, "bad_stats_format", "unknown format", "want json or prometheus, got "+f))
	}
}

// ProjectDSN is one entry of GET /projects.
type ProjectDSN struct {
	projects.Project
	DSN string `json:"dsn"`
}

// projectsChunk is how much of the /projects list is encoded before it is
// written: the list is streamed, so an answer that is not read holds this
// much, not the whole list (tens of MB for 100k projects).
const projectsChunk = 32 << 10

// handleProjects serves GET /projects: every project with its DSN for the
// origin, streamed as one JSON array under a write deadline that grows with
// what was written (HTTPWriteTimeout + size at HTTPMinWriteRate).
func (s *Server) handleProjects(w http.ResponseWriter, req *http.Request, c *counters) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		s.writeError(w, c, methodNotAllowed(req))
		return
	}
	origin := req.URL.Query().Get("origin")
	if origin == "" {
		origin = "http://" + req.Host
	}
	// The origin alone decides whether a DSN can be made.
	if _, err := s.cfg.Projects[0].DSN(origin); err != nil {
		s.writeError(w, c, newError(http.StatusBadRequest, "bad_origin", "bad origin", err.Error()))
		return
	}
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	sw, _ := w.(*statusWriter)
	rc := http.NewResponseController(w)
	buf := append(make([]byte, 0, projectsChunk+1024), '[')
	var written int64
	flush := func() bool {
		if sw != nil {
			sw.extendWriteDeadline(written + int64(len(buf)))
		}
		n, err := w.Write(buf)
		written += int64(n)
		buf = buf[:0]
		// Flushed chunk by chunk: through fasthttpadaptor (FastHTTPServer)
		// an answer that is never flushed is held whole in memory.
		if err == nil {
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				err = ferr
			}
		}
		return err == nil
	}
	for i, p := range s.cfg.Projects {
		if i > 0 {
			buf = append(buf, ',')
		}
		dsn, _ := p.DSN(origin)
		b, err := json.Marshal(ProjectDSN{Project: p, DSN: dsn})
		if err != nil {
			return // cannot happen: the fields are strings and integers
		}
		buf = append(buf, b...)
		if len(buf) >= projectsChunk && !flush() {
			return // the client did not read in time or has gone
		}
	}
	buf = append(buf, ']')
	flush()
}

// maxQueryBytes bounds the decoded body of a project-config or public-key
// query: Relay's largest (500 keys with their revisions) is under 100 KB,
// and decoding a list of millions of tiny keys at once would cost many
// times the body in memory.
const maxQueryBytes = 1 << 20

// decodeQuery decodes a project-config or public-key query body into v.
func decodeQuery(body []byte, v any, what string) *httpError {
	if len(body) > maxQueryBytes {
		return newError(http.StatusRequestEntityTooLarge, "too_large_query", what+" too large",
			fmt.Sprintf("%d bytes > limit %d", len(body), maxQueryBytes))
	}
	return decodeJSON(body, v, what)
}

// decodeJSON decodes a JSON request body into v.
func decodeJSON(body []byte, v any, what string) *httpError {
	if err := json.Unmarshal(body, v); err != nil {
		return newError(http.StatusBadRequest, "bad_json", "invalid JSON in "+what, err.Error())
	}
	return nil
}
