package orchestrate

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/profile"
	"github.com/relayload/relayload/internal/replay"
)

// collect turns what the phases recorded into the step's figures: what
// reached the upstream, the per-second series and the steady state, the
// true cost per envelope, the 10 Hz series and the fault's effect.
func (s *step) collect() {
	st := s.st
	final := s.up.Stats()
	accepted, note := s.r.expectedToForward(s.res, st.OK, st.warmOK, final.ItemsByType)
	if note != "" {
		st.Notes = append(st.Notes, note)
	}
	st.Upstream = UpstreamSeen{
		Envelopes: final.Envelopes, Forwarded: final.DataEnvelopes, ItemsByType: final.ItemsByType,
		Gap: accepted - final.DataEnvelopes, Outcomes: final.Outcomes.Rows, Requests: final.Requests,
		Errors: final.Errors, Canaries: final.Canaries, Signatures: final.Signatures,
	}
	smp, _ := s.sampler.Samples()
	samplesAt := s.blastStart.Sub(s.sampler.Start())
	end := int(s.atDrainEnd.At-samplesAt+time.Second-1) / int(time.Second)
	// The share of accepted envelopes Relay is expected to forward as data:
	// the backlog of every second (and so of the table, the charts and
	// results.json) counts only those.
	share := 1.0
	if all := st.OK + st.warmOK; all > 0 {
		share = min(float64(accepted)/float64(all), 1)
	}
	st.Seconds = secondsSeries(end, s.res.Windows, s.res.Start, final.Timeline, smp, samplesAt, share)
	// The share of accepted envelopes that will never be forwarded as data:
	// those Relay is not expected to forward at all and, once the drain
	// settled, those lost (the gap); the steady state judges the pace of the rest.
	loss := 1 - share
	if all := st.OK + st.warmOK; st.Drain.Settled && all > 0 {
		loss += float64(max(st.Upstream.Gap, 0)) / float64(all)
	}
	from, to := windowSeconds(s.res)
	if to-from < 2 && st.StoppedEarly != "" {
		// Stopped before the measured window had two whole seconds (a
		// Relay that buffers everything passes the RSS bound fast): judge
		// what was sent, warm-up included.
		from, to = 0, int((s.res.Warmup+s.res.Elapsed)/time.Second)
		st.Notes = append(st.Notes, fmt.Sprintf("blast stopped %.1f s after it started, before the measured window had two whole seconds: the steady-state figures cover seconds 0–%d, blast's warm-up included",
			(s.res.Warmup+s.res.Elapsed).Seconds(), to))
	}
	st.Steady = steadyState(st.Seconds, from, to, loss, smp, samplesAt)
	st.Steady.Expected = share
	if st.StoppedEarly != "" && st.Steady.Seconds > 0 {
		st.AcceptedRate = st.Steady.AcceptedRate
		var sent int64
		for _, p := range st.Seconds[from:to] {
			sent += p.Sent
		}
		st.AchievedRate = float64(sent) / float64(to-from)
	}
	if st.Drain.Settled {
		st.Steady.CatchUp = st.Drain.LastForward
	}
	st.CPU.MsPerEnv, st.CPU.CostSpan, st.CPU.CostCPUSecs, st.CPU.CostEnvelopes = trueCost(s.atBlast, s.atDrainEnd, st.CPU.IdleCores, final.DataEnvelopes)
	if n := costBelowIdle(st.CPU); n != "" {
		st.Notes = append(st.Notes, n)
	}
	st.Series, st.CPU.PeakCores = series(smp, samplesAt)
	for i := 1; i < len(smp); i++ {
		st.Stall = max(st.Stall, smp[i].At-smp[i-1].At)
	}
	if st.Perf != nil && st.Perf.Exit == "ok" && s.r.perf != nil && s.parent.Err() == nil {
		s.r.logf("  reading the perf recording back")
		s.r.perf.analyze(s.parent, st.Perf, fmt.Sprintf("%s at %s (step %d)", s.build.Name, rateLabel(st.Rate), st.Index), profile.DefaultGroups())
	}
	if hp := st.HarnessPerf; hp != nil && hp.Exit == "ok" && s.parent.Err() == nil {
		s.r.logf("  reading the harness's perf recording back")
		s.r.perf.analyze(s.parent, hp, fmt.Sprintf("the harness at %s (step %d)", rateLabel(st.Rate), st.Index), harnessGroups())
		if hp.Profile != nil {
			if n := tooFewHarnessSamples(hp.Profile, st.CPU.HarnessCores, s.cfg.Duration.Seconds(), hp.Event); n != "" {
				st.Notes = append(st.Notes, n)
			} else {
				st.CPU.HarnessSplit = splitHarness(hp.Profile, st.CPU.HarnessCores)
			}
		}
	}
	if s.cfg.Fault != nil {
		st.Fault = s.faults.report(s.cfg.Fault, s.watch.forwarded(), s.res, s.res.Start.Add(s.res.Warmup), accepted)
	}
}

