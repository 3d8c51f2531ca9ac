package standinrelay

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/relayauth"
)

// Version is the Relay release whose behaviour the stand-in was checked
// against; it is sent as "version" at registration.
const Version = "26.4.0"

// Relay is a stand-in relay.
type Relay struct {
	cfg     Config
	creds   relayauth.Credentials
	sk      relayauth.SecretKey
	log     *log.Logger
	client  *http.Client
	encoder *compression.Encoder
	decoder *compression.Decoder
	metrics *statsd // nil without metrics.statsd

	registered  atomic.Bool
	globalReady atomic.Bool
	projects    *projectCache
	buffer      *buffer
	pacer       *pacer // nil: unlimited
	limits      rateLimits
	retries     *retryQueue
	sendSlots   chan struct{}
	sends       sync.WaitGroup

	ln     net.Listener
	server *http.Server
}

// New checks the credentials and binds the listener (relay.host:relay.port;
// port 0 picks a free one, see Addr).
func New(cfg Config, creds relayauth.Credentials, logger *log.Logger) (*Relay, error) {
	if cfg.Upstream == nil {
		return nil, errors.New("standinrelay: config without upstream")
	}
	sk, _, err := creds.Keys()
	if err != nil {
		return nil, fmt.Errorf("standinrelay: credentials: %w", err)
	}
	r := &Relay{
		cfg:       cfg,
		creds:     creds,
		sk:        sk,
		log:       logger,
		client:    &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.MaxConcurrentRequests + 2}},
		encoder:   compression.NewEncoder(),
		decoder:   compression.NewDecoder(maxEnvelopeSize),
		projects:  newProjectCache(),
		buffer:    newBuffer(),
		pacer:     newPacer(cfg.Capacity),
		retries:   newRetryQueue(),
		sendSlots: make(chan struct{}, cfg.MaxConcurrentRequests),
	}
	if cfg.StatsdAddr != "" {
		if r.metrics, err = newStatsd(cfg.StatsdAddr, cfg.StatsdPrefix); err != nil {
			return nil, fmt.Errorf("standinrelay: metrics.statsd: %w", err)
		}
	}
	if r.ln, err = net.Listen("tcp", cfg.ListenAddr()); err != nil {
		return nil, fmt.Errorf("standinrelay: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/{project_id}/envelope/", r.handleEnvelope)
	mux.HandleFunc("GET /api/relay/healthcheck/ready/", r.handleReady)
	r.server = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return r, nil
}

// Addr is the listen address, e.g. 127.0.0.1:38211.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Run serves until ctx ends (SIGTERM), then shuts down the way Relay
// 26.4.0 does: the listener closes at once, what is held goes on being
// processed and forwarded, and after limits.shutdown_timeout it stops,
// whatever is left (relay-system/src/controller.rs; seen: Relay logs
// "SIGTERM received, stopping in 2s" and exits 0 once that time has
// passed). It returns nil
// after such a shutdown.
func (r *Relay) Run(ctx context.Context) error {
	hardCtx, hardCancel := context.WithCancel(context.Background())
	defer hardCancel()
	var wg sync.WaitGroup
	goRun := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(hardCtx) }()
	}
	// No other upstream request before registration (Relay's UpstreamBroker
	// sends nothing while it is not authenticated).
	goRun(func(ctx context.Context) {
		if r.register(ctx) {
			r.registered.Store(true)
			goRun(r.runGlobalConfig)
			goRun(r.runProjects)
		}
	})
	goRun(r.runRetries)
	goRun(r.metrics.run)
	for range runtime.GOMAXPROCS(0) {
		goRun(r.work)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- r.server.Serve(r.ln) }()
	r.log.Printf("standin-relay %s (test fixture, not Relay) listening on %s, upstream %s", Version, r.Addr(), r.cfg.Upstream)
	if r.pacer != nil {
		r.log.Printf("processing capacity %g envelopes/s (standin.capacity)", r.cfg.Capacity)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		runErr = fmt.Errorf("standinrelay: serve: %w", err)
	}
	r.log.Printf("stopping in %s (limits.shutdown_timeout)", r.cfg.ShutdownTimeout)
	deadline, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
	defer cancel()
	go func() { _ = r.server.Shutdown(deadline) }()
	<-deadline.Done()
	held := r.buffer.len()
	hardCancel()
	r.buffer.close()
	_ = r.server.Close()
	wg.Wait()
	r.sends.Wait()
	r.log.Printf("shutdown complete (%d envelopes still held were dropped)", held)
	return runErr
}

// work is a processing worker: it takes ready envelopes, at
// standin.capacity when set, until the buffer closes.
func (r *Relay) work(ctx context.Context) {
	for {
		j, ok := r.buffer.pop()
		if !ok {
			return
		}
		if r.pacer.wait(ctx) {
			r.process(ctx, j)
		}
		r.buffer.done()
	}
}
