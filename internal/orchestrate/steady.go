package orchestrate

import (
	"math"
	"sort"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/upstream"
)

// BatchInterval is the longest batching in Relay's path with the generated
// config (aggregator.bucket_interval: 1 s): a backlog may grow by this much
// of the accepted rate over the second half of a window without meaning
// that forwarding fell behind.
const BatchInterval = time.Second

// secondsSeries is a step second by second from blast's start (second 0)
// for n seconds: sent and accepted from blast's windows, forwarded from
// the upstream's arrival timeline (data envelopes), Relay's RSS and cores
// from the samples. samplesAt is blast's start on the samples' clock.
// share is the share of accepted envelopes Relay is expected to forward
// (runner.expectedToForward; 1 for a generated pool): the backlog counts
// only those, since an envelope Relay never forwards is not waiting.
func secondsSeries(n int, windows []blast.Window, blastStart time.Time, tl upstream.Timeline, smp []relayproc.Sample, samplesAt time.Duration, share float64) []SecondPoint {
	if n < len(windows) {
		n = len(windows)
	}
	pts := make([]SecondPoint, n)
	for i := range pts {
		pts[i].T = i
	}
	for _, w := range windows {
		if w.Second >= 0 && w.Second < n {
			pts[w.Second].Sent += w.Sent
			pts[w.Second].Accepted += w.OK
		}
	}
	// Timeline second j is blast second j−shift. The upstream is reset
	// right before blast starts, so shift is 0 unless something stalled;
	// arrivals before blast's start fold into its first second.
	shift := int(math.Round(blastStart.Sub(tl.Start).Seconds()))
	for j, v := range tl.Envelopes {
		i := max(j-shift, 0)
		if i < n {
			pts[i].Forwarded += v
		}
	}
	var a, f int64
	for i := range pts {
		a += pts[i].Accepted
		f += pts[i].Forwarded
		pts[i].Backlog = int64(math.Round(float64(a)*share)) - f
	}
	// RSS: the last sample inside each second; cores: between the last
	// samples at or before the second's start and its end.
	at := func(k int) float64 { return (smp[k].At - samplesAt).Seconds() }
	last := func(t float64) int { // the last sample at or before t, −1 if none
		return sort.Search(len(smp), func(k int) bool { return at(k) > t }) - 1
	}
	for i := range pts {
		a, b := last(float64(i)), last(float64(i+1))
		if a < 0 {
			a = 0 // no sample before the first second: from the first one
		}
		if b >= 0 && at(b) >= float64(i) {
			pts[i].RSSMiB = float64(smp[b].RSS) / (1 << 20)
		}
		if a >= 0 && b > a {
			pts[i].Cores = relayproc.Cores(smp[a], smp[b])
		}
	}
	return pts
}

// steadyState judges forwarding against accepting over the measured window,
// seconds [from, to) of pts. loss is the share of accepted envelopes Relay
// never forwarded (known once the drain settled; 0 otherwise); the backlog
// the growth is measured on leaves that share out, so that envelopes Relay
// dropped on purpose are not mistaken for a backlog.
func steadyState(pts []SecondPoint, from, to int, loss float64, smp []relayproc.Sample, samplesAt time.Duration) Steady {
	from = max(from, 0)
	to = min(to, len(pts))
	s := Steady{Loss: loss, Seconds: max(to-from, 0), CatchUp: -1}
	if to-from < 1 {
		return s
	}
	var acc, fwd int64
	for _, p := range pts[from:to] {
		acc += p.Accepted
		fwd += p.Forwarded
	}
	secs := float64(to - from)
	s.AcceptedRate, s.ForwardedRate = float64(acc)/secs, float64(fwd)/secs
	s.BacklogEnd = pts[to-1].Backlog
	s.Allowance = s.AcceptedRate * BatchInterval.Seconds()

	// The backlog's slope over the second half (the whole window when the
	// half has fewer than three points).
	lo := from + (to-from)/2
	if to-lo < 3 {
		lo = from
	}
	var cumA, cumF int64
	for _, p := range pts[:lo] {
		cumA += p.Accepted
		cumF += p.Forwarded
	}
	xs := make([]float64, 0, to-lo)
	ys := make([]float64, 0, to-lo)
	for i := lo; i < to; i++ {
		cumA += pts[i].Accepted
		cumF += pts[i].Forwarded
		xs = append(xs, float64(i))
		ys = append(ys, float64(cumA)*(1-loss)-float64(cumF))
	}
	s.BacklogGrowth, s.GrowthError = fit(xs, ys)
	s.GrowthSpan = float64(len(xs) - 1)

	// RSS over the window, MiB per second.
	xs, ys = xs[:0], ys[:0]
	for _, p := range smp {
		t := (p.At - samplesAt).Seconds()
		if t >= float64(from) && t < float64(to) {
			xs = append(xs, t)
			ys = append(ys, float64(p.RSS)/(1<<20))
		}
	}
	s.RSSSlope, _ = fit(xs, ys)
	return s
}

// SteadyGrowth is the share of the accepted rate a backlog may grow by,
// steadily, before forwarding counts as falling behind however short the
// window: a Relay that forwards slightly less than it accepts (seen with
// transactions alone) never catches up, though over a short
// window its backlog grows by less than one batching interval's worth.
const SteadyGrowth = 0.03

// KeptPace reports whether forwarding kept pace with accepting: over the
// second half of the window the backlog grew by no more than the
// allowance, and it did not grow steadily (a slope above SteadyGrowth of
// the accepted rate and three standard errors above zero). Windows of
// under two whole seconds cannot tell.
func (s Steady) KeptPace() bool {
	if s.Seconds < 2 {
		return true
	}
	if s.BacklogGrowth*s.GrowthSpan > s.Allowance {
		return false
	}
	if s.GrowthSpan < 2 {
		return true // two points: no error to judge steadiness by
	}
	steady := s.BacklogGrowth > 3*s.GrowthError
	return !(steady && s.BacklogGrowth > SteadyGrowth*s.AcceptedRate)
}

// fit is the least-squares slope of ys over xs and its standard error (0,
// 0 for fewer than two points; the error needs three).
func fit(xs, ys []float64) (slope, stderr float64) {
	n := float64(len(xs))
	if len(xs) < 2 {
		return 0, 0
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 {
		return 0, 0
	}
	slope = num / den
	if len(xs) < 3 {
		return slope, 0
	}
	var rss float64
	for i := range xs {
		r := ys[i] - my - slope*(xs[i]-mx)
		rss += r * r
	}
	return slope, math.Sqrt(rss/(n-2)) / math.Sqrt(den)
}
