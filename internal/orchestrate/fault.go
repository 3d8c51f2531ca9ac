package orchestrate

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/cli/upstreamflag"
	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/upstream"
)

// Fault is an upstream failure injected during the measured window, in
// the syntax fake-upstream's --fault shares (upstreamflag.FaultSpec). Its
// Start is an offset into the measured window; by default a quarter of the
// window, at most 5 s.
type Fault = upstreamflag.FaultSpec

// ParseFault parses a fault spec (Config.Fault); errors are *ConfigError.
func ParseFault(spec string) (*Fault, error) {
	f, err := upstreamflag.ParseFaultSpec(spec)
	if err != nil {
		return nil, configerr.Wrap("Fault", err)
	}
	return f, nil
}

// validateFault places f in a measured window of the given length.
func validateFault(f *Fault, window time.Duration) error {
	if f.Start < 0 {
		f.Start = min(window/4, 5*time.Second)
	}
	if f.Start+f.Duration > window {
		return configerr.Errorf("Fault", "%q starts at %s and lasts %s, past the %s measured window",
			f.Spec, f.Start, f.Duration, window)
	}
	return nil
}

// faultWatch starts and ends a fault, as a layer of the upstream's faults
// of its own, and remembers what the upstream had
// answered at both moments.
type faultWatch struct {
	mu            sync.Mutex
	began, ended  time.Time
	before, after map[string]map[string]int64
	err           error
	remove        func() // takes the fault's layer away
}

func (w *faultWatch) begin(up *upstream.Server, f *Fault) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.before = up.Stats().Requests
	w.remove, w.err = up.AddFaults("fault "+f.Spec, f.Faults())
	w.began = time.Now()
}

func (w *faultWatch) end(up *upstream.Server) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.began.IsZero() || !w.ended.IsZero() {
		return
	}
	if w.remove != nil {
		w.remove() // the fault's layer alone: faults set through /control stay
	}
	w.ended = time.Now()
	w.after = up.Stats().Requests
}

// report describes what Relay did around the fault, from the forwarded
// series (ups), blast's per-second windows and the upstream's answers.
func (w *faultWatch) report(f *Fault, ups []upPoint, res *blast.Result, windowStart time.Time, accepted int64) *FaultSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	fs := &FaultSeen{Spec: f.Spec, Recovered: -1}
	if w.err != nil {
		fs.Summary = "fault not injected: " + w.err.Error()
		return fs
	}
	if w.began.IsZero() {
		fs.Summary = "fault never started (the step ended first)"
		return fs
	}
	fs.Answers = diffRequests(w.before, w.after)
	blastEnd := res.Start.Add(res.Warmup + res.Elapsed)
	at := func(t time.Time) (int64, bool) { // forwarded count at t (last point not after t)
		var v int64
		ok := false
		for _, p := range ups {
			if p.at.After(t) {
				break
			}
			v, ok = p.envelopes, true
		}
		return v, ok
	}
	rate := func(a, b time.Time) float64 {
		va, okA := at(a)
		vb, okB := at(b)
		if !okA || !okB || !b.After(a) {
			return 0
		}
		return float64(vb-va) / b.Sub(a).Seconds()
	}
	fs.RateBefore = rate(windowStart, w.began)
	fs.RateDuring = rate(w.began, w.ended)
	fs.RateAfter = rate(w.ended, blastEnd)
	// Caught up: forwarded reached what blast had had accepted one second
	// earlier (one second of slack for Relay's own pipeline).
	var cum []int64
	var total int64
	for _, win := range res.Windows {
		for len(cum) < win.Second {
			cum = append(cum, total)
		}
		total += win.OK
		cum = append(cum, total)
	}
	for _, p := range ups {
		if p.at.Before(w.ended) {
			continue
		}
		sec := int(p.at.Sub(res.Start)/time.Second) - 1
		want := accepted
		if sec >= 0 && sec < len(cum) {
			want = cum[sec]
		}
		if p.envelopes >= want {
			fs.Recovered = p.at.Sub(w.ended)
			break
		}
	}
	// What clients saw in the seconds the fault covered.
	lo, hi := int(w.began.Sub(res.Start)/time.Second), int(w.ended.Sub(res.Start)/time.Second)
	sk := blast.NewSketch()
	for _, win := range res.Windows {
		if win.Second >= lo && win.Second <= hi {
			fs.ClientNon2xx += win.Sent - win.OK
			if win.Latency != nil {
				_ = sk.Merge(win.Latency)
			}
		}
	}
	if sk.Count() > 0 {
		fs.ClientP99 = sk.QuantileMillis(0.99)
	}
	answers := ""
	for _, route := range slices.Sorted(maps.Keys(fs.Answers)) {
		for _, code := range slices.Sorted(maps.Keys(fs.Answers[route])) {
			answers = join(answers, fmt.Sprintf("%s %s×%d", route, code, fs.Answers[route][code]))
		}
	}
	if answers == "" {
		answers = "no requests reached it"
	}
	caught := "had not caught up by the end of the drain"
	if fs.Recovered >= 0 {
		caught = fmt.Sprintf("caught up %.1f s after it ended", fs.Recovered.Seconds())
	}
	fs.Summary = fmt.Sprintf("%s for %s: upstream answered %s; Relay forwarded %.0f/s before, %.0f/s during, %.0f/s after and %s; clients saw %d failed requests and p99 %.1f ms during the fault",
		f.Kind, f.Duration, answers, fs.RateBefore, fs.RateDuring, fs.RateAfter, caught, fs.ClientNon2xx, fs.ClientP99)
	return fs
}

// diffRequests is b − a, per route and status, omitting zeros.
func diffRequests(a, b map[string]map[string]int64) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for route, codes := range b {
		for code, n := range codes {
			if d := n - a[route][code]; d != 0 {
				if out[route] == nil {
					out[route] = map[string]int64{}
				}
				out[route][code] = d
			}
		}
	}
	return out
}
