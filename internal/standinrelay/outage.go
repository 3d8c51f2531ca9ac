package standinrelay

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// outage tracks upstream connectivity like Relay's upstream service: after
// http.outage_grace_period of nothing but network errors the relay enters
// outage mode, pauses upstream traffic and polls GET /api/0/relays/live/
// with backoff (1 s ×1.5, capped) until any non-network answer.
type outage struct {
	mu       sync.Mutex
	firstErr time.Time // start of the current run of network errors; zero after a success
	active   bool
	changed  chan struct{} // closed when outage mode ends
}

func newOutage() *outage { return &outage{changed: make(chan struct{})} }

// note records one upstream answer; it reports whether outage mode just began.
func (o *outage) note(networkErr bool, grace time.Duration, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !networkErr {
		o.firstErr = time.Time{}
		return false
	}
	if o.firstErr.IsZero() {
		o.firstErr = now
	}
	if !o.active && now.Sub(o.firstErr) >= grace {
		o.active = true
		o.changed = make(chan struct{})
		return true
	}
	return false
}

// wait blocks while outage mode is on.
func (o *outage) wait(ctx context.Context) error {
	o.mu.Lock()
	active, ch := o.active, o.changed
	o.mu.Unlock()
	if !active {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (o *outage) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.active {
		o.active = false
		o.firstErr = time.Time{}
		close(o.changed)
	}
}

// noteUpstream feeds an upstream call's result into the outage tracker and
// starts the live-check poller when outage mode begins.
func (r *Relay) noteUpstream(err error) {
	network := false
	if uerr, ok := err.(*upstreamError); ok && uerr.Network {
		network = true
	}
	if r.outage.note(network, r.cfg.OutageGracePeriod, time.Now()) {
		r.stats.outages.Add(1)
		r.log.Errorf("upstream unreachable for %s: outage mode, polling /api/0/relays/live/", r.cfg.OutageGracePeriod)
		go r.pollLive(r.hardCtx)
	}
}

// pollLive checks the upstream until it answers, then ends outage mode.
func (r *Relay) pollLive(ctx context.Context) {
	bo := newBackoff(time.Second, r.cfg.MaxRetryInterval)
	for {
		if !sleep(ctx, bo.delay()) {
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.up.url("/api/0/relays/live/"), nil)
		if err != nil {
			return
		}
		req.Header.Set("X-Sentry-Relay-Id", r.creds.ID)
		req.Header.Set("User-Agent", r.up.ua)
		r.stats.liveChecks.Add(1)
		resp, err := r.up.client.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			continue
		}
		r.log.Infof("upstream answered the live check (%d): outage mode ends", resp.StatusCode)
		r.outage.end()
		return
	}
}