// windowSeconds is the measured window in whole seconds since blast's
// start: from the first second after the warm-up to the last whole second.
func windowSeconds(res *blast.Result) (from, to int) {
	from = int((res.Warmup + time.Second - 1) / time.Second)
	to = int((res.Warmup + res.Elapsed) / time.Second)
	return from, max(to, from)
}

// NoteCostBelowIdle begins the note a step carries when Relay used no more
// CPU under load than at idle.
const NoteCostBelowIdle = "Relay used no more CPU under load than at idle"

// costBelowIdle is the note for a step whose load CPU over the cost span
// was no more than its idle reading ("" otherwise): idle CPU is read over a
// short window in 10 ms ticks, and at a low rate Relay's load falls within
// that error, which makes the cost per envelope zero or negative.
func costBelowIdle(c CPU) string {
	if c.CostEnvelopes == 0 || c.CostSpan <= 0 || c.CostCPUSecs > 0 {
		return ""
	}
	secs := c.CostSpan.Seconds()
	return fmt.Sprintf(NoteCostBelowIdle+" (%.3f cores over %.1f s, idle %.3f): the cost per envelope (%.2f ms) is within the idle reading's error; lengthen --duration or --idle",
		c.CostCPUSecs/secs+c.IdleCores, secs, c.IdleCores, c.MsPerEnv)
}

// trueCost is CPU per forwarded envelope from blast's start (a) until
// forwarding settled (b), with idle CPU subtracted.
func trueCost(a, b relayproc.Sample, idleCores float64, forwarded int64) (ms float64, span time.Duration, cpu float64, n int64) {
	span = b.At - a.At
	if span <= 0 || b.CPU == 0 {
		return 0, 0, 0, forwarded
	}
	cpu = b.CPU - a.CPU - idleCores*span.Seconds()
	if forwarded > 0 {
		ms = cpu * 1000 / float64(forwarded)
	}
	return ms, span, cpu, forwarded
}

// kindShares is each kind's share of p's entries.
func kindShares(p *pool.Pool) map[pool.Kind]float64 {
	share := map[pool.Kind]float64{}
	for _, e := range p.Entries {
		share[e.Kind] += 1 / float64(len(p.Entries))
	}
	return share
}

// acceptedOf is how many envelopes of kind k were accepted: counted by kind
// over the measured window, by k's share of the pool over the warm-up.
func (r *runner) acceptedOf(res *blast.Result, warmOK int64, k pool.Kind) int64 {
	return res.OKByKind[k] + int64(math.Round(float64(warmOK)*r.kindShare[k]))
}

// neverForwarded is how many accepted envelopes of a replayed pool are of
// kinds of which no item reached the upstream at all, with a note naming
// them: Relay drops that item type (trace_metric, with no outcome), which
// is not falling behind (TestNeverForwarded).
func (r *runner) neverForwarded(res *blast.Result, warmOK int64, items map[string]int64) (int64, string) {
	if r.kindShare == nil || res == nil {
		return 0, ""
	}
	var total int64
	var names []string
	for _, k := range slices.Sorted(maps.Keys(res.OKByKind)) {
		if !replay.CarriesData(k) || items[string(k)] > 0 || slices.Contains(pool.Kinds(), k) {
			continue
		}
		n := r.acceptedOf(res, warmOK, k)
		total += n
		names = append(names, fmt.Sprintf("%d %s", n, k))
	}
	if total == 0 {
		return 0, ""
	}
	return total, fmt.Sprintf("Relay forwarded no item of %s envelopes it accepted (of kinds it drops): left out of forwarded and of the gap",
		strings.Join(names, ", "))
}

// expectedToForward is the one definition of what Relay is expected to
// forward: of the accepted envelopes (ok measured, warmOK in blast's
// warm-up), those that carry data (dataAccepted) less those of kinds of
// which no item reached the upstream (neverForwarded), with the note that
// names the latter. The gap, the backlog of every second and the judge's
// loss all come from it, so that what Relay does not forward is never a
// backlog in one place and not in another.
func (r *runner) expectedToForward(res *blast.Result, ok, warmOK int64, items map[string]int64) (int64, string) {
	n := r.dataAccepted(res, ok, warmOK)
	never, note := r.neverForwarded(res, warmOK, items)
	return max(n-never, 0), note
}

// dataAccepted is how many of the accepted envelopes (ok measured, warmOK
// in blast's warm-up) carry data, which is what the upstream counts as
// forwarded: all of them for a generated pool, but a replayed one may hold
// envelopes of client reports or metrics alone, which Relay turns into
// outcomes and metrics.
func (r *runner) dataAccepted(res *blast.Result, ok, warmOK int64) int64 {
	if r.kindShare == nil || res == nil {
		return ok + warmOK
	}
	var none int64
	for k := range r.kindShare {
		if !replay.CarriesData(k) {
			none += r.acceptedOf(res, warmOK, k)
		}
	}
	return max(ok+warmOK-none, 0)
}
