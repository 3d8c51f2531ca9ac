package standinrelay

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"
)

// maxCachedProjects bounds the project cache; keys come from clients.
const maxCachedProjects = 100_000

// minPendingRetry is the shortest wait before re-requesting a key the
// upstream answered "pending" (cache.batch_interval may be 0 in tests).
const minPendingRetry = 50 * time.Millisecond

// ProjectState is the part of a project config the stand-in uses.
type ProjectState struct {
	Disabled       bool   `json:"disabled"`
	ProjectID      int64  `json:"projectId"`
	OrganizationID int64  `json:"organizationId"`
	Slug           string `json:"slug"`
	Rev            string `json:"rev"`
	PublicKeys     []struct {
		PublicKey string `json:"publicKey"`
		NumericID int64  `json:"numericId"`
	} `json:"publicKeys"`
	Config struct {
		Features []string `json:"features"`
	} `json:"config"`
}

// hasFeature reports whether config.features lists f.
func (p *ProjectState) hasFeature(f string) bool {
	return slices.Contains(p.Config.Features, f)
}

// projectStatus is what the cache knows about a key.
type projectStatus int

const (
	projectLoading  projectStatus = iota // first fetch not answered yet
	projectEnabled                       // a config with disabled:false
	projectDisabled                      // disabled, null, missing, or gave up
)

type projectEntry struct {
	status    projectStatus
	state     *ProjectState // nil unless enabled
	rev       string
	fetchedAt time.Time // last resolution; zero while loading
	lastUsed  time.Time

	queued    bool      // in the fetch queue or a request is in flight
	firstAsk  time.Time // when the current fetch started (for query_timeout)
	notBefore time.Time // backoff after a failed request
	failures  int
}

// projectCache fetches project configs in batches (docs/protocol.md, Project
// configs).
type projectCache struct {
	r *Relay

	mu      sync.Mutex
	entries map[string]*projectEntry
	queue   []string // keys to fetch, in order of first request
	wake    chan struct{}
}

func newProjectCache(r *Relay) *projectCache {
	return &projectCache{r: r, entries: map[string]*projectEntry{}, wake: make(chan struct{}, 1)}
}

// lookup returns the key's status and state (nil unless enabled) and queues
// a fetch when the key is new or its config has expired. ok is false when
// the cache is full.
func (c *projectCache) lookup(key string, now time.Time) (projectStatus, *ProjectState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		if len(c.entries) >= maxCachedProjects {
			return projectLoading, nil, false
		}
		e = &projectEntry{}
		c.entries[key] = e
		c.enqueueLocked(key, e, now)
	} else if e.status != projectLoading && !e.queued && now.Sub(e.fetchedAt) > c.r.cfg.ProjectExpiry {
		c.enqueueLocked(key, e, now) // stale: keep using it, refetch with rev
	}
	e.lastUsed = now
	return e.status, e.state, true
}

// status reports the key's status without queueing anything.
func (c *projectCache) status(key string) (projectStatus, *ProjectState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil {
		return e.status, e.state
	}
	return projectLoading, nil
}

func (c *projectCache) enqueueLocked(key string, e *projectEntry, now time.Time) {
	e.queued = true
	e.firstAsk = now
	e.failures = 0
	e.notBefore = time.Time{}
	c.queue = append(c.queue, key)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run fetches queued keys until ctx ends.
func (c *projectCache) run(ctx context.Context) {
	sweep := time.NewTicker(10 * time.Second)
	defer sweep.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			c.evict(time.Now())
			continue
		case <-retry:
		case <-c.wake:
		}
		retry = nil
		authErr := c.r.auth.wait(ctx)
		if authErr != nil && !errors.Is(authErr, errAuthDenied) {
			return
		}
		if !sleep(ctx, c.r.cfg.BatchInterval) { // debounce
			return
		}
		keys, next := c.takeDue(time.Now())
		switch {
		case len(keys) == 0:
		case authErr != nil:
			// After a relay stop every query fails at once; keys back off
			// until query_timeout and end up disabled, as in Relay.
			c.requeueFailed(keys, time.Now())
		default:
			c.fetchRound(ctx, keys)
		}
		c.mu.Lock()
		more := len(c.queue) > 0
		c.mu.Unlock()
		if more {
			if next <= 0 || len(keys) > 0 {
				next = minPendingRetry
			}
			retry = time.After(max(next, minPendingRetry))
		}
	}
}

