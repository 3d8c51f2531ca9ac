package blast

import (
	"fmt"
	"time"

	"github.com/relayload/relayload/internal/pool"
)

// collect merges every recorder into a Result. After it, recorders are
// closed: requests still in flight (abandoned) no longer count.
func (r *runner) collect() *Result {
	res := &Result{
		Schema: SchemaVersion, Target: r.cfg.Target, Client: r.cfg.Client, Rate: r.cfg.Rate,
		Shard: r.cfg.Shard, Shards: r.cfg.Shards, Parts: 1, Warmup: r.cfg.Warmup,
		ByStatus: map[int]int64{}, Errors: map[string]int64{}, ErrorSamples: map[string]string{}, ByKind: map[pool.Kind]int64{}, OKByKind: map[pool.Kind]int64{},
		Latency: NewSketch(), Lag: NewSketch(), Service: NewSketch(),
		PoolEntries: len(r.cfg.Pool.Entries), Encoding: string(r.cfg.Pool.Options.Encoding),
		Seed: r.cfg.Pool.Options.Seed, Duration: r.cfg.Duration, Count: r.cfg.Count, PoolDigest: poolDigest(r.cfg.Pool),
		RunIDs: []string{newRunID()}, ShardsCovered: []int{r.cfg.Shard},
	}
	if res.Encoding == "" {
		res.Encoding = "identity"
	}
	if r.cfg.Rate == 0 {
		res.Concurrency = r.cfg.Concurrency
	}
	for _, e := range r.cfg.Pool.Entries {
		res.PoolBytes += int64(len(e.Body))
	}
	r.recMu.Lock()
	recs := r.recs
	r.recMu.Unlock()
	for _, rec := range recs {
		rec.mu.Lock()
		rec.flushWindow(r)
		rec.closed = true
		res.Sent += rec.sent
		res.OK += rec.ok
		res.Dropped += rec.dropped
		res.WarmupSent += rec.warmSent
		res.WarmupDropped += rec.warmDropped
		res.WarmupOK += rec.warmOK
		for code, n := range rec.status {
			if n > 0 {
				res.ByStatus[code] += n
			}
		}
		for c, n := range rec.errs {
			if n > 0 {
				res.Errors[errorClasses[c]] += n
				if res.ErrorSamples[errorClasses[c]] == "" {
					res.ErrorSamples[errorClasses[c]] = rec.errSample[c]
				}
			}
		}
		for k, n := range rec.kindSent {
			if n > 0 {
				res.ByKind[r.kinds[k]] += n
			}
			if ok := rec.kindOK[k]; ok > 0 {
				res.OKByKind[r.kinds[k]] += ok
			}
		}
		_ = res.Latency.Merge(rec.latency)
		_ = res.Lag.Merge(rec.lag)
		_ = res.Service.Merge(rec.service)
		rec.mu.Unlock()
	}
	// Requests started but not recorded by now never will be: abandoned.
	// They count as sent, so Sent + Dropped == Scheduled.
	res.Abandoned = max(r.started.Load()-res.Sent, 0)
	res.Sent += res.Abandoned
	res.Scheduled = res.Sent + res.Dropped
	r.winMu.Lock()
	for i, w := range r.windows {
		res.Windows = append(res.Windows, Window{Second: i, Sent: w.sent, OK: w.ok, Errors: w.errs, Dropped: w.dropped, Latency: w.latency})
	}
	r.winMu.Unlock()
	return res
}

// flushBefore moves every recorder's local window older than second sec
// into the shared table, so the progress line sees complete seconds.
func (r *runner) flushBefore(sec int) {
	r.recMu.Lock()
	recs := r.recs
	r.recMu.Unlock()
	for _, rec := range recs {
		rec.mu.Lock()
		if rec.winIdx >= 0 && rec.winIdx < sec {
			rec.flushWindow(r)
			rec.winIdx = -1
		}
		rec.mu.Unlock()
	}
}

// startProgress prints one line a second to cfg.Progress until the returned
// function is called.
func (r *runner) startProgress() (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start := time.Now()
		var lastSent int64
		last := start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				sent := r.pSent.Load()
				rate := float64(sent-lastSent) / now.Sub(last).Seconds()
				lastSent, last = sent, now
				sec := int(r.clock.Now()/time.Second) - 1 // last complete second
				r.flushBefore(sec + 1)
				var p99 time.Duration
				r.winMu.Lock()
				if sec >= 0 && sec < len(r.windows) && r.windows[sec].latency != nil {
					p99 = r.windows[sec].latency.Quantile(0.99)
				}
				r.winMu.Unlock()
				fmt.Fprintf(r.cfg.Progress, "%5.0fs  rate %8.1f/s  sent %9d  errors %6d  dropped %6d  in-flight %5d  p99 %s\n",
					now.Sub(start).Seconds(), rate, sent, r.pErr.Load(), r.pDrop.Load(), r.inflight.Load(), fmtDur(p99))
			}
		}
	}()
	return func() { close(done); <-finished }
}
