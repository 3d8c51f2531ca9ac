package standinrelay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/relayauth"
)

// Version is the Relay release whose protocol the stand-in follows; it is
// sent as "version" at registration.
const Version = "26.6.0"

// Relay is a running stand-in relay.
type Relay struct {
	cfg     Config
	creds   relayauth.Credentials
	log     *Logger
	up      *upstreamClient
	decoder *compression.Decoder
	metrics *statsd

	auth     *auth
	outage   *outage
	projects *projectCache
	buffer   *buffer
	pacer    *pacer // standin.capacity; nil = unlimited
	limits   *rateLimits
	outcomes *outcomeAggregator

	globalReady atomic.Bool
	stopping    atomic.Bool
	sendSlots   chan struct{}
	sending     atomic.Int64

	ln      net.Listener
	server  *http.Server
	hardCtx context.Context // cancelled after the shutdown drain
	stats   counters
}

// New checks the credentials and binds the listener (relay.host:relay.port;
// port 0 picks a free one, see Addr). Logs go to log.
func New(cfg Config, creds relayauth.Credentials, log *Logger) (*Relay, error) {
	if cfg.Upstream == nil {
		return nil, errors.New("standinrelay: config without upstream")
	}
	up, err := newUpstreamClient(cfg, creds)
	if err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:       cfg,
		creds:     creds,
		log:       log,
		up:        up,
		decoder:   compression.NewDecoder(cfg.MaxEnvelopeSize),
		auth:      newAuth(),
		outage:    newOutage(),
		buffer:    newBuffer(cfg.MaxBufferedEnvelopes, cfg.MaxBufferedBytes),
		pacer:     newPacer(cfg.Capacity),
		limits:    newRateLimits(),
		outcomes:  newOutcomeAggregator(cfg.BucketInterval),
		sendSlots: make(chan struct{}, cfg.MaxConcurrentRequests),
	}
	r.projects = newProjectCache(r)
	if cfg.StatsdAddr != "" {
		m, err := newStatsd(cfg.StatsdAddr, cfg.StatsdPrefix)
		if err != nil {
			return nil, fmt.Errorf("standinrelay: metrics.statsd: %w", err)
		}
		r.metrics = m
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr())
	if err != nil {
		return nil, fmt.Errorf("standinrelay: listen: %w", err)
	}
	r.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/{project_id}/envelope/", r.handleEnvelope)
	mux.HandleFunc("GET /api/relay/healthcheck/ready/", r.handleReady)
	mux.HandleFunc("GET /api/relay/healthcheck/live/", r.handleLive)
	// Like Relay, idle keep-alive connections are not closed unless
	// limits.idle_timeout is set (limits.keepalive_timeout is a TCP
	// keep-alive setting there); closing them races with clients reusing them.
	r.server = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second, // Relay's CLIENT_HEADER_TIMEOUT
		IdleTimeout:       cfg.IdleTimeout,
	}
	return r, nil
}

// Addr is the listen address, e.g. 127.0.0.1:38211.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Ready reports what the readiness endpoint says: registered, envelope
// buffer not full, not shutting down. (Relay recomputes this every 3 s; the
// stand-in answers live.)
func (r *Relay) Ready() bool {
	return r.auth.get() == authRegistered && !r.stopping.Load() && !r.buffer.full()
}

// isReady reports whether a key's envelopes can be processed now.
func (r *Relay) isReady(key string) bool {
	if !r.globalReady.Load() {
		return false
	}
	s, _ := r.projects.status(key)
	return s != projectLoading
}

// projectResolved is called after the cache stored an answer for key.
func (r *Relay) projectResolved(key string, enabled bool) {
	if !enabled {
		if js := r.buffer.drop(key); len(js) > 0 {
			r.stats.droppedDisabled.Add(int64(len(js)))
			r.log.Debugf("project %s disabled: dropped %d buffered envelopes", key, len(js))
		}
		return
	}
	if r.globalReady.Load() {
		r.buffer.release(key)
	}
}

// globalConfigReady is called for every ready global config.
func (r *Relay) globalConfigReady() {
	if r.globalReady.CompareAndSwap(false, true) {
		r.log.Infof("global config received; processing starts")
		r.buffer.releaseWhere(r.isReady)
	}
}

