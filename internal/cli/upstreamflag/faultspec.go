package upstreamflag

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/upstream"
)

// FaultSpec is a fault for a while, in the one syntax that orchestrate's
// and fake-upstream's --fault share (ParseFaultSpec):
//
//	outage=10s[:refuse|hang|unavailable]  every Relay-facing route fails (default unavailable: 503)
//	429-storm[=10s]                        every forwarded envelope answered 429 (Retry-After 1 s)
//	errors=10s[:STATUS[:P]]                a share P (default 1) of envelopes answered STATUS (default 500)
//	latency=10s:DELAY                      every Relay-facing answer delayed by DELAY
//
// optionally followed by @START: when it begins (orchestrate: into the
// measured window; fake-upstream: after it starts listening).
type FaultSpec struct {
	Spec     string        `json:"spec"`
	Kind     string        `json:"kind"` // outage, 429-storm, errors, latency
	Duration time.Duration `json:"duration_ns"`
	Start    time.Duration `json:"start_ns"` // <0: not given
	Mode     string        `json:"mode,omitempty"`
	Status   int           `json:"status,omitempty"`
	Share    float64       `json:"share,omitempty"`
	Delay    time.Duration `json:"delay_ns,omitempty"`
}

// ParseFaultSpec parses a fault spec (see FaultSpec).
func ParseFaultSpec(spec string) (*FaultSpec, error) {
	bad := func(format string, a ...any) (*FaultSpec, error) {
		return nil, fmt.Errorf("%q: "+format, append([]any{spec}, a...)...)
	}
	f := &FaultSpec{Spec: spec, Start: -1}
	body, at, hasAt := strings.Cut(spec, "@")
	if hasAt {
		d, err := time.ParseDuration(at)
		if err != nil || d < 0 {
			return bad("start %q is not a duration", at)
		}
		f.Start = d
	}
	kind, args, _ := strings.Cut(body, "=")
	f.Kind = kind
	parts := strings.Split(args, ":")
	dur := func(def time.Duration) error {
		if parts[0] == "" {
			if def == 0 {
				return fmt.Errorf("needs a duration, e.g. %s=10s", kind)
			}
			f.Duration = def
			return nil
		}
		d, err := time.ParseDuration(parts[0])
		if err != nil || d <= 0 {
			return fmt.Errorf("duration %q", parts[0])
		}
		f.Duration = d
		return nil
	}
	switch kind {
	case "outage":
		if err := dur(0); err != nil {
			return bad("%v", err)
		}
		f.Mode = upstream.OutageUnavailable
		if len(parts) > 1 {
			f.Mode = parts[1]
		}
		switch f.Mode {
		case upstream.OutageRefuse, upstream.OutageHang, upstream.OutageUnavailable:
		default:
			return bad("outage mode %q: want refuse, hang or unavailable", f.Mode)
		}
		if len(parts) > 2 {
			return bad("too many fields")
		}
	case "429-storm":
		if err := dur(10 * time.Second); err != nil {
			return bad("%v", err)
		}
		f.Status, f.Share = 429, 1
		if len(parts) > 1 {
			return bad("too many fields")
		}
	case "errors":
		if err := dur(0); err != nil {
			return bad("%v", err)
		}
		f.Status, f.Share = 500, 1
		if len(parts) > 1 {
			s, err := strconv.Atoi(parts[1])
			if err != nil || s < 400 || s > 599 {
				return bad("status %q: want 400..599", parts[1])
			}
			f.Status = s
		}
		if len(parts) > 2 {
			p, err := strconv.ParseFloat(parts[2], 64)
			if err != nil || !(p > 0 && p <= 1) {
				return bad("share %q: want (0,1]", parts[2])
			}
			f.Share = p
		}
		if len(parts) > 3 {
			return bad("too many fields")
		}
	case "latency":
		if err := dur(0); err != nil {
			return bad("%v", err)
		}
		if len(parts) != 2 {
			return bad("want latency=DURATION:DELAY")
		}
		d, err := time.ParseDuration(parts[1])
		if err != nil || d <= 0 {
			return bad("delay %q", parts[1])
		}
		f.Delay = d
	default:
		return bad("unknown kind %q (want outage, 429-storm, errors or latency)", kind)
	}
	if f.Duration > maxFaultDuration {
		return bad("lasts %s, more than %s", f.Duration, maxFaultDuration)
	}
	faults := f.Faults()
	if err := faults.Validate(); err != nil {
		return bad("%v", err)
	}
	return f, nil
}

// Faults are the faults the spec injects while it lasts.
func (f *FaultSpec) Faults() upstream.Faults {
	switch f.Kind {
	case "outage":
		return upstream.Faults{Outage: &upstream.Outage{Mode: f.Mode, Duration: upstream.Duration(f.Duration)}}
	case "429-storm":
		return upstream.Faults{Inject: []upstream.Injection{{Route: "envelope", Status: 429, Probability: 1, RetryAfter: 1}}}
	case "errors":
		return upstream.Faults{Inject: []upstream.Injection{{Route: "envelope", Status: f.Status, Probability: f.Share}}}
	case "latency":
		return upstream.Faults{Latency: map[string]upstream.Latency{"*": {Fixed: upstream.Duration(f.Delay)}}}
	}
	return upstream.Faults{}
}

// maxFaultDuration bounds how long a fault spec lasts (an outage's own bound).
const maxFaultDuration = time.Hour
