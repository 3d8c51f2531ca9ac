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
// Handler with: the timeouts and header cap cmd/fake-upstream and
// orchestrate both use.
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
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"runtime"
	"strconv"
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
	// slots bounds the requests that hold body buffers at once (reading,
	// decoding, scanning): that work is CPU-bound, so a few per core lose
	// nothing, and memory stays under slots × (wire cap + decoded cap).
	slots chan struct{}

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
		routes:       newRouter(),
	}
	s.started = s.now()
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
// them), so the returned snapshot plus later ones account for every request.
func (s *Server) ResetStats() Stats {
	old := s.stats.Swap(newCounters(len(s.cfg.Projects), s.now()))
	deadline := time.Now().Add(resetWait)
	for old.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	return old.snapshot(s)
}

// Handler returns the HTTP handler serving every route.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// statusWriter records the status for request statistics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
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
	w.ResponseWriter, w.status = rw, 0
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

// readBody reads the whole body into a pooled buffer, capped at
// MaxWireBytes. The caller returns the buffer with putBuf.
func (s *Server) readBody(req *http.Request) (*[]byte, *httpError) {
	if req.ContentLength > s.cfg.MaxWireBytes {
		return nil, newError(http.StatusRequestEntityTooLarge, "too_large_wire", "request body too large",
			fmt.Sprintf("Content-Length %d > limit %d", req.ContentLength, s.cfg.MaxWireBytes))
	}
	bp := s.getBuf()
	if n := req.ContentLength; n >= 0 {
		// Known length: net/http's body reader ends exactly there.
		if int64(cap(*bp)) < n {
			// Replace the pooled buffer's array instead of putting it back
			// and taking a new one: that added a buffer to the pool for
			// every body larger than the one it got, so between two GCs
			// the pool grew with the request count (50 MB in 4 s at
			// 1000/s), not with the requests in flight.
			*bp = make([]byte, 0, n)
		}
		b := (*bp)[:n]
		if _, err := io.ReadFull(req.Body, b); err != nil {
			s.putBuf(bp)
			return nil, newError(http.StatusBadRequest, "body_read_error", "reading the request body failed", err.Error())
		}
		*bp = b
		return bp, nil
	}
	// Unknown length (chunked): read up to the cap plus one byte.
	b := (*bp)[:0]
	limit := int(s.cfg.MaxWireBytes)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := req.Body.Read(b[len(b):min(cap(b), limit+1)])
		b = b[:len(b)+n]
		*bp = b
		if len(b) > limit {
			s.putBuf(bp)
			return nil, newError(http.StatusRequestEntityTooLarge, "too_large_wire", "request body too large",
				fmt.Sprintf("more than %d bytes", s.cfg.MaxWireBytes))
		}
		if errors.Is(err, io.EOF) {
			return bp, nil
		}
		if err != nil {
			s.putBuf(bp)
			return nil, newError(http.StatusBadRequest, "body_read_error", "reading the request body failed", err.Error())
		}
	}
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
	body, bp, e := s.readDecodedAs(req, c, enc)
	if e != nil {
		return nil, nil, e
	}
	return body, func() { s.releaseBody(bp) }, nil
}

// readDecodedAs is readDecoded for a Content-Encoding already parsed. It
// holds one of the body slots and the buffer bp, which body aliases, until
// the caller calls s.releaseBody(bp); an encoded body's wire buffer goes back
// to the pool once decoded. It returns no closure: the envelope sink
// allocates nothing per request.
func (s *Server) readDecodedAs(req *http.Request, c *counters, enc compression.Encoding) (body []byte, bp *[]byte, e *httpError) {
	s.slots <- struct{}{}
	bp, e = s.readBody(req)
	if e != nil {
		<-s.slots
		return nil, nil, e
	}
	if enc == compression.Identity {
		body, e = s.decodeBody(c, enc, *bp, nil)
	} else {
		wire := bp
		bp = s.getBuf()
		body, e = s.decodeBody(c, enc, *wire, bp)
		s.putBuf(wire)
	}
	if e != nil {
		s.releaseBody(bp)
		return nil, nil, e
	}
	return body, bp, nil
}

// releaseBody gives back what readDecodedAs holds.
func (s *Server) releaseBody(bp *[]byte) {
	s.putBuf(bp)
	<-s.slots
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
	id := req.Header.Get("X-Sentry-Relay-Id")
	if id == "" {
		return nil, newError(http.StatusUnauthorized, "missing_relay_id", "missing X-Sentry-Relay-Id header")
	}
	rl := s.lookupRelay(id)
	if rl == nil || !rl.registered {
		return nil, newError(http.StatusForbidden, "unknown_relay", "relay not registered", "relay id "+id)
	}
	if !s.cfg.VerifySignatures {
		c.sigNotChecked.Add(1)
		return rl, nil
	}
	sig := req.Header.Get("X-Sentry-Relay-Signature")
	if sig == "" {
		return nil, newError(http.StatusUnauthorized, "missing_signature", "missing X-Sentry-Relay-Signature header")
	}
	now := s.now()
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
	if _, loaded := rl.sigs.LoadOrStore(sig, expiry); !loaded {
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

func (s *Server) handleProjects(w http.ResponseWriter, req *http.Request, c *counters) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		s.writeError(w, c, methodNotAllowed(req))
		return
	}
	origin := req.URL.Query().Get("origin")
	if origin == "" {
		origin = "http://" + req.Host
	}
	out := make([]ProjectDSN, len(s.cfg.Projects))
	for i, p := range s.cfg.Projects {
		dsn, err := p.DSN(origin)
		if err != nil {
			s.writeError(w, c, newError(http.StatusBadRequest, "bad_origin", "bad origin", err.Error()))
			return
		}
		out[i] = ProjectDSN{Project: p, DSN: dsn}
	}
	writeJSON(w, http.StatusOK, out)
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