// takeDue removes up to batch_size × max_concurrent_queries due keys from
// the queue; next is the wait until the earliest not-yet-due key.
func (c *projectCache) takeDue(now time.Time) (keys []string, next time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.r.cfg.BatchSize * c.r.cfg.MaxConcurrentQueries
	rest := c.queue[:0]
	for _, k := range c.queue {
		e := c.entries[k]
		if e == nil || !e.queued {
			continue
		}
		if len(keys) >= limit || e.notBefore.After(now) {
			if d := e.notBefore.Sub(now); d > 0 && (next == 0 || d < next) {
				next = d
			}
			rest = append(rest, k)
			continue
		}
		keys = append(keys, k)
	}
	clear(c.queue[len(rest):])
	c.queue = rest
	return keys, next
}

// projectRequest is the v3 project-config query body.
type projectRequest struct {
	PublicKeys []string  `json:"publicKeys"`
	Revisions  []*string `json:"revisions"`
	FullConfig bool      `json:"fullConfig"`
	NoCache    bool      `json:"noCache"`
}

type projectResponse struct {
	Configs   map[string]json.RawMessage `json:"configs"`
	Pending   []string                   `json:"pending"`
	Unchanged []string                   `json:"unchanged"`
}

// fetchRound sends keys in batches of batch_size, at most
// max_concurrent_queries at once.
func (c *projectCache) fetchRound(ctx context.Context, keys []string) {
	sem := make(chan struct{}, c.r.cfg.MaxConcurrentQueries)
	var wg sync.WaitGroup
	for len(keys) > 0 {
		n := min(len(keys), c.r.cfg.BatchSize)
		batch := keys[:n]
		keys = keys[n:]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c.fetchBatch(ctx, batch)
		}()
	}
	wg.Wait()
}

func (c *projectCache) fetchBatch(ctx context.Context, keys []string) {
	req := projectRequest{PublicKeys: keys, Revisions: make([]*string, len(keys))}
	c.mu.Lock()
	for i, k := range keys {
		if e := c.entries[k]; e != nil && e.rev != "" {
			rev := e.rev
			req.Revisions[i] = &rev
		}
	}
	c.mu.Unlock()
	body, _ := json.Marshal(req)
	if err := c.r.outage.wait(ctx); err != nil {
		return
	}
	start := time.Now()
	var resp projectResponse
	err := c.r.up.query(ctx, "/api/0/relays/projectconfigs/?version=3", body, &resp)
	c.r.noteUpstream(err)
	c.r.stats.projectRequests.Add(1)
	c.r.metrics.Timing("project_state.request.duration", time.Since(start))
	now := time.Now()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		var uerr *upstreamError
		if errors.As(err, &uerr) && uerr.Stop {
			c.r.auth.set(authDenied)
		}
		c.r.stats.projectRequestErrors.Add(1)
		c.r.log.Warnf("project config request for %d keys: %v", len(keys), err)
		c.requeueFailed(keys, now)
		return
	}
	pending := make(map[string]bool, len(resp.Pending))
	for _, k := range resp.Pending {
		pending[k] = true
	}
	unchanged := make(map[string]bool, len(resp.Unchanged))
	for _, k := range resp.Unchanged {
		unchanged[k] = true
	}
	var resolved []string
	var enabled []bool
	c.mu.Lock()
	for _, k := range keys {
		e := c.entries[k]
		if e == nil {
			continue
		}
		switch {
		case pending[k]:
			c.r.stats.projectPending.Add(1)
			if now.Sub(e.firstAsk) > c.r.cfg.QueryTimeout {
				c.r.log.Warnf("project %s: still pending after %s, treating as disabled", k, c.r.cfg.QueryTimeout)
				c.resolveLocked(e, nil, now)
				resolved, enabled = append(resolved, k), append(enabled, false)
				continue
			}
			c.queue = append(c.queue, k) // next round
			continue
		case unchanged[k] && e.status != projectLoading:
			c.r.stats.projectUnchanged.Add(1)
			e.fetchedAt = now
			e.queued = false
			continue
		}
		var st *ProjectState
		if raw, ok := resp.Configs[k]; ok && string(raw) != "null" {
			var ps ProjectState
			if err := json.Unmarshal(raw, &ps); err != nil {
				c.r.log.Errorf("project %s: config does not parse: %v", k, err)
				c.failLocked(k, e, now)
				continue
			}
			if !ps.Disabled {
				st = &ps
			}
		}
		c.resolveLocked(e, st, now)
		resolved, enabled = append(resolved, k), append(enabled, st != nil)
	}
	c.mu.Unlock()
	for i, k := range resolved {
		c.r.projectResolved(k, enabled[i])
	}
}

