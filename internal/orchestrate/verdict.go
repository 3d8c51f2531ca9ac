package orchestrate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/blast"
)

// MaxHarnessShare is the harness's share of Relay's CPU (percent) above
// which a step says that the harness took CPU from Relay.
const MaxHarnessShare = 5

// maxStall is the longest pause of the 10 Hz sampler that still counts as
// the harness running normally.
const maxStall = time.Second

// judge sets the step's verdict and reasons.
//
// A step kept up when Relay answered (almost) every request in time and
// forwarding kept pace: the backlog (accepted − forwarded, counting only
// what Relay is expected to forward: runner.expectedToForward) did not grow
// over the second half of the measured window by more than one batching
// interval's worth, and the last envelope arrived within MaxCatchUp of
// blast's end. Relay keeps answering 200 long after it stopped keeping up
// (it buffers in memory), so the answers alone cannot tell.
//
// A step is harness-limited, not judged, when the load asked for was not
// delivered: blast missed its schedule, or orchestrate itself stalled.
func judge(st *Step, cfg Config, harness bool) {
	if st.Failed {
		st.Verdict = VerdictFailed
		return
	}
	who := "Relay"
	if harness {
		who = "the fake upstream"
	}
	var behind, limited []string
	scheduled := st.Sent + st.Dropped
	if st.Dropped > 0 && float64(st.Dropped) > 0.001*float64(scheduled) {
		behind = append(behind, fmt.Sprintf("%d of %d requests could not start: blast's cap on requests in flight was reached, waiting for %s",
			st.Dropped, scheduled, who))
	}
	failures := st.Failures
	if n := st.ByStatus["429"]; n > 0 && len(cfg.Quotas) > 0 {
		// Asked for: the quotas make Relay answer 429 (with outcomes).
		failures -= n
		st.Notes = append(st.Notes, fmt.Sprintf("%d of %d requests answered 429: rate limited by the configured quotas, not counted against Relay", n, st.Sent))
	}
	if st.Sent > 0 && float64(failures) > 0.001*float64(st.Sent) {
		behind = append(behind, failureReason(st, failures, len(cfg.Quotas) > 0))
	}
	if st.Latency.P99 > float64(cfg.MaxP99)/1e6 {
		behind = append(behind, fmt.Sprintf("latency p99 %.0f ms > %s", st.Latency.P99, cfg.MaxP99))
	}
	accepted := st.OK + st.warmOK
	if accepted > 0 && float64(st.Upstream.Gap) > 0.01*float64(accepted) && st.Drain.Settled {
		// (Unsettled, the gap is a backlog still in Relay: paceReason.)
		behind = append(behind, fmt.Sprintf("%d of %d accepted envelopes (%.1f%%) never reached the upstream",
			st.Upstream.Gap, accepted, 100*float64(st.Upstream.Gap)/float64(accepted)))
	}
	if r := paceReason(st, cfg); r != "" {
		behind = append(behind, r)
	}
	if st.StoppedEarly != "" {
		behind = append(behind, st.StoppedEarly)
	}
	if st.Rate > 0 && st.AchievedRate < 0.99*st.Rate && len(behind) == 0 {
		limited = append(limited, fmt.Sprintf("blast sent %.0f/s of %.0f/s", st.AchievedRate, st.Rate))
	}
	if maxLag := float64(blast.MaxLagP99) / 1e6; st.LagP99 > maxLag && len(behind) == 0 {
		// What blast calls INVALID: the load generator fell behind its
		// schedule, so the load asked for was not the load sent. Never a
		// rate kept up with (a bisection's ceiling); measuring the
		// harness, it is the harness falling behind.
		limited = append(limited, fmt.Sprintf("blast's schedule lag p99 %.1f ms > %g ms: the load generator fell behind its schedule", st.LagP99, maxLag))
	}
	if st.Stall > maxStall {
		// The sampler, blast and the fake upstream all stood still: the
		// latencies and timeouts of that step say nothing about Relay.
		reasons := []string{fmt.Sprintf("orchestrate itself got no CPU for %.1f s (machine overloaded or paused)", st.Stall.Seconds())}
		for _, b := range behind {
			reasons = append(reasons, "also: "+b)
		}
		st.Verdict, st.Reasons = VerdictHarnessLimited, reasons
		return
	}
	switch {
	case len(behind) > 0:
		st.Verdict, st.Reasons = VerdictFellBehind, behind
	case len(limited) > 0 && !harness:
		st.Verdict, st.Reasons = VerdictHarnessLimited, limited
	case len(limited) > 0:
		st.Verdict, st.Reasons = VerdictFellBehind, limited
	default:
		st.Verdict = VerdictKeptUp
	}
	if st.Steady.Seconds < 2 && st.Steady.Seconds >= 0 && len(st.Seconds) > 0 {
		st.Notes = append(st.Notes, fmt.Sprintf("the measured window has %d whole second(s): too short to judge the backlog's growth", st.Steady.Seconds))
	}
	if n := sum(st.Upstream.Canaries.Leaks); n > 0 && !harness {
		st.Notes = append(st.Notes, fmt.Sprintf("%d PII canaries that Relay's default scrubbing must remove reached the upstream (%s)",
			n, kvList(st.Upstream.Canaries.Leaks)))
	}
	if st.CPU.HarnessShare > MaxHarnessShare {
		var split string
		if h := st.CPU.HarnessSplit; h != nil {
			split = " (" + h.String() + ")"
		}
		st.Notes = append(st.Notes, fmt.Sprintf("harness CPU (blast, the fake upstream) %.2f cores%s over the window, %.0f%% of Relay's %.2f: on one machine that is CPU Relay could not use",
			st.CPU.HarnessCores, split, st.CPU.HarnessShare, st.CPU.LoadCores))
	}
	if st.Warm.Note != "" && !st.Warm.Complete {
		st.Reasons = append(st.Reasons, st.Warm.Note)
	}
}