// Run serves until ctx ends, then shuts down gracefully: the listener
// closes, buffered and in-flight envelopes are forwarded for up to
// limits.shutdown_timeout, remaining outcomes are flushed. It returns nil
// after a graceful shutdown.
func (r *Relay) Run(ctx context.Context) error {
	if r.cfg.MaxThreadCount > 0 {
		runtime.GOMAXPROCS(r.cfg.MaxThreadCount)
	}
	hardCtx, hardCancel := context.WithCancel(context.Background())
	defer hardCancel()
	r.hardCtx = hardCtx

	var wg sync.WaitGroup
	goRun := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(hardCtx) }()
	}
	goRun(r.runAuth)
	goRun(r.runGlobalConfig)
	goRun(r.projects.run)
	goRun(r.runOutcomes)
	goRun(func(ctx context.Context) { r.metrics.run(ctx, time.Second) })
	goRun(r.runGauges)
	workers := runtime.GOMAXPROCS(0)
	var workerWG sync.WaitGroup
	for range workers {
		workerWG.Add(1)
		go func() {
			defer workerWG.Done()
			for {
				j, ok := r.buffer.pop()
				if !ok {
					return
				}
				// standin.capacity: the workers share one pace; an
				// envelope waits here, accepted and held, until its slot.
				if r.pacer.wait(hardCtx) {
					r.process(j)
					r.stats.processed.Add(1)
				} else {
					r.stats.lostAtShutdown.Add(1) // past limits.shutdown_timeout
				}
				r.buffer.done(j)
			}
		}()
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- r.server.Serve(r.ln) }()
	r.log.Infof("standin-relay %s (test fixture, not Relay) listening on %s, upstream %s", Version, r.Addr(), r.cfg.Upstream)
	if r.pacer != nil {
		r.log.Infof("processing capacity %g envelopes/s (standin.capacity); above it envelopes wait in the buffer (at most %d envelopes, %d bytes)", r.cfg.Capacity, r.cfg.MaxBufferedEnvelopes, r.cfg.MaxBufferedBytes)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		runErr = fmt.Errorf("standinrelay: serve: %w", err)
	}

	// Graceful shutdown.
	r.log.Infof("shutting down (timeout %s)", r.cfg.ShutdownTimeout)
	shutdownStart := time.Now()
	deadline := shutdownStart.Add(r.cfg.ShutdownTimeout)
	r.stopping.Store(true)
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	_ = r.server.Shutdown(sctx)
	cancel()
	drained := r.waitDrained(deadline)
	r.flushOutcomes(hardCtx, true)
	drained = r.waitDrained(deadline) && drained
	held, _ := r.buffer.len()
	aborted := r.sending.Load()
	lost := r.buffer.close()
	r.stats.lostAtShutdown.Add(int64(len(lost)))
	hardCancel()
	workerWG.Wait()
	wg.Wait()
	if !drained || len(lost) > 0 {
		r.log.Warnf("shutdown timeout: %d buffered envelopes lost (%d waited for a config), %d sends aborted", held, len(lost), aborted)
	}
	peak, peakBytes := r.buffer.peak()
	r.log.Infof("shut down in %s; %d envelopes accepted, %d processed, peak buffer %d envelopes (%d bytes)",
		time.Since(shutdownStart).Round(time.Millisecond), r.stats.queued.Load(), r.stats.processed.Load(), peak, peakBytes)
	return runErr
}

// waitDrained waits until nothing is ready, being processed or being sent.
// Envelopes waiting for a config do count: they may still get one.
func (r *Relay) waitDrained(deadline time.Time) bool {
	for {
		held, _ := r.buffer.len()
		if held == 0 && r.sending.Load() == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runGauges reports buffer gauges to StatsD every second.
func (r *Relay) runGauges(ctx context.Context) {
	if r.metrics == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			held, waiting := r.buffer.len()
			r.metrics.Gauge("buffer.envelopes_count", float64(held))
			r.metrics.Gauge("buffer.waiting_for_config", float64(waiting))
			r.metrics.Gauge("upstream.requests.inflight", float64(r.sending.Load()))
		}
	}
}

// counters are the stand-in's own tallies (see Stats).
type counters struct {
	requests, queued, processed, lostAtShutdown           atomic.Int64
	status2xx, status400, status401, status403, status413 atomic.Int64
	status429, status503, statusOther                     atomic.Int64
	parts, forwarded, forwardRetries, forwardRejected     atomic.Int64
	forwardRateLimited, forwardLost                       atomic.Int64
	droppedDisabled, droppedInvalid                       atomic.Int64
	itemsInvalid, itemsDropped, itemsRateLimited          atomic.Int64
	registrations, registerFailures                       atomic.Int64
	globalRequests, projectRequests, projectRequestErrors atomic.Int64
	projectPending, projectUnchanged                      atomic.Int64
	outcomes, outcomeEnvelopes                            atomic.Int64
	outages, liveChecks                                   atomic.Int64
}

func (c *counters) countStatus(status int) {
	switch {
	case status >= 200 && status < 300:
		c.status2xx.Add(1)
	case status == 400:
		c.status400.Add(1)
	case status == 401:
		c.status401.Add(1)
	case status == 403:
		c.status403.Add(1)
	case status == 413:
		c.status413.Add(1)
	case status == 429:
		c.status429.Add(1)
	case status == 503:
		c.status503.Add(1)
	default:
		c.statusOther.Add(1)
	}
}

