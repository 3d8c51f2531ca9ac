package upstream

import (
	"bytes"
	"context"
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
// figures). What the batch defers changes nothing Relay sees except the
// answer: Relay reads no envelope answer's body (it consumes and drops it)
// and treats a 4xx to a forward as received, like a 200, so a forward that
// fails a deferred check is answered 200 and counted as the error it is
// (Stats.BatchedForwards.FailedAfterAnswer and Errors). Every count is
// complete whenever it is read: Stats, ResetStats and DataEnvelopes check
// what is queued first.

// Bounds on a batch: beyond them a forward is checked and answered at once.
const (
	// maxBatchedForwards bounds the forwards waiting in a batch.
	maxBatchedForwards = 4096
	// maxBatchedBytes bounds the buffers holding their bodies.
	maxBatchedBytes = 64 << 20
	// batchFlushAt starts a check of the batch in the background once this
	// many forwards wait, whatever their age.
	batchFlushAt = 512
)

// forwardBatch holds forwards answered and not yet checked.
type forwardBatch struct {
	period time.Duration // the oldest forward waits about this long at most while forwards arrive

	mu     sync.Mutex
	queue  []queuedForward
	bytes  int
	oldest time.Time

	checking  sync.Mutex  // one check of a batch at a time
	scheduled atomic.Bool // a background check is on its way
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
// its checks, if the batch has room and the body is small enough to be read
// whole before the handler (BodyPreSlotBytes). handled false: the caller
// checks and answers it as usual. A non-nil error is for the caller to
// answer.
func (s *Server) batchForward(ctx *fasthttp.RequestCtx, c *counters, in *envelopeRequest) (handled bool, e *httpError) {
	b := s.batch
	if n := in.body.n; n < 0 || n > BodyPreSlotBytes {
		return false, nil
	}
	b.mu.Lock()
	full := len(b.queue) >= maxBatchedForwards || b.bytes+int(in.body.n) > maxBatchedBytes
	b.mu.Unlock()
	if full {
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
	now := s.now()
	c.inflight.Add(1) // until checked
	in.body = bodySource{}
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.oldest = now
	}
	b.queue = append(b.queue, queuedForward{c: c, in: *in, head: head, body: buf, at: now})
	b.bytes += cap(*buf) // what the batch holds, not what it uses
	due := len(b.queue) >= batchFlushAt || now.Sub(b.oldest) >= b.period
	b.mu.Unlock()
	ctx.SetContentType("application/json")
	ctx.Response.SetBody(emptyObject)
	if due && b.scheduled.CompareAndSwap(false, true) {
		go func() {
			s.checkBatch()
			b.scheduled.Store(false)
		}()
	}
	return true, nil
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
	b.queue, b.bytes = nil, 0
	b.mu.Unlock()
	for i := range q {
		f := &q[i]
		f.in.body = bodySource{r: bytes.NewReader(*f.body), n: int64(len(*f.body)), preRead: true, ctx: context.Background()}
		c := f.c
		if e := s.sinkBody(c, &f.in, f.head, discardAnswer{}, f.at); e != nil {
			c.errors.add(e.reason, 1)
			c.batchFailed.Add(1)
		}
		c.batchChecked.Add(1)
		s.putBuf(f.body)
		c.inflight.Add(-1)
		q[i] = queuedForward{}
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
