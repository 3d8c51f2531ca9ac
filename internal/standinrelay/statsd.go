package standinrelay

import (
	"context"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxDatagram is the largest StatsD datagram sent; several lines share one,
// as Relay's cadence sink does.
const maxDatagram = 512

// maxPendingLines bounds the timer lines held between flushes; beyond it new
// timer samples are dropped (counted in Stats.StatsdDropped).
const maxPendingLines = 4096

// statsd emits DogStatsD lines (name:value|type|#tag:value,...) over UDP.
// Counters are summed per flush period; timers are sent sample by sample.
// A nil *statsd is a valid no-op.
type statsd struct {
	conn   net.Conn
	prefix string

	mu       sync.Mutex
	counters map[metricKey]int64
	gauges   map[metricKey]float64
	lines    []string
	dropped  int64
}

func newStatsd(addr, prefix string) (*statsd, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	if prefix != "" && !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	return &statsd{conn: conn, prefix: prefix, counters: map[metricKey]int64{}, gauges: map[metricKey]float64{}}, nil
}

// metricKey identifies an aggregated counter or gauge.
type metricKey struct{ name, tags string }

// tagReplacer keeps tag text (e.g. reasons from SDK client reports) from
// breaking the line format.
var tagReplacer = strings.NewReplacer(",", "_", "|", "_", "#", "_", "\n", "_", "@", "_")

func formatTags(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	clean := make([]string, len(tags))
	for i, t := range tags {
		clean[i] = tagReplacer.Replace(t)
	}
	return "|#" + strings.Join(clean, ",")
}

// Count adds n to a counter. tags are "key:value" strings.
func (s *statsd) Count(name string, n int64, tags ...string) {
	if s == nil {
		return
	}
	k := metricKey{name, formatTags(tags)}
	s.mu.Lock()
	if _, ok := s.counters[k]; ok || len(s.counters) < maxPendingLines {
		s.counters[k] += n
	} else {
		s.dropped++
	}
	s.mu.Unlock()
}

// Gauge sets a gauge.
func (s *statsd) Gauge(name string, v float64, tags ...string) {
	if s == nil {
		return
	}
	k := metricKey{name, formatTags(tags)}
	s.mu.Lock()
	if _, ok := s.gauges[k]; ok || len(s.gauges) < maxPendingLines {
		s.gauges[k] = v
	} else {
		s.dropped++
	}
	s.mu.Unlock()
}

// Timing records one timer sample in milliseconds.
func (s *statsd) Timing(name string, d time.Duration, tags ...string) {
	if s == nil {
		return
	}
	ms := strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', -1, 64)
	line := s.prefix + name + ":" + ms + "|ms" + formatTags(tags)
	s.mu.Lock()
	if len(s.lines) < maxPendingLines {
		s.lines = append(s.lines, line)
	} else {
		s.dropped++
	}
	s.mu.Unlock()
}

// run flushes every interval until ctx ends, then once more.
func (s *statsd) run(ctx context.Context, interval time.Duration) {
	if s == nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.flush()
			s.conn.Close()
			return
		case <-t.C:
			s.flush()
		}
	}
}

func (s *statsd) flush() {
	s.mu.Lock()
	lines := s.lines
	s.lines = nil
	counters, gauges := s.counters, s.gauges
	s.counters, s.gauges = map[metricKey]int64{}, map[metricKey]float64{}
	s.mu.Unlock()
	keys := make([]string, 0, len(counters)+len(gauges))
	for k, v := range counters {
		keys = append(keys, s.prefix+k.name+":"+strconv.FormatInt(v, 10)+"|c"+k.tags)
	}
	for k, v := range gauges {
		keys = append(keys, s.prefix+k.name+":"+strconv.FormatFloat(v, 'f', -1, 64)+"|g"+k.tags)
	}
	sort.Strings(keys)
	lines = append(lines, keys...)
	var buf []byte
	for _, l := range lines {
		if len(l) > maxDatagram {
			continue
		}
		if len(buf) > 0 && len(buf)+1+len(l) > maxDatagram {
			_, _ = s.conn.Write(buf)
			buf = buf[:0]
		}
		if len(buf) > 0 {
			buf = append(buf, '\n')
		}
		buf = append(buf, l...)
	}
	if len(buf) > 0 {
		_, _ = s.conn.Write(buf)
	}
}