// Stats is a snapshot of the stand-in's counters.
type Stats struct {
	Requests           int64            `json:"requests"`         // ingest requests
	Responses          map[string]int64 `json:"responses"`        // by status class
	Queued             int64            `json:"queued"`           // envelopes accepted into the buffer
	Processed          int64            `json:"processed"`        // envelopes the processing workers handled
	LostAtShutdown     int64            `json:"lost_at_shutdown"` // buffered envelopes dropped after limits.shutdown_timeout
	Parts              int64            `json:"parts"`            // per-group envelopes handed to forwarding
	Forwarded          int64            `json:"forwarded"`        // 2xx from upstream (incl. outcome envelopes)
	ForwardRetries     int64            `json:"forward_retries"`  // network errors / 502-504 retried
	ForwardRejected    int64            `json:"forward_rejected"` // other non-2xx: dropped as received
	ForwardRateLimited int64            `json:"forward_429"`      // 429 from upstream
	ForwardLost        int64            `json:"forward_lost"`     // aborted by shutdown or auth denial
	DroppedDisabled    int64            `json:"dropped_disabled"` // envelopes of disabled projects
	DroppedInvalid     int64            `json:"dropped_invalid"`  // envelopes dropped whole (project_id)
	ItemsInvalid       int64            `json:"items_invalid"`    // invalid_json items
	ItemsDropped       int64            `json:"items_dropped"`    // dropped without outcome (logs w/o feature)
	ItemsRateLimited   int64            `json:"items_rate_limited"`
	Registrations      int64            `json:"registrations"`
	RegisterFailures   int64            `json:"register_failures"`
	GlobalRequests     int64            `json:"global_requests"`
	ProjectRequests    int64            `json:"project_requests"`
	ProjectErrors      int64            `json:"project_request_errors"`
	ProjectPending     int64            `json:"project_pending"`
	ProjectUnchanged   int64            `json:"project_unchanged"`
	Outcomes           int64            `json:"outcomes"`          // outcome quantity recorded
	OutcomeEnvelopes   int64            `json:"outcome_envelopes"` // outcome envelopes sent
	OutcomeRowsDropped int64            `json:"outcome_rows_dropped"`
	Outages            int64            `json:"outages"`            // times outage mode began
	LiveChecks         int64            `json:"live_checks"`        // GET /api/0/relays/live/ sent
	Buffered           int              `json:"buffered"`           // held: waiting for a config, backlog or being processed
	WaitingForConfig   int              `json:"waiting_for_config"` // of Buffered
	Backlog            int              `json:"backlog"`            // of Buffered: ready or being processed (above standin.capacity it grows)
	PeakBuffered       int              `json:"peak_buffered"`      // highest Buffered since start
	PeakBufferedBytes  int64            `json:"peak_buffered_bytes"`
	Auth               string           `json:"auth"`
	GlobalConfig       bool             `json:"global_config"`
}

// Stats returns a snapshot.
func (r *Relay) Stats() Stats {
	c := &r.stats
	held, waiting := r.buffer.len()
	peak, peakBytes := r.buffer.peak()
	r.outcomes.mu.Lock()
	dropped := r.outcomes.dropped
	r.outcomes.mu.Unlock()
	return Stats{
		Requests: c.requests.Load(),
		Responses: map[string]int64{
			"2xx": c.status2xx.Load(), "400": c.status400.Load(), "401": c.status401.Load(), "403": c.status403.Load(),
			"413": c.status413.Load(), "429": c.status429.Load(), "503": c.status503.Load(), "other": c.statusOther.Load(),
		},
		Queued: c.queued.Load(), Processed: c.processed.Load(), LostAtShutdown: c.lostAtShutdown.Load(), Parts: c.parts.Load(), Forwarded: c.forwarded.Load(),
		ForwardRetries: c.forwardRetries.Load(), ForwardRejected: c.forwardRejected.Load(),
		ForwardRateLimited: c.forwardRateLimited.Load(), ForwardLost: c.forwardLost.Load(),
		DroppedDisabled: c.droppedDisabled.Load(), DroppedInvalid: c.droppedInvalid.Load(),
		ItemsInvalid: c.itemsInvalid.Load(), ItemsDropped: c.itemsDropped.Load(), ItemsRateLimited: c.itemsRateLimited.Load(),
		Registrations: c.registrations.Load(), RegisterFailures: c.registerFailures.Load(),
		GlobalRequests: c.globalRequests.Load(), ProjectRequests: c.projectRequests.Load(), ProjectErrors: c.projectRequestErrors.Load(),
		ProjectPending: c.projectPending.Load(), ProjectUnchanged: c.projectUnchanged.Load(),
		Outcomes: c.outcomes.Load(), OutcomeEnvelopes: c.outcomeEnvelopes.Load(), OutcomeRowsDropped: dropped,
		Outages: c.outages.Load(), LiveChecks: c.liveChecks.Load(),
		Buffered: held, WaitingForConfig: waiting, Backlog: held - waiting, PeakBuffered: peak, PeakBufferedBytes: peakBytes, Auth: r.auth.get().String(), GlobalConfig: r.globalReady.Load(),
	}
}
