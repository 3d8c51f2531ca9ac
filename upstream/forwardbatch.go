package upstream

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Batched checking of Relay's envelope forwards (Config.BatchForwards).
//
// A forward is answered as soon as its header has passed the checks that
// need only the header (encoding, relay authentication, project) and its
// body is read; decoding, framing, the key and limit checks, the outcome
// carriers and counting run later over the whole batch. The same work per
// forward then runs back to back instead of once per wake-up, which costs
// the harness less beside a busy Relay (docs/harness-cost.md has the
// figures). What Relay sees change is only its answer: {} instead of the
// event id (Relay consumes an envelope answer's body unread), sooner, and
// 200 for a forward that fails a check on its body, where it would have had
// a 4xx (Relay takes a 4xx to a forward as received, like a 200). Such a
// forward is counted as the error it is (Errors, and
// Stats.BatchedForwards.FailedAfterAnswer). Every count is complete
// whenever it is read: Stats, ResetStats and DataEnvelopes check what
// waits first.

// Default bounds on a batch: past them a forward is checked before it is
// answered.
const (
	// maxBatchedForwards bounds the forwards waiting in a batch.
	maxBatchedForwards = 4096
	// maxBatchedBytes bounds the buffers holding their bodies.
	maxBatchedBytes = 64 << 20
	// batchCheckAt starts a check of the batch in the background once this
	// many forwards wait, before the period is up.
	batchCheckAt = 512
)

// forwardBatch holds forwards answered and not yet checked.
type forwardBatch struct {
	period time.Duration // a batch is checked in the background this long after its first forward
	timer  *time.Timer

	// maxForwards, maxBytes and checkAt are the constants above (tests
	// lower them).
	maxForwards, maxBytes, checkAt int

	mu    sync.Mutex // also over the bounds and period, which tests change
	queue []queuedForward
	bytes int // buffers held by forwards waiting or being checked

	checking  sync.Mutex  // one check of a batch at a time
	scheduled atomic.Bool // a background check is on its way
}

func newForwardBatch(s *Server, period time.Duration) *forwardBatch {
	b := &forwardBatch{period: period, maxForwards: maxBatchedForwards, maxBytes: maxBatchedBytes, checkAt: batchCheckAt}
	b.timer = time.AfterFunc(time.Hour, func() { s.checkBatchInBackground() })
	b.timer.Stop()
	return b
}

// queuedForward is one forward waiting in a batch. It holds its counter
// generation (c.inflight counts it until it is checked) and its body, read
// into a pooled buffer.
type queuedForward struct {
	c    *counters
	in   envelopeRequest
	head envelopeHead
	body *[]byte
	at   time.Time
}

// discardAnswer takes the answer to a forward answered already.
type discardAnswer struct{}

func (discardAnswer) answerEnvelope([]byte) {}

// batchForward answers a Relay forward on fasthttp and queues the rest of
// its checks. A body that fasthttp did not read whole before the handler
// (over BodyPreSlotBytes, or of unknown length) is not batched (handled
// false: the caller checks and answers it as usual), nor is one that finds
// the batch full (checked and answered here). A non-nil error is for the
// caller to answer.
func (s *Server) batchForward(ctx *fasthttp.RequestCtx, c *counters, in *envelopeRequest) (handled bool, e *httpError) {
	b := s.batch
	if n := in.body.n; n < 0 || n > BodyPreSlotBytes {
		return false, nil
	}
	head, e := s.checkEnvelopeHead(c, in)
	if e != nil {
		return true, e
	}
	buf, large, e := s.readBody(in.body)
	if e != nil {
		return true, e
	}
	if large { // not at this size (readBody takes a read slot only past BodyPreSlotBytes)
		<-s.readSlots
	}
	in.body = bodySource{}
	now := s.now()
	b.mu.Lock()
	if len(b.queue) >= b.maxForwards || b.bytes+cap(*buf) > b.maxBytes {
		b.mu.Unlock()
		defer s.putBuf(buf)
		return true, s.sinkBody(c, in, head, buf, (*fastAnswer)(ctx), now)
	}
	c.inflight.Add(1) // until checked
	first := len(b.queue) == 0
	b.queue = append(b.queue, queuedForward{c: c, in: *in, head: head, body: buf, at: now})
	b.bytes += cap(*buf) // what the batch holds, not what it uses
	due, period := len(b.queue) >= b.checkAt, b.period
	b.mu.Unlock()
	ctx.SetContentType("application/json")
	ctx.Response.SetBody(emptyObject)
	if first {
		b.timer.Reset(period)
	}
	if due {
		s.checkBatchInBackground()
	}
	return true, nil
}

// checkBatchInBackground checks the batch on a goroutine of its own,
// unless one is on its way already.
func (s *Server) checkBatchInBackground() {
	b := s.batch
	if b.scheduled.CompareAndSwap(false, true) {
		go func() {
			defer b.scheduled.Store(false)
			s.checkBatch()
		}()
	}
}

// checkBatch checks, decodes and counts every forward waiting in the batch.
// It returns once they are counted.
func (s *Server) checkBatch() {
	b := s.batch
	if b == nil {
		return
	}
	b.checking.Lock()
	defer b.checking.Unlock()
	b.mu.Lock()
	q := b.queue
	b.queue = nil
	b.mu.Unlock()
	for i := range q {
		s.checkQueued(&q[i])
		q[i] = queuedForward{}
	}
}

// checkQueued checks one forward of a batch and gives back what it holds,
// whatever happens: a panic is counted as the envelope handler counts one.
func (s *Server) checkQueued(f *queuedForward) {
	c := f.c
	defer func() {
		if p := recover(); p != nil {
			c.panics.Add(1)
			c.errors.add("panic", 1)
			c.batchFailed.Add(1)
		}
		c.batchChecked.Add(1)
		b := s.batch
		b.mu.Lock()
		b.bytes -= cap(*f.body)
		b.mu.Unlock()
		s.putBuf(f.body)
		c.inflight.Add(-1)
	}()
	if e := s.sinkBody(c, &f.in, f.head, f.body, discardAnswer{}, f.at); e != nil {
		c.errors.add(e.reason, 1)
		c.batchFailed.Add(1)
	}
}

// BatchedForwards counts Relay forwards answered before their body was
// checked (Config.BatchForwards).
type BatchedForwards struct {
	// Checked forwards were answered 200 once their header passed and their
	// body was read, then checked, decoded and counted in a batch.
	Checked int64 `json:"checked"`
	// FailedAfterAnswer of them failed a check on their body: each is in
	// Errors under its reason, though Relay was answered 200.
	FailedAfterAnswer int64 `json:"failed_after_answer"`
}
