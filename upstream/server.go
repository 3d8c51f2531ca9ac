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
// # Signatures
//
// Every relay request after registration is verified in full (Ed25519) when
// Config.VerifySignatures is on: an envelope's signature over empty data,
// as Relay signs its forwards, and a JSON query's over its body.
package upstream

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/configerr"
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

	// Addr is the address Start listens on; empty: 127.0.0.1:0, a free
	// loopback port.
	Addr string

	// VerifySignatures checks X-Sentry-Relay-Signature on every relay
	// request (New's caller sets it; cmd/fake-upstream defaults it to true).
	VerifySignatures bool
	// MaxSignatureAge bounds the age of signatures on relay requests after
	// registration (default 300 s, like Sentry). Negative: no age check.
	MaxSignatureAge time.Duration
	// RegistrationMaxAge bounds signature and token age in the registration
	// steps (default 60 s, like Sentry). Negative: no age check.
	RegistrationMaxAge time.Duration

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

// Server is a running fake upstream (Start). All methods are safe for
// concurrent use.
type Server struct {
	// URL is the server's base URL, http://host:port, with no trailing
	// slash: a Relay's relay.upstream, an SDK's DSN origin.
	URL string

	hs      *http.Server
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

// Start starts a fake upstream serving cfg on cfg.Addr. Close or Shutdown
// stops it.
func Start(cfg Config) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, configerr.Wrap("Addr", err)
	}
	s.URL = "http://" + ln.Addr().String()
	s.hs = s.httpServer()
	go func() { _ = s.hs.Serve(s.listener(ln)) }()
	return s, nil
}

// Close stops the server at once, closing every connection.
func (s *Server) Close() error { return s.hs.Close() }

// Shutdown stops the server once the requests in flight are answered, or
// closes it when ctx ends first.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.hs.Shutdown(ctx); err != nil {
		_ = s.hs.Close()
		return err
	}
	return nil
}

// newServer builds a Server from cfg, not yet serving.
func newServer(cfg Config) (*Server, error) {
	if len(cfg.Projects) == 0 {
		return nil, configerr.New("Projects", "no projects")
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
	if cfg.PendingFor < 0 || cfg.PendingFor >= MaxPendingFor {
		return nil, configerr.Errorf("PendingFor", "%s: want ≥ 0 and under %s (Relay gives up on pending keys after 30 s)", cfg.PendingFor, MaxPendingFor)
	}
	for i, q := range cfg.Quotas {
		if err := checkQuota(q); err != nil {
			return nil, configerr.Wrap(fmt.Sprintf("Quotas[%d]", i), err)
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
	if s.controlFrom == nil {
		s.controlFrom = loopbackNets()
	}
	for _, p := range s.controlFrom {
		if !p.IsValid() {
			return nil, configerr.Errorf("ControlFrom", "invalid network %v", p)
		}
	}
	for i, p := range cfg.Projects {
		if _, dup := s.byID[p.ID]; dup {
			return nil, configerr.Errorf("Projects", "duplicate project id %d", p.ID)
		}
		s.byID[p.ID] = i
	}
	if len(s.byKey) != len(cfg.Projects) {
		return nil, configerr.New("Projects", "duplicate project public key")
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
// them), so the returned snapshot
// plus later ones account for every request.
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