// paceReason says, with numbers, why forwarding did not keep pace with
// accepting, or "" when it did.
func paceReason(st *Step, cfg Config) string {
	sd := st.Steady
	grew := !sd.KeptPace()
	var after string
	switch {
	case !st.Drain.Settled:
		after = fmt.Sprintf("still forwarding %s after blast ended", st.Drain.Took.Round(time.Second))
		if st.Upstream.Gap > 0 {
			after += fmt.Sprintf(", %s accepted envelopes not forwarded yet", num0(float64(st.Upstream.Gap)))
		}
	case sd.CatchUp > cfg.MaxCatchUp:
		after = fmt.Sprintf("drained %.1f s after blast (more than %s)", sd.CatchUp.Seconds(), cfg.MaxCatchUp)
	}
	if !grew && after == "" {
		return ""
	}
	parts := []string{fmt.Sprintf("forwarded %s/s of %s/s accepted", num0(sd.ForwardedRate), num0(sd.AcceptedRate))}
	if grew {
		b := fmt.Sprintf("backlog %+.0f/s (±%.0f) over the second half of the window, %s at its end",
			sd.BacklogGrowth, sd.GrowthError, num0(float64(sd.BacklogEnd)))
		if sd.Loss > 0.001 {
			b += fmt.Sprintf(", leaving out the %.1f%% never forwarded", 100*sd.Loss)
		}
		parts = append(parts, b)
	}
	if sd.RSSSlope != 0 {
		parts = append(parts, fmt.Sprintf("RSS %+.1f MiB/s", sd.RSSSlope))
	}
	if after == "" && sd.CatchUp >= 0 {
		after = fmt.Sprintf("drained %.1f s after blast", sd.CatchUp.Seconds())
	}
	if after != "" {
		parts = append(parts, after)
	}
	return strings.Join(parts, "; ")
}

// num0 formats a count with thousands separators and no decimals.
func num0(v float64) string {
	neg := v < 0
	if neg {
		v = -v
	}
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// failureReason says how many requests were not accepted and how. A
// request that timed out at the client may still have been accepted: when
// the upstream received more than blast saw accepted (a negative gap, once
// forwarding settled), up to that many of the timeouts were accepted and
// forwarded later (Relay stalled, then caught up), and the reason says so
// rather than calling them not accepted.
func failureReason(st *Step, failures int64, quota429 bool) string {
	detail := failureDetail(st, quota429)
	var late int64
	if timeouts := st.Errors[blast.ClassTimeout]; timeouts > 0 && st.Drain.Settled && st.Upstream.Gap < 0 {
		late = min(timeouts, -st.Upstream.Gap)
	}
	switch {
	case late == 0:
		return fmt.Sprintf("%d of %d requests not accepted (%s)", failures, st.Sent, detail)
	case late == failures:
		return fmt.Sprintf("%d of %d requests timed out at the client (%s), yet were accepted and forwarded later: the upstream received %d more envelopes than blast saw accepted",
			failures, st.Sent, detail, -st.Upstream.Gap)
	}
	return fmt.Sprintf("%d of %d requests not answered 2xx in time (%s); %d of the timeouts were accepted and forwarded later: the upstream received %d more envelopes than blast saw accepted",
		failures, st.Sent, detail, late, -st.Upstream.Gap)
}

// failureDetail lists the non-2xx answers and transport errors; quota429
// leaves out the 429s the configured quotas asked for.
func failureDetail(st *Step, quota429 bool) string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(st.ByStatus)) {
		if code[0] != '2' && !(quota429 && code == "429") {
			parts = append(parts, fmt.Sprintf("%s×%d", code, st.ByStatus[code]))
		}
	}
	for _, class := range slices.Sorted(maps.Keys(st.Errors)) {
		if n := st.Errors[class]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s×%d", class, n))
		}
	}
	return strings.Join(parts, ", ")
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// kvList renders a count map as "a×1, b×2", sorted by key.
func kvList(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// loadNote is the note for a step during which the 1-minute load average
// (before → after) exceeded the CPU count, or "".
func loadNote(load [2]float64, cpus int) string {
	if load[0] <= float64(cpus) && load[1] <= float64(cpus) {
		return ""
	}
	return fmt.Sprintf("the 1-minute load average was %.1f→%.1f on %d CPUs: more runnable threads than CPUs, so this step's figures are not comparable with a quiet machine's",
		load[0], load[1], cpus)
}
