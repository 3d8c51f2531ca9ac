package standinrelay

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// process handles one ready envelope: it is compressed for the upstream
// (the stand-in's whole "processing": it does not look into the items;
// the few types Relay never forwards were left out on ingest)
// and handed to forwarding.
func (r *Relay) process(ctx context.Context, j *job) {
	start := time.Now()
	body, err := r.encoder.Encode(r.cfg.Encoding, j.body, nil)
	if err != nil {
		r.log.Printf("compressing an envelope of %s: %v", j.key, err)
		return
	}
	r.metrics.addProcessingTime(time.Since(start))
	// Relay 26.4.0 counts event.accepted twice per forwarded envelope: when
	// processing takes the items out of the envelope it got (whose now empty
	// remainder is accepted), and when the upstream has the new one
	// (relay-server/src/services/processor.rs, process_with_processor and
	// SendEnvelope::respond).
	r.metrics.addAccepted(1)
	r.forward(ctx, &outgoing{key: j.key, projectID: r.projects.get(j.key).id, body: body})
}

// forward sends o upstream in the background. It waits while
// limits.max_concurrent_requests sends are in flight.
func (r *Relay) forward(ctx context.Context, o *outgoing) {
	select {
	case r.sendSlots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	r.sends.Add(1)
	go func() {
		defer func() { <-r.sendSlots; r.sends.Done() }()
		r.send(ctx, o)
	}()
}

// send posts o once and deals with the answer the way Relay's upstream
// service does (relay-server/src/services/upstream.rs, execute and
// complete; processor.rs, SendEnvelope::respond):
//   - 2xx: done; queued retries may go now;
//   - no answer, 502, 503, 504: o goes to the retry queue;
//   - 429: its rate limits are cached for o's project key and o is dropped;
//   - any other answer: o counts as received and is dropped.
func (r *Relay) send(ctx context.Context, o *outgoing) {
	limits, retryAfter, err := r.postEnvelope(ctx, o)
	if ctx.Err() != nil {
		return
	}
	var ue *upstreamError
	switch {
	case err == nil:
		r.retries.trigger()
	case errors.As(err, &ue) && ue.network:
		r.retries.add(o, r.cfg.RetryDelay)
		return
	case errors.As(err, &ue) && ue.status == http.StatusTooManyRequests:
		r.limits.add(o.key, parseRateLimits(limits, retryAfter, time.Now()))
	default:
		r.log.Printf("forwarding an envelope of %s: %v (dropped)", o.key, err)
	}
	r.metrics.addAccepted(1) // Relay accepts what the upstream received
}

// retryQueue holds envelopes whose send got no answer. Like Relay's
// UpstreamQueue, they are retried http.retry_delay after the last failure,
// or at once after any success: while every send fails, nothing is
// retried.
type retryQueue struct {
	mu    sync.Mutex
	queue []*outgoing
	next  time.Time // no retry before this
	wake  chan struct{}
}

func newRetryQueue() *retryQueue { return &retryQueue{wake: make(chan struct{}, 1)} }

func (q *retryQueue) add(o *outgoing, delay time.Duration) {
	q.mu.Lock()
	q.queue = append(q.queue, o)
	q.next = time.Now().Add(delay)
	q.mu.Unlock()
	q.poke()
}

func (q *retryQueue) trigger() {
	q.mu.Lock()
	due := len(q.queue) > 0
	q.next = time.Time{}
	q.mu.Unlock()
	if due {
		q.poke()
	}
}

func (q *retryQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns the next envelope due, or how long until one may be.
func (q *retryQueue) take(now time.Time) (*outgoing, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case len(q.queue) == 0:
		return nil, time.Hour
	case now.Before(q.next):
		return nil, q.next.Sub(now)
	}
	o := q.queue[0]
	q.queue = q.queue[1:]
	return o, 0
}

// runRetries sends due retries until ctx ends.
func (r *Relay) runRetries(ctx context.Context) {
	for {
		o, wait := r.retries.take(time.Now())
		if o != nil {
			r.forward(ctx, o)
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.retries.wake:
		case <-t.C:
		}
		t.Stop()
	}
}
