package blast

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/internal/pool"
)

// job is one released slot.
type job struct {
	k        int64         // global slot index
	intended time.Duration // intended send time, from the run's start
	warm     bool          // warm-up slot: not part of the measured result
}

// runner is the state of one Run.
type runner struct {
	cfg    Config
	sched  schedule
	clock  clock
	client httpClient
	reqs   []request
	kinds  []pool.Kind

	work     chan job
	inflight atomic.Int64 // released and not yet recorded
	started  atomic.Int64 // measured (non-warm-up) slots handed to a sender
	workers  int          // started worker goroutines; pacer goroutine only
	peak     int64        // most requests in flight at a release; pacer only
	wg       sync.WaitGroup

	recMu   sync.Mutex
	recs    []*recorder // all recorders: the stripes and the pacer's (drops)
	stripes []*recorder // worker i records into stripes[i % len]

	winMu   sync.Mutex
	windows []*window // indexed by second since start (warm-up included)
	// latencyFrom is the first window that still holds a latency sketch:
	// only the last latencyWindows keep one, so memory stays bounded
	// however long the run (counts are kept for every second).
	latencyFrom    int
	latencyWindows int

	// progress counters (exact, but the result is built from recorders)
	pSent, pErr, pDrop atomic.Int64
}

// Run sends cfg.Pool to cfg.Target on the configured schedule and returns
// what happened. It ends by itself after Duration (or Count slots). When
// ctx is cancelled it stops releasing slots, waits up to Grace for requests
// in flight and returns the partial result with Interrupted set; the error
// is then nil. Errors are returned for bad configuration only (wrapping
// ErrConfig). Request failures are counted in the Result, not returned.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, target, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, work: make(chan job)}
	r.prepare(target.String())
	enc := ""
	if e := cfg.Pool.Options.Encoding; e != "" && e != compression.Identity {
		enc = string(e)
	}
	r.client, err = newHTTPClient(cfg.Client, clientOptions{
		host: target.Host, encoding: enc, timeout: cfg.Timeout, maxConns: cfg.MaxConns,
	})
	if err != nil {
		return nil, configerr.Wrap("Client", err)
	}
	defer r.client.close()

	r.sched = schedule{shard: int64(cfg.Shard), shards: int64(cfg.Shards), end: math.MaxInt64 / 2}
	rate := cfg.Rate
	if rate == 0 { // closed loop: the schedule only numbers slots
		rate = 1
	}
	r.sched.rate = rate
	if cfg.Rate > 0 {
		r.sched.warm = slotsIn(cfg.Rate, cfg.Warmup)
		if cfg.Duration > 0 {
			r.sched.end = slotsIn(cfg.Rate, cfg.Warmup+cfg.Duration)
		}
	}
	if cfg.Count > 0 {
		r.sched.end = min(r.sched.end, r.sched.warm+cfg.Count)
	}

	for range recorderStripes {
		r.stripes = append(r.stripes, r.newRecorder())
	}
	r.clock = cfg.clock
	if r.clock == nil {
		r.clock = newPacerClock(ctx)
		if c, ok := r.clock.(interface{ close() }); ok {
			defer c.close()
		}
	}
	startWall := time.Now()
	stopProgress := r.startProgress()

	var next int64
	if cfg.Rate > 0 {
		pacerRec := r.newRecorder()
		next = r.sched.pace(ctx, r.clock, func(k int64, intended time.Duration) {
			r.release(pacerRec, job{k: k, intended: intended, warm: k < r.sched.warm})
		})
		close(r.work)
	} else {
		next = r.closedLoop(ctx)
	}
	sendEnd := r.clock.Now()
	interrupted := next < r.sched.end && ctx.Err() != nil

	// Wait for requests in flight: they end by their Timeout; after a
	// cancel, only up to Grace.
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t := time.NewTimer(cfg.Grace)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
		interrupted = interrupted || next < r.sched.end
	}
	stopProgress()
	res := r.collect()
	res.Start = startWall
	res.Interrupted = interrupted
	res.Elapsed = r.measuredElapsed(sendEnd, next)
	res.PeakInflight, res.Workers = r.peak, r.workers
	if cfg.Rate == 0 {
		res.PeakInflight, res.Workers = int64(cfg.Concurrency), cfg.Concurrency
	}
	res.finish()
	return res, nil
}

