package standinrelay

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"
)

// statsdFlush is how often the stand-in sends its metrics. (Relay 26.4.0
// aggregates for 10 s before it sends: relay-statsd/src/lib.rs,
// AggregationMode::Aggressive. The stand-in sends promptly so that a test
// step's short drain sees them.)
const statsdFlush = 100 * time.Millisecond

// maxDatagram bounds a StatsD datagram (Relay 26.4.0's were up to 1,432 B).
const maxDatagram = 1432

// statsd sends the two metrics the stand-in has, in Relay 26.4.0's
// DogStatsD form (seen with a UDP listener as metrics.statsd):
//
//	sentry.relay.event.accepted:4|c|#handling:success
//	sentry.relay.event.processing_time:5.10413:0.565192|d|@1.0|#group:error
//
// without the group tag (the stand-in has no processing groups). A nil
// *statsd does nothing.
type statsd struct {
	conn   net.Conn
	prefix string

	mu       sync.Mutex
	accepted int64
	times    []byte // packed ":value" of event.processing_time since the last flush
}

func newStatsd(addr, prefix string) (*statsd, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	if prefix != "" {
		prefix += "."
	}
	return &statsd{conn: conn, prefix: prefix}, nil
}

// addAccepted adds n to event.accepted.
func (s *statsd) addAccepted(n int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.accepted += n
	s.mu.Unlock()
}

// addProcessingTime records one event.processing_time, in milliseconds.
func (s *statsd) addProcessingTime(d time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.times = append(s.times, ':')
	s.times = strconv.AppendFloat(s.times, float64(d.Nanoseconds())/1e6, 'f', 6, 64)
	s.mu.Unlock()
}

// run flushes every statsdFlush until ctx ends, then once more.
func (s *statsd) run(ctx context.Context) {
	if s == nil {
		return
	}
	t := time.NewTicker(statsdFlush)
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
	accepted, times := s.accepted, s.times
	s.accepted, s.times = 0, nil
	s.mu.Unlock()
	if accepted > 0 {
		_, _ = s.conn.Write([]byte(s.prefix + "event.accepted:" + strconv.FormatInt(accepted, 10) + "|c|#handling:success"))
	}
	name := s.prefix + "event.processing_time"
	for len(times) > 0 {
		// Pack as many values as fit in one datagram, at a ':' boundary.
		n := len(times)
		if room := maxDatagram - len(name) - len("|d|@1.0"); n > room {
			n = room
			for times[n] != ':' {
				n--
			}
		}
		_, _ = s.conn.Write([]byte(name + string(times[:n]) + "|d|@1.0"))
		times = times[n:]
	}
}
