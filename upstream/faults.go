package upstream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/configerr"
)

// Duration is a time.Duration that reads and writes JSON as "1.5s" (a
// number is taken as seconds).
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts "250ms" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("duration: want \"250ms\" or seconds, got %s", b)
	}
	// Outside ±2^63 ns the conversion to an integer is undefined.
	if math.Abs(f) >= float64(math.MaxInt64)/float64(time.Second) {
		return fmt.Errorf("duration: %s seconds is out of range", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// Faults are the failures the fake injects into Relay-facing routes (never
// into /stats, /projects or /control). They come in layers, each with its
// own clock: Config.Faults, the control layer (SetFaults, POST /control)
// and those AddFaults adds; Server.Faults combines them. docs/faults.md
// says what Relay does with each.
type Faults struct {
	// Latency per route name ("envelope", "projectconfigs", … or "*" for
	// every Relay-facing route; a route's own entry wins).
	Latency map[string]Latency `json:"latency,omitempty"`
	// Inject answers a share of requests with an error status or a reset.
	Inject []Injection `json:"inject,omitempty"`
	// Outage makes every Relay-facing route fail for a while.
	Outage *Outage `json:"outage,omitempty"`
	// GlobalPending answers global config requests with globalStatus "pending".
	GlobalPending bool `json:"global_pending,omitempty"`
	// RelayStop answers every request that carries X-Sentry-Relay-Id (and
	// every registration) with 403 {"relay":"stop"}.
	RelayStop bool `json:"relay_stop,omitempty"`
}

// Latency is an added delay: Fixed plus, if Max > Min, a uniform draw from
// [Min, Max), plus, if Mean > 0, an exponential draw with that mean.
type Latency struct {
	Fixed Duration `json:"fixed,omitempty"`
	Min   Duration `json:"min,omitempty"`
	Max   Duration `json:"max,omitempty"`
	Mean  Duration `json:"mean,omitempty"`
}

// Injection answers Probability of a route's requests with Status, or
// resets the connection when Reset is set.
type Injection struct {
	Route       string  `json:"route"` // route name or "*"
	Status      int     `json:"status,omitempty"`
	Reset       bool    `json:"reset,omitempty"`
	Probability float64 `json:"probability"`
	// RetryAfter (seconds, default 60) and RateLimits (X-Sentry-Rate-Limits,
	// default "<retry_after>::organization:generic") for a 429.
	RetryAfter int    `json:"retry_after,omitempty"`
	RateLimits string `json:"rate_limits,omitempty"`
}

// Outage modes.
const (
	OutageRefuse      = "refuse"      // close the connection without an answer (a network error for Relay)
	OutageHang        = "hang"        // hold the request until the outage ends or the client gives up
	OutageUnavailable = "unavailable" // answer 503 (a network error for Relay)
)

// Outage fails every Relay-facing route for Duration from when it was set.
type Outage struct {
	Mode     string   `json:"mode"`
	Duration Duration `json:"duration"`
	// Until is when the outage ends (set when its layer is set; read-only).
	Until time.Time `json:"until,omitzero"`
}

// Bounds on what faults may ask, so that a typo or a hostile client cannot
// wedge the server or make it hold requests for hours.
const (
	maxLatency       = 5 * time.Minute // each latency term, and their sum
	maxOutage        = time.Hour
	maxRetryAfter    = 3600 // seconds, in retry_after and rate_limits
	maxRateLimitsLen = 1024
	// MaxInjections bounds the inject list (each request walks it).
	MaxInjections = 64
	// MaxControlBytes bounds a /control body after decoding (413 above).
	MaxControlBytes = 64 << 10
)

// Fault layers: each source of faults is a layer with its own clock, so
// that setting or ending one never changes another (an outage keeps the end
// it was given when its layer was set).
const (
	layerConfig  = "config"  // Config.Faults, from the start
	layerControl = "control" // SetFaults and POST /control
)

// faultLayer is one source's faults; an outage's Until is set.
type faultLayer struct {
	name string
	id   uint64 // AddFaults's layers: what their remove function removes
	f    Faults
}

// faultState is what requests read: the layers and their combination,
// rebuilt whenever a layer changes.
type faultState struct {
	layers  []faultLayer // bottom first: config, control, then AddFaults's in order
	f       Faults       // the layers combined with With, without outages
	outages []Outage     // every layer's outage, top layer first
	active  bool         // anything to do per request besides GlobalPending
}

// newFaultState combines layers, bottom first: a higher layer's latency
// wins for its routes, its injections come first, its outage wins while it
// lasts, and the flags are or-ed.
func newFaultState(layers []faultLayer) *faultState {
	st := &faultState{layers: layers}
	for _, l := range layers {
		g := l.f
		if g.Outage != nil {
			st.outages = append([]Outage{*g.Outage}, st.outages...)
		}
		g.Outage = nil
		st.f = st.f.With(g)
	}
	st.active = len(st.f.Latency) > 0 || len(st.f.Inject) > 0 || len(st.outages) > 0 || st.f.RelayStop
	return st
}

// outage returns the outage in effect at now (the top layer's), or nil.
func (st *faultState) outage(now time.Time) *Outage {
	for i := range st.outages {
		if now.Before(st.outages[i].Until) {
			return &st.outages[i]
		}
	}
	return nil
}

// RouteNames lists the route names faults and /stats use.
func RouteNames() []string { return append([]string(nil), routeNames[:]...) }

func routeIndex(name string) int { return slices.Index(routeNames[:], name) }

// Validate checks f.
func (f *Faults) Validate() error {
	for name, l := range f.Latency {
		switch {
		case name != "*" && routeIndex(name) < 0:
			return fmt.Errorf("latency: unknown route %q (want one of %s or *)", name, strings.Join(routeNames[:], ", "))
		case l.Fixed < 0 || l.Min < 0 || l.Max < 0 || l.Mean < 0 || l.Max > 0 && l.Max < l.Min:
			return fmt.Errorf("latency %s: durations must be ≥ 0 and max ≥ min", name)
		// Bounding each term first keeps the sum from overflowing.
		case time.Duration(l.Fixed) > maxLatency || time.Duration(l.Min) > maxLatency || time.Duration(l.Max) > maxLatency ||
			time.Duration(l.Mean) > maxLatency || time.Duration(l.Fixed+max(l.Min, l.Max)) > maxLatency:
			return fmt.Errorf("latency %s: fixed, min, max, mean and fixed + max(min, max) must each be at most %s", name, maxLatency)
		}
	}
	if len(f.Inject) > MaxInjections {
		return fmt.Errorf("inject: %d injections, at most %d", len(f.Inject), MaxInjections)
	}
	for i, in := range f.Inject {
		var err error
		switch {
		case in.Route != "*" && routeIndex(in.Route) < 0:
			err = fmt.Errorf("unknown route %q", in.Route)
		case !(in.Probability >= 0 && in.Probability <= 1):
			err = fmt.Errorf("probability %v not in [0,1]", in.Probability)
		case in.Reset == (in.Status != 0):
			err = errors.New("set exactly one of status and reset")
		case in.Status != 0 && (in.Status < 400 || in.Status > 599):
			err = fmt.Errorf("status %d is not an error status (400..599)", in.Status)
		case in.RetryAfter < 0 || in.RetryAfter > maxRetryAfter:
			err = fmt.Errorf("retry_after %d not in [0, %d] seconds", in.RetryAfter, maxRetryAfter)
		case in.RateLimits != "":
			if err = checkRateLimits(in.RateLimits); err != nil {
				err = fmt.Errorf("rate_limits: %w", err)
			}
		}
		if err != nil {
			return fmt.Errorf("inject %d: %w", i, err)
		}
	}
	switch o := f.Outage; {
	case o == nil:
	case o.Mode != OutageRefuse && o.Mode != OutageHang && o.Mode != OutageUnavailable:
		return fmt.Errorf("outage: mode %q, want refuse, hang or unavailable", o.Mode)
	case o.Duration <= 0 || time.Duration(o.Duration) > maxOutage:
		return fmt.Errorf("outage: duration %s not in (0, %s]", time.Duration(o.Duration), maxOutage)
	}
	return nil
}

// SetFaults replaces the faults of the control layer, the one POST
// /control sets; Config.Faults and the layers AddFaults adds stay as they
// are. An outage among f starts now.
func (s *Server) SetFaults(f Faults) error {
	return s.setLayer(faultLayer{name: layerControl, f: f})
}

// AddFaults adds f as a layer of its own, named name in GET /control, on
// top of the faults in effect, until remove is called: removing it takes
// away f alone, whatever was set meanwhile. An outage among f starts now
// and keeps its own end.
func (s *Server) AddFaults(name string, f Faults) (remove func(), err error) {
	s.faultsMu.Lock()
	s.layerID++
	id := s.layerID
	s.faultsMu.Unlock()
	if err := s.setLayer(faultLayer{name: name, id: id, f: f}); err != nil {
		return nil, err
	}
	return func() {
		s.faultsMu.Lock()
		defer s.faultsMu.Unlock()
		layers := slices.DeleteFunc(slices.Clone(s.faults.Load().layers), func(l faultLayer) bool { return l.id == id })
		s.faults.Store(newFaultState(layers))
	}, nil
}

// setLayer checks l's faults, starts its outage's clock and replaces the
// layer of the same name and id (the config and control layers keep their
// place at the bottom), or adds it on top.
func (s *Server) setLayer(l faultLayer) error {
	if err := l.f.Validate(); err != nil {
		return configerr.Wrap("Faults", err)
	}
	l.f = l.f.clone()
	if l.f.Outage != nil {
		l.f.Outage.Until = s.cfg.Now().Add(time.Duration(l.f.Outage.Duration))
	}
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	var layers []faultLayer
	if st := s.faults.Load(); st != nil {
		layers = slices.Clone(st.layers)
	}
	rank := func(l faultLayer) int {
		switch {
		case l.id != 0:
			return 2
		case l.name == layerControl:
			return 1
		}
		return 0
	}
	i := slices.IndexFunc(layers, func(m faultLayer) bool { return m.name == l.name && m.id == l.id })
	if i >= 0 {
		layers[i] = l
	} else {
		// Before the first layer of a higher rank.
		i = slices.IndexFunc(layers, func(m faultLayer) bool { return rank(m) > rank(l) })
		if i < 0 {
			i = len(layers)
		}
		layers = slices.Insert(layers, i, l)
	}
	s.faults.Store(newFaultState(layers))
	return nil
}

// Faults returns the faults in effect, every layer's combined (see
// AddFaults): a higher layer's latency wins for its routes, its injections
// come first, the flags are or-ed, and the outage is the top layer's of
// those that have not ended.
func (s *Server) Faults() Faults {
	st := s.faults.Load()
	f := st.f.clone()
	if o := st.outage(s.cfg.Now()); o != nil {
		f.Outage = &Outage{Mode: o.Mode, Duration: o.Duration, Until: o.Until}
	}
	return f
}

// faultLayerView is a layer in GET /control's "layers".
type faultLayerView struct {
	Layer string `json:"layer"`
	Faults
}

// controlAnswer is GET /control's answer: the faults in effect and, in
// "layers", each layer that still does something, bottom first.
type controlAnswer struct {
	Faults
	Layers []faultLayerView `json:"layers,omitempty"`
}

func (s *Server) controlAnswer() controlAnswer {
	st, now := s.faults.Load(), s.cfg.Now()
	a := controlAnswer{Faults: s.Faults()}
	for _, l := range st.layers {
		f := l.f.clone()
		if f.Outage != nil && !now.Before(f.Outage.Until) {
			f.Outage = nil
		}
		if len(f.Latency) > 0 || len(f.Inject) > 0 || f.Outage != nil || f.GlobalPending || f.RelayStop {
			a.Layers = append(a.Layers, faultLayerView{Layer: l.name, Faults: f})
		}
	}
	return a
}

// clone deep-copies f, so callers never share maps or slices with the
// state requests read.
func (f Faults) clone() Faults {
	f.Latency = maps.Clone(f.Latency)
	f.Inject = append([]Injection(nil), f.Inject...)
	if f.Outage != nil {
		o := *f.Outage
		f.Outage = &o
	}
	return f
}

// random draws from the seeded fault randomness, uniform in [0, 1) or, with
// exp, exponential with mean 1.
func (s *Server) random(exp bool) float64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	if exp {
		return s.rng.ExpFloat64()
	}
	return s.rng.Float64()
}

func (s *Server) latency(l Latency) time.Duration {
	d := time.Duration(l.Fixed + l.Min)
	if l.Max > l.Min {
		d += time.Duration(s.random(false) * float64(l.Max-l.Min))
	}
	if l.Mean > 0 {
		d += min(time.Duration(s.random(true)*float64(l.Mean)), maxLatency)
	}
	return min(d, maxLatency)
}

// applyFaults injects the configured failures. It returns true when it has
// answered the request (or dropped the connection).
func (s *Server) applyFaults(w http.ResponseWriter, req *http.Request, r int, c *counters) bool {
	st := s.faults.Load()
	if !st.active {
		return false
	}
	f := &st.f
	if len(st.outages) > 0 {
		now := s.cfg.Now()
		if o := st.outage(now); o != nil {
			c.faultsInjected.Add("outage_" + o.Mode)
			switch o.Mode {
			case OutageRefuse:
				resetConnection(w)
			case OutageHang:
				s.sleep(req, o.Until.Sub(now))
				resetConnection(w)
			default:
				writeJSON(w, http.StatusServiceUnavailable, newError(http.StatusServiceUnavailable, "fault_outage", "upstream outage (injected)").body)
			}
			return true
		}
	}
	if f.RelayStop && (r == routeChallenge || r == routeResponse || req.Header.Get("X-Sentry-Relay-Id") != "") {
		c.faultsInjected.Add("relay_stop")
		writeJSON(w, http.StatusForbidden, relayStop("relay stopped (injected)").body)
		return true
	}
	name := routeNames[r]
	l, ok := f.Latency[name]
	if !ok {
		l, ok = f.Latency["*"]
	}
	if ok {
		s.sleep(req, s.latency(l))
	}
	for _, in := range f.Inject {
		if in.Route != "*" && in.Route != name {
			continue
		}
		if in.Probability <= 0 || s.random(false) >= in.Probability {
			continue
		}
		if in.Reset {
			c.faultsInjected.Add("reset")
			resetConnection(w)
			return true
		}
		c.faultsInjected.Add(strconv.Itoa(in.Status))
		if in.Status == http.StatusTooManyRequests {
			ra := strconv.Itoa(cmp.Or(in.RetryAfter, 60))
			w.Header().Set("Retry-After", ra)
			w.Header().Set("X-Sentry-Rate-Limits", cmp.Or(in.RateLimits, ra+"::organization:generic"))
		}
		writeJSON(w, in.Status, newError(in.Status, "fault", http.StatusText(in.Status)+" (injected)").body)
		return true
	}
	return false
}

func (s *Server) sleep(req *http.Request, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-req.Context().Done():
	}
}

// resetConnection drops the connection without an answer, with a TCP reset
// (SO_LINGER 0), or aborts the stream where it cannot be hijacked (HTTP/2).
func resetConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	type lingerer interface{ SetLinger(sec int) error } // *net.TCPConn or *trackedConn
	if tc, ok := conn.(lingerer); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// handleControl serves GET (the faults in effect and their layers) and
// POST (replace the control layer's faults).
func (s *Server) handleControl(w http.ResponseWriter, req *http.Request, c *counters) *httpError {
	switch req.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost, http.MethodPut:
		body, held, e := s.readDecoded(req, c)
		if e != nil {
			return e
		}
		defer s.releaseBody(held)
		if len(body) > MaxControlBytes {
			return newError(http.StatusRequestEntityTooLarge, "too_large_control", "faults JSON too large",
				fmt.Sprintf("%d bytes > limit %d", len(body), MaxControlBytes))
		}
		var f Faults
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return newError(http.StatusBadRequest, "bad_control", "invalid faults JSON", err.Error())
		}
		if err := f.Validate(); err != nil {
			return newError(http.StatusBadRequest, "bad_control", "invalid faults", err.Error())
		}
		_ = s.SetFaults(f) // valid: it cannot fail
	default:
		return methodNotAllowed(req)
	}
	writeJSON(w, http.StatusOK, s.controlAnswer())
	return nil
}

// checkRateLimits checks an X-Sentry-Rate-Limits value for an injection:
// comma-separated "retry_after:categories:scope[:reason_code[:namespaces]]"
// (Relay's parse_rate_limits), each retry_after in [0, maxRetryAfter]
// seconds. Relay skips a retry_after that does not parse; here it is a typo.
func checkRateLimits(v string) error {
	if len(v) > maxRateLimitsLen {
		return fmt.Errorf("%d bytes, at most %d", len(v), maxRateLimitsLen)
	}
	for i, q := range strings.Split(v, ",") {
		q = strings.TrimSpace(q)
		ra, _, _ := strings.Cut(q, ":")
		if ra == "" && q == "" {
			continue // an empty list element
		}
		// Relay reads retry_after as a float and rounds it up.
		secs, err := strconv.ParseFloat(ra, 64)
		if err != nil || !(secs >= 0 && secs <= maxRetryAfter) {
			return fmt.Errorf("quota %d: retry_after %q is not a number of seconds in [0, %d]", i, clipReason(ra), maxRetryAfter)
		}
	}
	return nil
}

// With is f with g's faults added: g's latencies replace f's for the same
// route, its injections come first (the first matching injection wins), its
// outage replaces f's, and the flags are or-ed.
func (f Faults) With(g Faults) Faults {
	out, g := f.clone(), g.clone()
	if out.Latency == nil {
		out.Latency = g.Latency
	} else {
		maps.Copy(out.Latency, g.Latency)
	}
	out.Inject = append(g.Inject, out.Inject...)
	if g.Outage != nil {
		out.Outage = g.Outage
	}
	out.GlobalPending = out.GlobalPending || g.GlobalPending
	out.RelayStop = out.RelayStop || g.RelayStop
	return out
}

// controlRefused refuses a request for /control or /stats/reset from a
// client outside ControlFrom (403, control_forbidden): those routes change
// what every client gets and are not authenticated.
func (s *Server) controlRefused(req *http.Request) *httpError {
	nets := s.cfg.ControlFrom
	if ap, err := netip.ParseAddrPort(req.RemoteAddr); err == nil {
		// Prefixes hold no zone and match no IPv4-mapped IPv6 address.
		ip := ap.Addr().Unmap().WithZone("")
		if slices.ContainsFunc(nets, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			return nil
		}
	}
	return newError(http.StatusForbidden, "control_forbidden",
		"/control and /stats/reset answer only clients in "+prefixList(nets)+" (fake-upstream --control-from)",
		"client "+req.RemoteAddr)
}

func prefixList(nets []netip.Prefix) string {
	s := make([]string, len(nets))
	for i, p := range nets {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
