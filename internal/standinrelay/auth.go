package standinrelay

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// authState is where the registration handshake stands.
type authState int

const (
	authRegistering authState = iota // not (or no longer) registered: upstream traffic waits
	authRegistered
	authDenied // 403 {"relay":"stop"}: never again
)

func (s authState) String() string {
	return [...]string{"registering", "registered", "denied"}[s]
}

// auth holds the registration state; upstream traffic waits on it.
type auth struct {
	mu      sync.Mutex
	state   authState
	changed chan struct{} // closed and replaced on every state change
}

func newAuth() *auth { return &auth{changed: make(chan struct{})} }

func (a *auth) get() authState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state
}

func (a *auth) set(s authState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == s || a.state == authDenied {
		return
	}
	a.state = s
	close(a.changed)
	a.changed = make(chan struct{})
}

// wait blocks until registered. It returns errAuthDenied after a relay stop,
// or ctx's error.
func (a *auth) wait(ctx context.Context) error {
	for {
		a.mu.Lock()
		s, ch := a.state, a.changed
		a.mu.Unlock()
		switch s {
		case authRegistered:
			return nil
		case authDenied:
			return errAuthDenied
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// backoff is Relay's RetryBackoff: 1 s, then ×1.5 per attempt, capped.
type backoff struct {
	initial, max time.Duration
	next         time.Duration
}

func newBackoff(initial, max time.Duration) *backoff {
	return &backoff{initial: initial, max: max}
}

// delay returns the wait before the next attempt and grows it.
func (b *backoff) delay() time.Duration {
	if b.next == 0 {
		b.next = b.initial
	}
	d := min(b.next, b.max)
	b.next = time.Duration(float64(b.next) * 1.5)
	return d
}

func (b *backoff) reset() { b.next = 0 }

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// runAuth registers at start and every auth_interval, retrying with backoff.
func (r *Relay) runAuth(ctx context.Context) {
	bo := newBackoff(time.Second, r.cfg.MaxRetryInterval)
	for {
		err := r.register(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			bo.reset()
			r.auth.set(authRegistered)
			if !sleep(ctx, r.cfg.AuthInterval) {
				return
			}
			continue
		}
		r.stats.registerFailures.Add(1)
		var uerr *upstreamError
		switch {
		case errors.As(err, &uerr) && uerr.Stop:
			r.log.Errorf("registration: upstream denied this relay (relay stop): %s; never ready again", uerr.Detail)
			r.auth.set(authDenied)
			return
		case errors.As(err, &uerr) && uerr.Network:
			// A failed renewal over a network error keeps the relay authenticated.
			r.log.Warnf("registration: %v; retrying", err)
		default:
			r.log.Warnf("registration: %v; retrying", err)
			r.auth.set(authRegistering)
		}
		if !sleep(ctx, bo.delay()) {
			return
		}
	}
}

// register does challenge then response (docs/protocol.md, Registration).
func (r *Relay) register(ctx context.Context) error {
	start := time.Now()
	challenge, _ := json.Marshal(struct {
		RelayID   string `json:"relay_id"`
		PublicKey string `json:"public_key"`
		Version   string `json:"version"`
	}{r.creds.ID, r.creds.PublicKey, Version})
	var ch struct {
		RelayID *string `json:"relay_id"`
		Token   *string `json:"token"`
	}
	if err := r.up.query(ctx, "/api/0/relays/register/challenge/", challenge, &ch); err != nil {
		return err
	}
	if ch.RelayID == nil || ch.Token == nil {
		return &upstreamError{Status: 200, Detail: "challenge response without relay_id or token"}
	}
	response, _ := json.Marshal(struct {
		RelayID string `json:"relay_id"`
		Token   string `json:"token"`
		Version string `json:"version"`
	}{r.creds.ID, *ch.Token, Version})
	var resp struct {
		RelayID *string `json:"relay_id"`
	}
	if err := r.up.query(ctx, "/api/0/relays/register/response/", response, &resp); err != nil {
		return err
	}
	if resp.RelayID == nil {
		return &upstreamError{Status: 200, Detail: "register response without relay_id"}
	}
	r.stats.registrations.Add(1)
	r.metrics.Timing("upstream.requests.duration", time.Since(start), "route:register")
	r.log.Infof("registered with upstream %s as %s", r.cfg.Upstream, r.creds.ID)
	return nil
}
