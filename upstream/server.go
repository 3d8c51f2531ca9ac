// Package upstream is a fake Sentry for load-testing Relay: a Relay in
// managed mode registers with it, pulls project and global configs from it
// and forwards envelopes, metrics and outcomes to it (docs/protocol.md). It
// checks every request before answering it and counts what it accepted.
//
// Start one as an httptest.Server, on a free loopback port:
//
//	srv, err := upstream.Start(upstream.Config{Projects: ps, VerifySignatures: true})
//	if err != nil { … }
//	defer srv.Close()
//	// relay.upstream: srv.URL; counts: srv.Stats()
//
// Handler serves Relay's upstream routes under /api/0/relays/, the envelope
// sink POST /api/<project_id>/envelope/ (Relay or SDKs), and GET /stats,
// POST /stats/reset, GET /projects and GET|POST /control (faults); the
// README lists them with their answers.
//
// An envelope is checked in this order, then counted (and kept, with
// Config.Capture), then answered: injected faults, method,
// Content-Encoding, relay id and signature (when X-Sentry-Relay-Id is
// present; Relay signs forwards over empty data), project id, body size
// and decoding, framing (at most MaxEnvelopeItems items), project key,
// Relay's per-type item limits, and the outcome carriers it holds. A
// refused request is answered 4xx JSON {"detail", "causes"} and counted by
// reason in Stats.Errors; a panic is recovered, counted and answered 500.
// /control and /stats/reset answer only the clients in Config.ControlFrom.
package upstream

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/capture"
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
	// MaxPendingFor bounds Config.PendingFor (exclusive): Relay gives up on
	// a key pending past limits.query_timeout and caches it as disabled.
	MaxPendingFor = 25 * time.Second
	// MaxKeysPerRequest caps the keys of one config or public-key query
	// (Relay's cache.batch_size default).
	MaxKeysPerRequest = 500
)

// Config configures a Server. The zero value of every field is usable except
// Projects, which must not be empty.
type Config struct {
	Projects []projects.Project

	// Addr is the address Start listens on (default 127.0.0.1:0).
	Addr string

	// VerifySignatures checks X-Sentry-Relay-Signature on every relay request.
	VerifySignatures bool
	// MaxSignatureAge bounds the age of signatures after registration, and
	// RegistrationMaxAge that of signatures and tokens in the registration
	// steps (defaults as in Sentry); negative: no age check.
	MaxSignatureAge, RegistrationMaxAge time.Duration

	// AllowList, when true, lets only relays added with RegisterRelay (or
	// Relays) register; otherwise any relay may register.
	AllowList bool
	// Relays are known relays (id → public key).
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

	// ControlFrom are the client networks /control and /stats/reset answer
	// (others get 403); empty: loopback only.
	ControlFrom []netip.Prefix

	// Faults in effect from the start: a layer of their own, which
	// SetFaults (POST /control) and AddFaults leave as it is; an outage
	// among them starts with the server.
	Faults Faults
	// Seed seeds the fault-injection randomness.
	Seed uint64

	// Now is the clock (time.Now if nil); tests move it.
	Now func() time.Time

	// Capture, when set, keeps every envelope accepted (package capture);
	// its owner closes it after the server.
	Capture *capture.Writer
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

	stats atomic.Pointer[counters]

	byKey           projects.Index
	byID            map[int64]int
	relays          sync.Map   // relay id → *relay, replaced whole
	regMu           sync.Mutex // held by a registration and RegisterRelay
	nSelfRegistered int        // relays added by the registration handshake
	dec             *compression.Decoder
	bufs            sync.Pool // *[]byte
	writers         sync.Pool // *statusWriter
	sums            sync.Pool // *envelope.Summary
	// slots bound the requests decoding and scanning a body (CPU-bound
	// work), readSlots the bodies over BodyPreSlotBytes being read: memory
	// stays under readSlots × wire cap + slots × decoded cap.
	slots, readSlots chan struct{}
	limits           httpLimits

	pendingMu    sync.Mutex
	pendingSince map[int]time.Time // project index → first request
	configRev    string
	globalJSON   []byte

	routes *router
	hook   func(*http.Request) // test hook, called first for every request

	faults   atomic.Pointer[faultState]
	faultsMu sync.Mutex // held while a layer is set or removed
	layerID  uint64     // the last AddFaults layer's id
	rngMu    sync.Mutex
	rng      *mrand.Rand
}

