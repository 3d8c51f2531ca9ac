package standinrelay

import (
	"errors"
	"sync"
	"time"

	"github.com/relayload/relayload/envelope"
)

// errBufferFull makes ingest answer 503, like Relay's full envelope buffer.
var errBufferFull = errors.New("envelope buffer full")

// requestMeta is what Relay keeps from the SDK's HTTP request.
type requestMeta struct {
	client       string // sentry_client
	version      string // sentry_version
	userAgent    string
	forwardedFor string
	origin       string
	received     time.Time
}

// job is one accepted envelope waiting to be processed.
type job struct {
	key       string
	projectID int64 // from the URL
	env       *envelope.Envelope
	size      int // decoded bytes held
	meta      requestMeta
}

// buffer holds accepted envelopes, bounded in count and bytes. Envelopes of
// projects whose config (or the global config) has not arrived wait per key;
// the others are ready for the processing workers.
type buffer struct {
	mu       sync.Mutex
	cond     *sync.Cond
	waiting  map[string][]*job
	ready    []*job
	head     int
	count    int
	bytes    int64
	busy     int // popped, not yet done
	closed   bool
	maxCount int
	maxBytes int64
	// peakCount and peakBytes are the highest count and bytes held.
	peakCount int
	peakBytes int64
}

func newBuffer(maxCount int, maxBytes int64) *buffer {
	b := &buffer{waiting: map[string][]*job{}, maxCount: maxCount, maxBytes: maxBytes}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// push adds j. isReady is evaluated under the buffer lock so that a
// concurrent release for the same key cannot be missed.
func (b *buffer) push(j *job, isReady func(key string) bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errBufferFull
	}
	if b.count+1 > b.maxCount || b.bytes+int64(j.size) > b.maxBytes {
		return errBufferFull
	}
	b.count++
	b.bytes += int64(j.size)
	b.peakCount = max(b.peakCount, b.count)
	b.peakBytes = max(b.peakBytes, b.bytes)
	if isReady(j.key) {
		b.ready = append(b.ready, j)
		b.cond.Signal()
	} else {
		b.waiting[j.key] = append(b.waiting[j.key], j)
	}
	return nil
}

// release moves the key's waiting envelopes to the ready queue.
func (b *buffer) release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if js := b.waiting[key]; len(js) > 0 {
		b.ready = append(b.ready, js...)
		delete(b.waiting, key)
		b.cond.Broadcast()
	}
}

// releaseWhere moves every waiting key for which isReady holds.
func (b *buffer) releaseWhere(isReady func(key string) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, js := range b.waiting {
		if isReady(k) {
			b.ready = append(b.ready, js...)
			delete(b.waiting, k)
		}
	}
	b.cond.Broadcast()
}

// drop removes and returns the key's waiting envelopes.
func (b *buffer) drop(key string) []*job {
	b.mu.Lock()
	defer b.mu.Unlock()
	js := b.waiting[key]
	delete(b.waiting, key)
	for _, j := range js {
		b.count--
		b.bytes -= int64(j.size)
	}
	return js
}

// pop blocks for a ready envelope; ok is false once the buffer is closed
// and nothing is ready.
func (b *buffer) pop() (*job, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.head == len(b.ready) && !b.closed {
		b.cond.Wait()
	}
	if b.head == len(b.ready) {
		return nil, false
	}
	j := b.ready[b.head]
	b.ready[b.head] = nil
	b.head++
	if b.head == len(b.ready) {
		b.ready, b.head = b.ready[:0], 0
	} else if b.head > 1024 && b.head*2 > len(b.ready) {
		n := copy(b.ready, b.ready[b.head:])
		clear(b.ready[n:])
		b.ready, b.head = b.ready[:n], 0
	}
	b.busy++
	return j, true
}

// done marks a popped envelope as handled.
func (b *buffer) done(j *job) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.busy--
	b.count--
	b.bytes -= int64(j.size)
	b.cond.Broadcast()
}

// full reports whether the buffer is at its count or byte bound.
func (b *buffer) full() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count >= b.maxCount || b.bytes >= b.maxBytes
}

// len returns the envelopes held (waiting, ready or being processed) and
// how many of them are waiting for a config.
func (b *buffer) len() (held, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, js := range b.waiting {
		waiting += len(js)
	}
	return b.count, waiting
}

// peak returns the highest count and bytes held since the start.
func (b *buffer) peak() (int, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peakCount, b.peakBytes
}

// close wakes the workers; they exit once the ready queue is empty.
// Envelopes still waiting are returned (they are lost).
func (b *buffer) close() []*job {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	var lost []*job
	for k, js := range b.waiting {
		lost = append(lost, js...)
		delete(b.waiting, k)
	}
	for _, j := range lost {
		b.count--
		b.bytes -= int64(j.size)
	}
	b.cond.Broadcast()
	return lost
}
