package standinrelay

import (
	"errors"
	"sync"
)

// maxBuffered bounds the envelopes held (waiting for a config, ready, or
// being processed). Relay answers 503 when its envelope buffer has no
// capacity (relay-server/src/services/buffer/mod.rs, try_push; in memory
// that is a memory bound). The stand-in's bound is a count: above
// standin.capacity, 10,000 mixed envelopes of relayload's pool hold
// ~150 MB.
const maxBuffered = 10_000

// errBufferFull makes ingest answer 503.
var errBufferFull = errors.New("envelope buffer full")

// job is one accepted envelope.
type job struct {
	key  string
	body []byte // decoded envelope, as forwarded
}

// buffer holds accepted envelopes. Those of keys whose project config (or
// the global config) has not arrived wait per key; the others are ready
// for the processing workers.
type buffer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	waiting map[string][]*job
	ready   []*job
	held    int // waiting + ready + being processed
	closed  bool
}

func newBuffer() *buffer {
	b := &buffer{waiting: map[string][]*job{}}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// push adds j. isReady is evaluated under the buffer's lock, so that a
// release for the same key cannot slip in between.
func (b *buffer) push(j *job, isReady func(key string) bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.held >= maxBuffered {
		return errBufferFull
	}
	b.held++
	if isReady(j.key) {
		b.ready = append(b.ready, j)
		b.cond.Signal()
	} else {
		b.waiting[j.key] = append(b.waiting[j.key], j)
	}
	return nil
}

// release makes key's waiting envelopes ready.
func (b *buffer) release(key string) {
	b.releaseWhere(func(k string) bool { return k == key })
}

// releaseWhere makes the waiting envelopes of every key ok accepts ready.
func (b *buffer) releaseWhere(ok func(key string) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, js := range b.waiting {
		if ok(k) {
			b.ready = append(b.ready, js...)
			delete(b.waiting, k)
		}
	}
	b.cond.Broadcast()
}

// drop discards key's waiting envelopes and returns how many there were.
func (b *buffer) drop(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.waiting[key])
	delete(b.waiting, key)
	b.held -= n
	return n
}

// pop blocks for a ready envelope; ok is false once the buffer is closed.
func (b *buffer) pop() (j *job, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.ready) == 0 && !b.closed {
		b.cond.Wait()
	}
	if b.closed {
		return nil, false
	}
	j, b.ready[0] = b.ready[0], nil
	b.ready = b.ready[1:]
	return j, true
}

// done marks a popped envelope as handled.
func (b *buffer) done() {
	b.mu.Lock()
	b.held--
	b.mu.Unlock()
}

// len is the number of envelopes held.
func (b *buffer) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// close wakes the workers, which then stop; what is held is dropped.
func (b *buffer) close() {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
}
