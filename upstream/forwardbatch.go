package upstream

import (
	"math"
	"slices"
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

// A hold (Config.HoldForwards) is a batch that waits until its counts are
// read: no timer and no count checks it, only a read or its filling half
// way. A held forward is answered once the relay that sent it is found
// registered and its body is read: the rest of its header's checks
// (encoding, signature, project) wait with its body's, the signature's age
// taken at the forward's arrival. Relay takes the 4xx such a check gives as
// it takes a 200: relay-server's SendEnvelope accepts the envelope, with no
// outcome, retry, re-registration or log of its own, for every answer but
// 429 (whose rate limits it keeps) and 502–504 (which it retries). So only
// the status it sees changes. Its bodies are copied into slabs of its own
// rather than kept in the server's 16 KiB buffers (Relay's forwards average
// under 4 KB on the wire), and ReserveHold can take those slabs from the
// kernel before a measured window, so that their first touch does not land
// in it.

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

	// holdSlab is the size of the slabs a hold copies bodies into.
	holdSlab = 1 << 20
	// holdForwardOverhead is what a held forward counts against
	// HoldForwards beside its body: its queue entry and the header strings
	// it keeps.
	holdForwardOverhead = 512
)

// forwardBatch holds forwards answered and not yet checked.
type forwardBatch struct {
	period time.Duration // a batch is checked in the background this long after its first forward
	timer  *time.Timer

	// maxForwards, maxBytes and checkAt are the constants above (tests
	// lower them).
	maxForwards, maxBytes, checkAt int

	// hold: forwards wait until counts are read (Config.HoldForwards);
	// maxBytes is then HoldForwards.
	hold bool

	mu    sync.Mutex // also over the bounds and period, which tests change
	queue []queuedForward
	bytes int       // buffers held by forwards waiting or being checked
	slabs holdSlabs // a hold's copies of bodies

	checking  sync.Mutex  // one check of a batch at a time
	scheduled atomic.Bool // a background check is on its way
}

