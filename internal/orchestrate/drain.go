package orchestrate

import (
	"context"
	"time"

	"github.com/relayload/relayload/upstream"
)

// drain waits until the upstream's forwarded envelopes and outcomes have
// not moved for a settle period (and, for the harness, every accepted
// envelope arrived), at most DrainTimeout. LastForward is when data last
// arrived, from blastEnd.
func (r *runner) drain(ctx context.Context, up *upstream.Server, accepted int64, harness bool, blastEnd time.Time) Drain {
	start := time.Now()
	settle := 1500 * time.Millisecond // aggregator.bucket_interval (1 s) plus margin for outcome buckets
	if harness {
		settle = 200 * time.Millisecond
	}
	if r.cfg.Fault != nil {
		settle = 3 * time.Second // Relay backs off after upstream failures
	}
	if r.cfg.settle > 0 {
		settle = r.cfg.settle
	}
	deadline := time.NewTimer(r.cfg.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastEnv, lastData, lastOut int64 = -1, -1, -1
	lastChange := time.Now()
	var d Drain
	for {
		s := up.Stats()
		var out int64
		for _, n := range s.Outcomes.ByOutcome {
			out += n
		}
		now := time.Now()
		if s.DataEnvelopes != lastData {
			if lastData >= 0 {
				d.LastForward = now.Sub(blastEnd)
			}
			lastData = s.DataEnvelopes
		}
		if s.Envelopes != lastEnv || out != lastOut {
			lastEnv, lastOut, lastChange = s.Envelopes, out, now
		}
		d.Took = now.Sub(start)
		if harness && s.DataEnvelopes >= accepted || now.Sub(lastChange) >= settle {
			d.Settled = true
			return d
		}
		select {
		case <-ctx.Done():
			return d
		case <-deadline.C:
			d.Took = time.Since(start)
			return d
		case <-tick.C:
		}
	}
}
