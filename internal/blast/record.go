package blast

import (
	"sync"
	"time"
)

// recorderStripes is the number of recorders workers share. DDSketches are
// not safe for concurrent use, so each recorder has a mutex; with 16 stripes
// on a few cores the lock is almost never contended, and memory stays fixed
// however many workers an overload spawns (a recorder per worker would
// grow with them). Stripes merge once at the end.
const recorderStripes = 16

// recorder accumulates outcomes of the workers assigned to it (the pacer
// has its own, for drops).
type recorder struct {
	mu     sync.Mutex
	closed bool // collected: later outcomes are abandoned requests

	sent, ok, dropped     int64
	warmSent, warmDropped int64
	warmOK                int64
	status                [600]int64 // index = HTTP status; 0 = out of range
	errs                  [len(errorClasses)]int64
	errSample             [len(errorClasses)]string // first error message of each class
	kindSent, kindOK      []int64

	latency, lag, service *Sketch

	win    window // this recorder's part of second winIdx
	winIdx int
}

// window is one second of the run.
type window struct {
	sent, ok, errs, dropped int64
	latency                 *Sketch
}

func (w *window) merge(o *window) {
	w.sent += o.sent
	w.ok += o.ok
	w.errs += o.errs
	w.dropped += o.dropped
	if w.latency != nil { // nil: a window too old to keep its sketch
		_ = w.latency.Merge(o.latency) // same mapping: cannot fail
	}
}

func (w *window) reset() {
	w.sent, w.ok, w.errs, w.dropped = 0, 0, 0, 0
	w.latency.Clear()
}

func (r *runner) newRecorder() *recorder {
	rec := &recorder{
		kindSent: make([]int64, len(r.kinds)), kindOK: make([]int64, len(r.kinds)),
		latency: NewSketch(), lag: NewSketch(), service: NewSketch(),
		win: window{latency: NewSketch()}, winIdx: -1,
	}
	r.recMu.Lock()
	r.recs = append(r.recs, rec)
	r.recMu.Unlock()
	return rec
}

// record counts one sent request. Latency and service time are recorded for
// requests that got a response (any status); schedule lag for every request.
func (rec *recorder) record(r *runner, j job, kind uint8, sentAt, doneAt time.Duration, status int, err error) {
	latency := doneAt - j.intended
	ok := err == nil && status >= 200 && status < 300
	r.pSent.Add(1)
	if c := r.cfg.Sent; c != nil {
		c.Add(1)
	}
	if err != nil {
		r.pErr.Add(1)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.closed {
		return
	}
	if j.warm {
		rec.warmSent++
		if ok {
			rec.warmOK++
		}
	} else {
		rec.sent++
		rec.kindSent[kind]++
		rec.lag.Add(sentAt - j.intended)
		if err != nil {
			c := classify(err)
			rec.errs[c]++
			if rec.errSample[c] == "" {
				rec.errSample[c] = err.Error()
			}
		} else {
			if status < 100 || status >= len(rec.status) {
				status = 0
			}
			rec.status[status]++
			rec.latency.Add(latency)
			rec.service.Add(doneAt - sentAt)
			if ok {
				rec.ok++
				rec.kindOK[kind]++
			}
		}
	}
	w := window{sent: 1}
	switch {
	case err != nil:
		w.errs = 1
	case ok:
		w.ok = 1
	}
	rec.addWindow(r, int(sentAt/time.Second), &w, latency, err == nil)
}

// drop counts a slot that could not start (pacer goroutine).
func (rec *recorder) drop(r *runner, j job) {
	r.pDrop.Add(1)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if j.warm {
		rec.warmDropped++
	} else {
		rec.dropped++
	}
	rec.addWindow(r, int(j.intended/time.Second), &window{dropped: 1}, 0, false)
}

// addWindow adds one outcome to second idx. The current second stays local;
// a later second flushes it to the shared table; a late outcome for an
// earlier second goes straight to the shared table.
func (rec *recorder) addWindow(r *runner, idx int, w *window, latency time.Duration, hasLatency bool) {
	if idx != rec.winIdx {
		if idx < rec.winIdx {
			r.winMu.Lock()
			sw := r.windowAt(idx)
			sw.sent += w.sent
			sw.ok += w.ok
			sw.errs += w.errs
			sw.dropped += w.dropped
			if hasLatency && sw.latency != nil {
				sw.latency.Add(latency)
			}
			r.winMu.Unlock()
			return
		}
		rec.flushWindow(r)
		rec.winIdx = idx
	}
	rec.win.sent += w.sent
	rec.win.ok += w.ok
	rec.win.errs += w.errs
	rec.win.dropped += w.dropped
	if hasLatency {
		rec.win.latency.Add(latency)
	}
}

// flushWindow moves the local second into the shared table; rec.mu held.
func (rec *recorder) flushWindow(r *runner) {
	if rec.winIdx < 0 {
		return
	}
	r.winMu.Lock()
	r.windowAt(rec.winIdx).merge(&rec.win)
	r.winMu.Unlock()
	rec.win.reset()
}

// DefaultLatencyWindows is how many of the most recent one-second windows
// keep their own latency sketch (about 4.6 KB each): one hour. Older windows
// keep their counts only; the run's latency sketches cover every request.
const DefaultLatencyWindows = 3600

// windowAt returns the shared window of second idx; r.winMu held.
func (r *runner) windowAt(idx int) *window {
	for len(r.windows) <= idx {
		r.windows = append(r.windows, &window{latency: NewSketch()})
	}
	keep := r.latencyWindows
	if keep <= 0 {
		keep = DefaultLatencyWindows
	}
	for ; r.latencyFrom < len(r.windows)-keep; r.latencyFrom++ {
		r.windows[r.latencyFrom].latency = nil
	}
	return r.windows[idx]
}