func newForwardBatch(s *Server, period time.Duration, hold int64) *forwardBatch {
	b := &forwardBatch{period: period, maxForwards: maxBatchedForwards, maxBytes: maxBatchedBytes, checkAt: batchCheckAt}
	if hold > 0 {
		b.hold = true
		b.maxBytes = int(min(hold, math.MaxInt/2))
		b.maxForwards = max(b.maxBytes/holdForwardOverhead, 1)
	}
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
	head envelopeHead // in a hold, found when it is checked
	wire []byte       // the body as read
	buf  *[]byte      // the pooled buffer wire lies in; nil when in a hold's slab
	size int          // what it counts in forwardBatch.bytes
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
	now := s.now()
	var head envelopeHead
	if b.hold {
		// The header's checks wait with the body's (checkQueued, at the
		// forward's arrival time), but for the relay's registration.
		if _, e = s.registeredRelay(in.relayID); e != nil {
			return true, e
		}
	} else if head, e = s.checkEnvelopeHead(c, in, now); e != nil {
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
	size := cap(*buf) // what a batch holds, not what it uses
	if b.hold {
		size = len(*buf) + holdForwardOverhead
	}
	b.mu.Lock()
	if len(b.queue) >= b.maxForwards || b.bytes+size > b.maxBytes {
		b.mu.Unlock()
		defer s.putBuf(buf)
		if b.hold {
			if head, e = s.checkEnvelopeHead(c, in, now); e != nil {
				return true, e
			}
		}
		return true, s.sinkBody(c, in, head, buf, (*fastAnswer)(ctx), now)
	}
	c.inflight.Add(1) // until checked
	f := queuedForward{c: c, in: *in, head: head, wire: *buf, buf: buf, size: size, at: now}
	if b.hold {
		f.wire, f.buf = b.slabs.copy(*buf), nil
	}
	first := len(b.queue) == 0
	b.queue = append(b.queue, f)
	b.bytes += size
	var due bool
	if b.hold { // every forward counts 512 bytes at least: the bytes bound the count too
		due = b.bytes >= b.maxBytes/2
	} else {
		due = len(b.queue) >= b.checkAt
	}
	period := b.period
	b.mu.Unlock()
	if f.buf == nil {
		s.putBuf(buf)
	}
	ctx.SetContentType("application/json")
	ctx.Response.SetBody(emptyObject)
	if first && !b.hold {
		b.timer.Reset(period)
	}
	if due && s.checkBatchInBackground() && b.hold {
		c.holdFull.Add(1)
	}
	return true, nil
}

// ReserveHold takes from the kernel, before they are needed, the slabs that
// forwards of about bytes (bodies as Relay sends them) need in the hold,
// at most Config.HoldForwards, and room in its queue for as many forwards.
// A harness calls it before its measured window: the first touch of new
// memory (the kernel zeroing its pages) then lands before the window. It
// does nothing unless Config.HoldForwards is set.
func (s *Server) ReserveHold(forwards int, bytes int64) {
	b := s.batch
	if b == nil || !b.hold {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	forwards = min(forwards, b.maxForwards)
	if forwards > cap(b.queue)-len(b.queue) {
		q := make([]queuedForward, len(b.queue), len(b.queue)+forwards)
		copy(q, b.queue)
		b.queue = q
	}
	b.slabs.reserve(min(bytes, int64(b.maxBytes/2))) // past half the hold is checked
}

// CheckForwards checks, decodes and counts every forward waiting in a batch
// or a hold, and returns once they are counted (reading the counts does
// the same).
func (s *Server) CheckForwards() { s.checkBatch() }

// holdSlabs are the slabs a hold copies bodies into: cur is being filled,
// used hold forwards waiting (cur too), free are reserved or checked ones.
// All under forwardBatch.mu.
type holdSlabs struct {
	cur        []byte
	used, free [][]byte
	total      int64 // bytes of the slabs made
}

// copy copies body into the current slab, starting a new one if it does
// not fit, and returns the copy.
func (h *holdSlabs) copy(body []byte) []byte {
	if cap(h.cur)-len(h.cur) < len(body) {
		if n := len(h.free); n > 0 && len(body) <= holdSlab {
			h.cur, h.free = h.free[n-1][:0], h.free[:n-1]
		} else {
			h.cur = make([]byte, 0, max(holdSlab, len(body)))
			h.total += int64(cap(h.cur))
		}
		h.used = append(h.used, h.cur)
	}
	at := len(h.cur)
	h.cur = append(h.cur, body...)
	return h.cur[at:len(h.cur):len(h.cur)]
}

// take hands over the slabs in use to a check, which gives them back once
// the forwards in them are checked.
func (h *holdSlabs) take() [][]byte {
	u := h.used
	h.used, h.cur = nil, nil
	return u
}

// give takes back slabs whose forwards were checked, to be filled again.
func (h *holdSlabs) give(slabs [][]byte) {
	for _, sl := range slabs {
		if cap(sl) == holdSlab {
			h.free = append(h.free, sl[:0])
		}
	}
}

// reserve makes slabs until n bytes of them exist, writing to each page so
// that the kernel maps it now.
func (h *holdSlabs) reserve(n int64) {
	const page = 4096
	for h.total+holdSlab <= n {
		sl := make([]byte, holdSlab)
		for i := 0; i < len(sl); i += page {
			sl[i] = 1
		}
		h.free = append(h.free, sl[:0])
		h.total += holdSlab
	}
}

// checkBatchInBackground checks the batch on a goroutine of its own,
// unless one is on its way already.
// It reports whether it started one.
func (s *Server) checkBatchInBackground() bool {
	b := s.batch
	if !b.scheduled.CompareAndSwap(false, true) {
		return false
	}
	go func() {
		defer b.scheduled.Store(false)
		s.checkBatch()
	}()
	return true
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
	slabs := b.slabs.take()
	b.mu.Unlock()
	noteLargest(q) // before the checks: a generation's last check ends its inflight count
	for i := range q {
		s.checkQueued(&q[i])
	}
	clear(q)
	if b.hold {
		b.mu.Lock()
		b.slabs.give(slabs)
		if b.queue == nil {
			b.queue = q[:0] // the reserved room, for the next forwards
		}
		b.mu.Unlock()
	}
}

// noteLargest raises each counter generation's LargestCheck to the number
// of its forwards in q (a few generations at most: ResetStats starts one).
// Only a check calls it, under forwardBatch.checking.
func noteLargest(q []queuedForward) {
	var gens []*counters
	var n []int64
	for i := range q {
		j := slices.Index(gens, q[i].c)
		if j < 0 {
			gens, n = append(gens, q[i].c), append(n, 0)
			j = len(gens) - 1
		}
		n[j]++
	}
	for j, c := range gens {
		if n[j] > c.batchLargest.Load() {
			c.batchLargest.Store(n[j])
		}
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
		b.bytes -= f.size
		b.mu.Unlock()
		if f.buf != nil {
			s.putBuf(f.buf)
		}
		c.inflight.Add(-1)
	}()
	var e *httpError
	if s.batch.hold { // the header's checks but the relay's registration waited too
		f.head, e = s.checkEnvelopeHead(c, &f.in, f.at)
	}
	if e == nil {
		e = s.sinkBody(c, &f.in, f.head, &f.wire, discardAnswer{}, f.at)
	}
	if e != nil {
		c.errors.add(e.reason, 1)
		c.batchFailed.Add(1)
	}
}

// BatchedForwards counts Relay forwards answered before their body was
// checked (Config.BatchForwards).
type BatchedForwards struct {
	// Checked forwards were answered 200 once their header passed (in a
	// hold: once their relay was found registered) and their body was read,
	// then checked, decoded and counted in a batch.
	Checked int64 `json:"checked"`
	// FailedAfterAnswer of them failed a check on their body (in a hold,
	// or on their header): each is in Errors under its reason, though
	// Relay was answered 200.
	FailedAfterAnswer int64 `json:"failed_after_answer"`
	// HoldFull counts the times a hold (Config.HoldForwards) filled half
	// way and was checked before its counts were read.
	HoldFull int64 `json:"hold_full"`
	// LargestCheck is the most forwards that arrived since the counts
	// were reset and were checked together: with a hold read only after a
	// harness's window, every forward that arrived before the first read
	// after it (a read part-way through would have split them).
	LargestCheck int64 `json:"largest_check"`
}