// resolveLocked stores a final answer: st nil means disabled.
func (c *projectCache) resolveLocked(e *projectEntry, st *ProjectState, now time.Time) {
	e.queued = false
	e.fetchedAt = now
	e.failures = 0
	e.state = st
	if st == nil {
		e.status = projectDisabled
		e.rev = ""
		return
	}
	e.status = projectEnabled
	e.rev = st.Rev
}

// failLocked backs a key off after a failed fetch, or gives up after
// query_timeout (the project is then cached as disabled). It reports
// whether the key was resolved.
func (c *projectCache) failLocked(k string, e *projectEntry, now time.Time) bool {
	if now.Sub(e.firstAsk) > c.r.cfg.QueryTimeout {
		c.r.log.Warnf("project %s: no config after %s, treating as disabled", k, c.r.cfg.QueryTimeout)
		c.resolveLocked(e, nil, now)
		return true
	}
	e.failures++
	bo := newBackoff(time.Second, c.r.cfg.MaxRetryInterval)
	var d time.Duration
	for range e.failures {
		d = bo.delay()
	}
	e.notBefore = now.Add(d)
	c.queue = append(c.queue, k)
	return false
}

func (c *projectCache) requeueFailed(keys []string, now time.Time) {
	var resolved []string
	c.mu.Lock()
	for _, k := range keys {
		if e := c.entries[k]; e != nil && e.queued {
			if c.failLocked(k, e, now) {
				resolved = append(resolved, k)
			}
		}
	}
	c.mu.Unlock()
	for _, k := range resolved {
		c.r.projectResolved(k, false)
	}
}

// evict drops entries unused for expiry + grace period.
func (c *projectCache) evict(now time.Time) {
	ttl := c.r.cfg.ProjectExpiry + c.r.cfg.ProjectGracePeriod
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if !e.queued && e.status != projectLoading && now.Sub(e.lastUsed) > ttl && now.Sub(e.fetchedAt) > ttl {
			delete(c.entries, k)
		}
	}
}

// globalResponse is the answer to {"global":true}.
type globalResponse struct {
	Global       json.RawMessage `json:"global"`
	GlobalStatus string          `json:"globalStatus"`
}

// runGlobalConfig polls the global config every global_config_fetch_interval.
func (r *Relay) runGlobalConfig(ctx context.Context) {
	body := []byte(`{"global":true,"publicKeys":[]}`)
	for {
		if err := r.auth.wait(ctx); err != nil {
			return
		}
		if err := r.outage.wait(ctx); err != nil {
			return
		}
		start := time.Now()
		var resp globalResponse
		err := r.up.query(ctx, "/api/0/relays/projectconfigs/?version=3", body, &resp)
		r.noteUpstream(err)
		r.stats.globalRequests.Add(1)
		r.metrics.Timing("global_config.requests.duration", time.Since(start))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			var uerr *upstreamError
			if errors.As(err, &uerr) && uerr.Stop {
				r.auth.set(authDenied)
			}
			r.log.Warnf("global config: %v", err)
		case len(resp.Global) == 0 || string(resp.Global) == "null":
			r.log.Errorf("global config: response without \"global\"")
		case resp.GlobalStatus == "pending":
			r.log.Debugf("global config: upstream says pending")
		default:
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(resp.Global, &obj); err != nil {
				r.log.Errorf("global config does not parse: %v", err)
				break
			}
			r.globalConfigReady()
		}
		if !sleep(ctx, r.cfg.GlobalFetchInterval) {
			return
		}
	}
}
