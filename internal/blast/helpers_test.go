package blast

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/projects"
)

// testPool builds a small real pool.
func testPool(t testing.TB, size int, enc compression.Encoding) *pool.Pool {
	t.Helper()
	ps, err := projects.Generate(7, 5)
	if err != nil {
		t.Fatal(err)
	}
	mix, err := pool.ParseMix("errors=3,transactions=2,sessions=2,checkins=1,logs=2")
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.Build(context.Background(), pool.Options{
		Seed: 42, Size: size, Mix: mix, Projects: ps, ZipfS: 1.1, Encoding: enc, Now: time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// countingServer is a loopback sink that counts requests and remembers
// what it received.
type countingServer struct {
	*httptest.Server
	n      atomic.Int64
	mu     sync.Mutex
	bodies map[string]int // body → times received
	hdrs   []http.Header  // first few requests' headers
	paths  map[string]int
	status func(n int64) int // nil: 200
}

func newCountingServer(t testing.TB) *countingServer {
	s := &countingServer{bodies: map[string]int{}, paths: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		n := s.n.Add(1)
		s.mu.Lock()
		s.bodies[string(b)]++
		s.paths[r.URL.Path]++
		if len(s.hdrs) < 50 {
			s.hdrs = append(s.hdrs, r.Header.Clone())
		}
		s.mu.Unlock()
		code := 200
		if s.status != nil {
			code = s.status(n)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, `{"id":"0123456789abcdef0123456789abcdef"}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// fakeClock advances only when the pacer sleeps, by at least a tick, like
// Go timers on this VM.
type fakeClock struct {
	now      time.Duration
	tick     time.Duration // minimum sleep
	extra    func(i int) time.Duration
	sleeps   int
	cancelAt int // cancel via cancel() on this sleep (0: never)
	cancel   func()
}

func (c *fakeClock) Now() time.Duration { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) bool {
	c.sleeps++
	if c.cancelAt > 0 && c.sleeps == c.cancelAt {
		c.cancel()
	}
	if ctx.Err() != nil {
		return false
	}
	d = max(d, c.tick)
	if c.extra != nil {
		d += c.extra(c.sleeps)
	}
	c.now += d
	return true
}