// Start starts a fake upstream serving cfg on cfg.Addr. Close or Shutdown
// stops it.
func Start(cfg Config) (*Server, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cmp.Or(cfg.Addr, "127.0.0.1:0"))
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
	if cfg.PendingFor < 0 || cfg.PendingFor >= MaxPendingFor {
		return nil, configerr.Errorf("PendingFor", "%s: want ≥ 0 and under %s (Relay gives up on pending keys after 30 s)", cfg.PendingFor, MaxPendingFor)
	}
	for i, q := range cfg.Quotas {
		if err := checkQuota(q); err != nil {
			return nil, configerr.Wrap(fmt.Sprintf("Quotas[%d]", i), err)
		}
	}
	for _, p := range cfg.ControlFrom {
		if !p.IsValid() {
			return nil, configerr.Errorf("ControlFrom", "invalid network %v", p)
		}
	}
	cfg.MaxSignatureAge = cmp.Or(cfg.MaxSignatureAge, DefaultMaxSignatureAge)
	cfg.RegistrationMaxAge = cmp.Or(cfg.RegistrationMaxAge, DefaultRegistrationMaxAge)
	if cfg.MaxWireBytes <= 0 {
		cfg.MaxWireBytes = DefaultMaxWireBytes
	}
	if cfg.MaxDecodedBytes <= 0 {
		cfg.MaxDecodedBytes = DefaultMaxDecodedBytes
	}
	cfg.ControlFrom = slices.Clone(cfg.ControlFrom)
	if len(cfg.ControlFrom) == 0 {
		cfg.ControlFrom = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	if len(cfg.TokenSecret) == 0 {
		cfg.TokenSecret = make([]byte, 32)
		_, _ = rand.Read(cfg.TokenSecret) // never fails (crypto/rand)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		cfg:          cfg,
		started:      cfg.Now(),
		byKey:        projects.NewIndex(cfg.Projects),
		byID:         make(map[int64]int, len(cfg.Projects)),
		dec:          compression.NewDecoder(cfg.MaxDecodedBytes),
		pendingSince: map[int]time.Time{},
		rng:          mrand.New(mrand.NewPCG(cfg.Seed, 0x6661756c7473)),
		slots:        make(chan struct{}, 2*runtime.GOMAXPROCS(0)+2),
		readSlots:    make(chan struct{}, 2*runtime.GOMAXPROCS(0)+2),
		limits: httpLimits{bodyTimeout: HTTPBodyTimeout, bodyGrace: HTTPBodyGrace, minBodyRate: HTTPMinBodyRate,
			writeTimeout: HTTPWriteTimeout, minWriteRate: HTTPMinWriteRate},
		routes: newRouter(),
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
	s.bufs.New = func() any { return new(make([]byte, 0, 16<<10)) }
	s.writers.New = func() any { return new(statusWriter) }
	s.sums.New = func() any { return &envelope.Summary{Items: make([]envelope.ItemSummary, 0, 8)} }
	for id, pub := range cfg.Relays {
		s.relays.Store(id, &relay{pub: pub, known: true})
	}
	s.stats.Store(newCounters(len(cfg.Projects), s.started))
	if err := s.buildConfigs(); err != nil {
		return nil, err
	}
	if err := s.setLayer(faultLayer{name: layerConfig, f: cfg.Faults}); err != nil {
		return nil, err
	}
	return s, nil
}

// RegisterRelay makes a relay known (allow-listed) and registered at once,
// so its requests are accepted without a challenge. A relay that registers
// again with the same id must use the same key.
func (s *Server) RegisterRelay(id string, pub relayauth.PublicKey) {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	s.relays.Store(id, &relay{pub: pub, known: true, registered: true})
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	c := s.stats.Load()
	st := c.snapshot(s)
	st.InFlight = c.inflight.Load()
	return st
}

// resetWait bounds ResetStats's wait for requests still counting into the
// old generation (a hanging outage holds one for long).
const resetWait = 2 * time.Second

// ResetStats zeroes every counter atomically and returns the final snapshot
// of the generation it replaced, after the requests in flight at the swap
// finished counting into it (waiting up to 2 s): the returned snapshot plus
// later ones account for every request.
func (s *Server) ResetStats() Stats {
	old := s.stats.Swap(newCounters(len(s.cfg.Projects), s.cfg.Now()))
	deadline := time.Now().Add(resetWait)
	for old.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	return old.snapshot(s)
}

// Handler returns the HTTP handler serving every route.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }
