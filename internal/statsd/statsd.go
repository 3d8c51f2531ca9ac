// Package statsd is a StatsD/DogStatsD receiver for Relay's internal metrics.
//
// Relay (relay-statsd) sends lines "name:value|type[|@rate][|#k:v,…]" over UDP,
// several lines per datagram (newline-separated, datagrams of at most 512 B in
// newer versions) and, after its per-thread pre-aggregation, packed values
// "name:v1:v2:v3|ms". The receiver keeps counters (summed, scaled by 1/rate),
// gauges (last value) and timers, histograms and distributions (one DDSketch
// per metric name, α = 0.01 like blast's, with exact count, sum, min and max;
// each value weighted by 1/rate).
// Sets are counted as lines and otherwise ignored. Tags (and DogStatsD
// container ids and timestamps) are accepted and dropped: the report asks
// for one metric name at a time. A line with any value that is not a finite
// number is counted as malformed and recorded not at all.
//
// A receiver lives for one orchestrate step; Reset starts a fresh state.
package statsd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"sync"

	"github.com/DataDog/sketches-go/ddsketch"
)

// RelativeAccuracy of timer sketches; the same as blast's latency sketches so
// that they merge.
const RelativeAccuracy = 0.01

// Metric types the receiver distinguishes.
const (
	TypeCounter      = "c"
	TypeGauge        = "g"
	TypeTimer        = "ms"
	TypeHistogram    = "h"
	TypeDistribution = "d"
	TypeSet          = "s"
)

// Line is one parsed StatsD line (name and values alias the input).
type Line struct {
	Name   []byte
	Values [][]byte // one or more (packed) values
	Type   string
	Rate   float64 // 1 when absent
}

// ErrMalformed is wrapped by ParseLine's errors.
var ErrMalformed = errors.New("statsd: malformed line")

// ParseLine parses one line. vals is reused for the values to avoid
// allocating per line.
func ParseLine(b []byte, vals [][]byte) (Line, error) {
	l := Line{Rate: 1, Values: vals[:0]}
	colon := bytes.IndexByte(b, ':')
	if colon <= 0 {
		return l, fmt.Errorf("%w: no name", ErrMalformed)
	}
	l.Name = b[:colon]
	rest := b[colon+1:]
	bar := bytes.IndexByte(rest, '|')
	if bar < 0 {
		return l, fmt.Errorf("%w: no type", ErrMalformed)
	}
	values := rest[:bar]
	rest = rest[bar+1:]
	typ := rest
	if i := bytes.IndexByte(rest, '|'); i >= 0 {
		typ, rest = rest[:i], rest[i+1:]
	} else {
		rest = nil
	}
	switch string(typ) {
	case TypeCounter:
		l.Type = TypeCounter
	case TypeGauge:
		l.Type = TypeGauge
	case TypeTimer:
		l.Type = TypeTimer
	case TypeHistogram:
		l.Type = TypeHistogram
	case TypeDistribution:
		l.Type = TypeDistribution
	case TypeSet:
		l.Type = TypeSet
	default:
		return l, fmt.Errorf("%w: unknown type %q", ErrMalformed, typ)
	}
	for len(rest) > 0 {
		field := rest
		if i := bytes.IndexByte(rest, '|'); i >= 0 {
			field, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		switch {
		case len(field) > 1 && field[0] == '@':
			r, err := strconv.ParseFloat(string(field[1:]), 64)
			if err != nil || !(r > 0 && r <= 1) {
				return l, fmt.Errorf("%w: sample rate %q", ErrMalformed, field)
			}
			l.Rate = r
		case len(field) > 0 && field[0] == '#':
			// tags: accepted and ignored
		case len(field) > 1 && field[0] == 'c' && field[1] == ':':
			// DogStatsD container id: ignored
		case len(field) > 1 && field[0] == 'T':
			// DogStatsD timestamp: ignored
		default:
			return l, fmt.Errorf("%w: field %q", ErrMalformed, field)
		}
	}
	for {
		v := values
		i := bytes.IndexByte(values, ':')
		if i >= 0 {
			v, values = values[:i], values[i+1:]
		}
		if len(v) == 0 {
			return l, fmt.Errorf("%w: empty value", ErrMalformed)
		}
		l.Values = append(l.Values, v)
		if i < 0 {
			break
		}
	}
	if l.Type == TypeSet && len(l.Values) > 1 {
		return l, fmt.Errorf("%w: packed set values", ErrMalformed)
	}
	return l, nil
}

// Quantiles summarises one timer.
type Quantiles struct {
	Count float64 `json:"count"` // weighted by 1/rate
	Sum   float64 `json:"sum"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Snapshot is the receiver's state at one moment.
type Snapshot struct {
	Datagrams int64                `json:"datagrams"`
	Lines     int64                `json:"lines"` // recorded; Malformed ones are not
	Malformed int64                `json:"malformed"`
	Counters  map[string]float64   `json:"counters"`
	Gauges    map[string]float64   `json:"gauges"`
	Timers    map[string]Quantiles `json:"timers"`
	Sets      map[string]int64     `json:"sets"`
}

// Names lists every metric name in the snapshot, sorted.
func (s Snapshot) Names() []string {
	var out []string
	for k := range s.Counters {
		out = append(out, k)
	}
	for k := range s.Gauges {
		out = append(out, k)
	}
	for k := range s.Timers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// state is the aggregation; guarded by Receiver.mu.
type state struct {
	datagrams, lines, malformed int64
	counters                    map[string]float64
	gauges                      map[string]float64
	timers                      map[string]*ddsketch.DDSketchWithExactSummaryStatistics
	sets                        map[string]int64
	nums                        []float64 // add's scratch
}

func newState() *state {
	return &state{
		counters: map[string]float64{},
		gauges:   map[string]float64{},
		timers:   map[string]*ddsketch.DDSketchWithExactSummaryStatistics{},
		sets:     map[string]int64{},
	}
}

// add records one parsed line.
func (s *state) add(l Line) error {
	if l.Type == TypeSet {
		s.lines++
		s.sets[string(l.Name)]++
		return nil
	}
	// Check every value before recording any: a line with one bad packed
	// value is malformed as a whole, not half counted.
	s.nums = s.nums[:0]
	for _, raw := range l.Values {
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: value %q", ErrMalformed, raw)
		}
		s.nums = append(s.nums, v)
	}
	s.lines++
	for _, v := range s.nums {
		switch l.Type {
		case TypeCounter:
			s.counters[string(l.Name)] += v / l.Rate
		case TypeGauge:
			s.gauges[string(l.Name)] = v
		default:
			sk := s.timers[string(l.Name)]
			if sk == nil {
				var err error
				sk, err = ddsketch.NewDefaultDDSketchWithExactSummaryStatistics(RelativeAccuracy)
				if err != nil {
					return err
				}
				s.timers[string(l.Name)] = sk
			}
			if v < 0 {
				v = 0
			}
			if err := sk.AddWithCount(v, 1/l.Rate); err != nil {
				return fmt.Errorf("%w: value %v: %v", ErrMalformed, v, err)
			}
		}
	}
	return nil
}

// addDatagram splits a datagram into lines and records each.
func (s *state) addDatagram(b []byte, vals *[][]byte) {
	s.datagrams++
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimRight(line, "\r ")
		if len(line) == 0 {
			continue
		}
		l, err := ParseLine(line, *vals)
		*vals = l.Values
		if err == nil {
			err = s.add(l)
		}
		if err != nil {
			s.malformed++
		}
	}
}

// Receiver listens on a UDP socket and aggregates what it receives.
type Receiver struct {
	conn net.PacketConn
	done chan struct{}

	mu sync.Mutex
	st *state
}

// Listen starts a receiver on addr (e.g. "127.0.0.1:0"). It stops when ctx
// ends or Close is called.
func Listen(ctx context.Context, addr string) (*Receiver, error) {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("statsd: listen %s: %w", addr, err)
	}
	if uc, ok := conn.(*net.UDPConn); ok {
		// Relay bursts at flush time; a larger buffer avoids kernel drops.
		_ = uc.SetReadBuffer(8 << 20)
	}
	r := &Receiver{conn: conn, done: make(chan struct{}), st: newState()}
	go r.loop()
	go func() {
		select {
		case <-ctx.Done():
			r.Close()
		case <-r.done:
		}
	}()
	return r, nil
}

// Addr is the address the receiver listens on.
func (r *Receiver) Addr() string { return r.conn.LocalAddr().String() }

func (r *Receiver) loop() {
	defer close(r.done)
	buf := make([]byte, 64<<10)
	vals := make([][]byte, 0, 16)
	for {
		n, _, err := r.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.st.addDatagram(buf[:n], &vals)
		r.mu.Unlock()
	}
}

// Close stops the receiver and waits for its read loop to end.
func (r *Receiver) Close() error {
	err := r.conn.Close()
	<-r.done
	return err
}

// Reset discards everything received so far.
func (r *Receiver) Reset() {
	r.mu.Lock()
	r.st = newState()
	r.mu.Unlock()
}

// Snapshot returns a copy of the current state.
func (r *Receiver) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	s := Snapshot{
		Datagrams: st.datagrams, Lines: st.lines, Malformed: st.malformed,
		Counters: make(map[string]float64, len(st.counters)),
		Gauges:   make(map[string]float64, len(st.gauges)),
		Timers:   make(map[string]Quantiles, len(st.timers)),
		Sets:     make(map[string]int64, len(st.sets)),
	}
	for k, v := range st.counters {
		s.Counters[k] = v
	}
	for k, v := range st.gauges {
		s.Gauges[k] = v
	}
	for k, v := range st.sets {
		s.Sets[k] = v
	}
	for k, sk := range st.timers {
		s.Timers[k] = summarize(sk)
	}
	return s
}

// Quantile returns quantile q of timer name, if that timer has values.
func (r *Receiver) Quantile(name string, q float64) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sk := r.st.timers[name]
	if sk == nil || sk.IsEmpty() {
		return 0, false
	}
	v, err := sk.GetValueAtQuantile(q)
	return v, err == nil
}

// Sketch returns a copy of timer name's sketch, for merging with others
// (blast's sketches use the same mapping).
func (r *Receiver) Sketch(name string) (*ddsketch.DDSketch, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sk := r.st.timers[name]
	if sk == nil {
		return nil, false
	}
	return sk.DDSketch.Copy(), true
}

// summarize reads exact count, sum, min and max and approximate quantiles.
func summarize(sk *ddsketch.DDSketchWithExactSummaryStatistics) Quantiles {
	if sk.IsEmpty() {
		return Quantiles{}
	}
	q := Quantiles{Count: sk.GetCount(), Sum: sk.GetSum()}
	q.Min, _ = sk.GetMinValue()
	q.Max, _ = sk.GetMaxValue()
	if vs, err := sk.GetValuesAtQuantiles([]float64{0.5, 0.9, 0.99}); err == nil {
		q.P50, q.P90, q.P99 = vs[0], vs[1], vs[2]
	}
	return q
}