// prepare turns pool entries into requests.
func (r *runner) prepare(base string) {
	p := r.cfg.Pool
	urls := make([]string, len(p.Options.Projects))
	auths := make([]string, len(p.Options.Projects))
	for i, pr := range p.Options.Projects {
		urls[i] = base + pr.EnvelopePath()
		auths[i] = pr.AuthHeader(r.cfg.SDKClient)
	}
	kindIdx := map[pool.Kind]uint8{}
	r.reqs = make([]request, len(p.Entries))
	for i, e := range p.Entries {
		ki, ok := kindIdx[e.Kind]
		if !ok {
			ki = uint8(len(r.kinds))
			kindIdx[e.Kind] = ki
			r.kinds = append(r.kinds, e.Kind)
		}
		ua := e.UserAgent
		if ua == "" { // a recorded envelope that came without one
			ua = r.cfg.SDKClient
		}
		r.reqs[i] = request{
			url: urls[e.Project], auth: auths[e.Project], ua: ua, xff: e.ForwardedFor,
			body: e.Body, kind: ki,
		}
	}
}

// release starts job j on a worker, or drops it when MaxInflight requests
// are out. Called by the pacer goroutine only.
func (r *runner) release(pacerRec *recorder, j job) {
	if r.inflight.Load() >= int64(r.cfg.MaxInflight) {
		pacerRec.drop(r, j)
		return
	}
	if n := r.inflight.Add(1); n > r.peak {
		r.peak = n
	}
	if !j.warm {
		r.started.Add(1)
	}
	select {
	case r.work <- j:
		return
	default:
	}
	if r.workers < r.cfg.MaxInflight {
		rec := r.stripes[r.workers%len(r.stripes)]
		r.workers++
		r.wg.Add(1)
		go r.worker(rec, j)
		return
	}
	// Every worker exists and fewer than MaxInflight requests are out, so
	// one worker is between finishing and receiving: this wait is brief.
	r.work <- j
}

func (r *runner) worker(rec *recorder, first job) {
	defer r.wg.Done()
	s := r.client.newSender()
	j, ok := first, true
	for ok {
		r.do(rec, s, j)
		r.inflight.Add(-1)
		j, ok = <-r.work
	}
}

// do sends one slot's request and records it.
func (r *runner) do(rec *recorder, s sender, j job) {
	req := &r.reqs[j.k%int64(len(r.reqs))]
	sentAt := r.clock.Now()
	status, err := s.send(req)
	doneAt := r.clock.Now()
	if j.intended < 0 || j.intended > sentAt { // closed loop: intended = actual send
		j.intended = sentAt
	}
	rec.record(r, j, req.kind, sentAt, doneAt, status, err)
}

// closedLoop runs Concurrency workers that each send back to back until the
// schedule's slots or Duration run out. It returns the next unclaimed slot.
func (r *runner) closedLoop(ctx context.Context) int64 {
	var claimed atomic.Int64 // this shard's slots claimed so far
	limit := r.cfg.Warmup + r.cfg.Duration
	for i := range r.cfg.Concurrency {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			rec := r.stripes[i%len(r.stripes)]
			s := r.client.newSender()
			for ctx.Err() == nil {
				now := r.clock.Now()
				if r.cfg.Duration > 0 && now >= limit {
					return
				}
				k := r.sched.shard + (claimed.Add(1)-1)*r.sched.shards
				if k >= r.sched.end {
					return
				}
				j := job{k: k, intended: -1, warm: now < r.cfg.Warmup}
				r.inflight.Add(1)
				if !j.warm {
					r.started.Add(1)
				}
				r.do(rec, s, j)
				r.inflight.Add(-1)
			}
		}()
	}
	// Wait for the workers here so that the caller's drain logic is shared.
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	n := claimed.Load()
	return r.sched.shard + n*r.sched.shards
}

// measuredElapsed is the length of the measured period: from the end of the
// warm-up to the later of the schedule's end and the last release.
func (r *runner) measuredElapsed(sendEnd time.Duration, next int64) time.Duration {
	w := r.cfg.Warmup
	if r.cfg.Rate > 0 {
		if next >= r.sched.end { // plan completed: its length, or longer if late
			planEnd := r.sched.at(r.sched.end)
			if r.cfg.Duration > 0 && r.cfg.Count == 0 {
				planEnd = r.cfg.Warmup + r.cfg.Duration
			}
			return max(planEnd, sendEnd) - w
		}
	}
	return max(sendEnd-w, 0)
}
