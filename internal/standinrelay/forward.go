package standinrelay

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// forward sends an envelope upstream asynchronously. It blocks while
// limits.max_concurrent_requests sends are in flight (backpressure on the
// processing workers). route tags the statsd timer.
func (r *Relay) forward(ctx context.Context, er *envelopeRequest, route string) {
	select {
	case r.sendSlots <- struct{}{}:
	case <-ctx.Done():
		r.stats.forwardLost.Add(1)
		return
	}
	r.sending.Add(1)
	go func() {
		defer func() {
			<-r.sendSlots
			r.sending.Add(-1)
		}()
		r.send(ctx, er, route)
	}()
}

// send posts one envelope, retrying network errors and 502/503/504 every
// http.retry_delay until ctx ends (Relay keeps such requests queued).
func (r *Relay) send(ctx context.Context, er *envelopeRequest, route string) {
	if err := r.auth.wait(ctx); err != nil {
		r.stats.forwardLost.Add(1)
		if errors.Is(err, errAuthDenied) {
			r.log.Debugf("dropping envelope for project %d: %v", er.projectID, err)
		}
		return
	}
	compressed, err := r.up.enc.Encode(r.up.encode, er.body, nil)
	if err != nil {
		r.log.Errorf("compressing envelope for project %d: %v", er.projectID, err)
		r.stats.forwardLost.Add(1)
		return
	}
	for {
		if err := r.outage.wait(ctx); err != nil {
			r.stats.forwardLost.Add(1)
			return
		}
		start := time.Now()
		res, err := r.up.sendEnvelope(ctx, er, compressed)
		r.noteUpstream(err)
		status := strconv.Itoa(res.status)
		r.metrics.Timing("upstream.requests.duration", time.Since(start), "route:envelope", "status_code:"+status)
		if err == nil {
			r.stats.forwarded.Add(1)
			return
		}
		if ctx.Err() != nil {
			r.stats.forwardLost.Add(1)
			return
		}
		var uerr *upstreamError
		if !errors.As(err, &uerr) {
			r.stats.forwardLost.Add(1)
			return
		}
		switch {
		case uerr.Network:
			r.stats.forwardRetries.Add(1)
			r.log.Debugf("forwarding to project %d: %v; retrying in %s", er.projectID, err, r.cfg.RetryDelay)
			if !sleep(ctx, r.cfg.RetryDelay) {
				r.stats.forwardLost.Add(1)
				return
			}
			if err := r.auth.wait(ctx); err != nil {
				r.stats.forwardLost.Add(1)
				return
			}
			continue
		case uerr.Stop:
			r.log.Errorf("upstream denied this relay (relay stop) on an envelope; never ready again")
			r.auth.set(authDenied)
			r.stats.forwardRejected.Add(1)
		case uerr.Status == http.StatusTooManyRequests:
			// The upstream took the data; remember its limits for the project.
			_, st := r.projects.status(er.publicKey)
			sc := scoping{projectID: er.projectID, key: er.publicKey}
			if st != nil {
				sc.orgID = st.OrganizationID
			}
			limits := parseRateLimits(res.rateLimits, res.retryAfter, time.Now())
			r.limits.add(sc, limits, time.Now())
			r.stats.forwardRateLimited.Add(1)
			r.log.Infof("upstream rate limited project %d: %q (Retry-After %q)", er.projectID, res.rateLimits, res.retryAfter)
		default:
			// Any other answer counts as received: the data is gone.
			r.stats.forwardRejected.Add(1)
			r.log.Debugf("forwarding to project %d: %v (dropped)", er.projectID, err)
		}
		return
	}
}
