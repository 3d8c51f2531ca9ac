package blast

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/testutil"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/upstream"
)

var clients = []string{ClientFastHTTP, ClientNetHTTP}

// exact is the request timeout of tests that assert exact counts: long
// enough that a loaded shared machine cannot turn a slow answer into an
// error.
const exact = 30 * time.Second

// checkInvariants asserts the Result's accounting identities.
func checkInvariants(t *testing.T, r *Result) {
	t.Helper()
	// What Merge checks of a part holds for every real run.
	if err := r.checkInvariants(); err != nil {
		t.Errorf("Result.checkInvariants: %v", err)
	}
	var statuses, errs, kinds int64
	for _, n := range r.ByStatus {
		statuses += n
	}
	for _, n := range r.Errors {
		errs += n
	}
	for _, n := range r.ByKind {
		kinds += n
	}
	if r.Sent+r.Dropped != r.Scheduled {
		t.Errorf("sent %d + dropped %d != scheduled %d", r.Sent, r.Dropped, r.Scheduled)
	}
	if statuses+errs+r.Abandoned != r.Sent {
		t.Errorf("statuses %d + errors %d + abandoned %d != sent %d", statuses, errs, r.Abandoned, r.Sent)
	}
	if kinds+r.Abandoned != r.Sent {
		t.Errorf("by kind %d + abandoned %d != sent %d", kinds, r.Abandoned, r.Sent)
	}
	if r.Lag.Count()+r.Abandoned != r.Sent || r.Latency.Count() != statuses || r.Service.Count() != statuses {
		t.Errorf("sketch counts lag %d latency %d service %d; sent %d responses %d", r.Lag.Count(), r.Latency.Count(), r.Service.Count(), r.Sent, statuses)
	}
	var wSent, wDropped int64
	for i, w := range r.Windows {
		if w.Second != i {
			t.Errorf("window %d has second %d", i, w.Second)
		}
		wSent += w.Sent
		wDropped += w.Dropped
	}
	if wSent+r.Abandoned != r.Sent+r.WarmupSent || wDropped != r.Dropped+r.WarmupDropped {
		t.Errorf("windows sent %d dropped %d; result sent %d+%d dropped %d+%d", wSent, wDropped, r.Sent, r.WarmupSent, r.Dropped, r.WarmupDropped)
	}
}

// Every slot k sends pool entry k mod len exactly once, with the entry's
// headers; the server receives exactly what blast counts as OK.
func TestRunExactCounts(t *testing.T) {
	for _, client := range clients {
		for _, enc := range []compression.Encoding{compression.Identity, compression.Zstd} {
			t.Run(client+"/"+string(enc), func(t *testing.T) {
				srv := newCountingServer(t)
				p := testPool(t, 97, enc)
				const n = 600
				res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 3000, Count: n, Client: client, Timeout: exact})
				if err != nil {
					t.Fatal(err)
				}
				checkInvariants(t, res)
				if res.Sent != n || res.OK != n || res.Scheduled != n || srv.n.Load() != n {
					t.Fatalf("sent %d ok %d scheduled %d, server got %d; want %d", res.Sent, res.OK, res.Scheduled, srv.n.Load(), n)
				}
				want := map[string]int{}
				wantKinds := map[pool.Kind]int64{}
				wantPaths := map[string]int{}
				for k := 0; k < n; k++ {
					e := p.Entries[k%len(p.Entries)]
					want[string(e.Body)]++
					wantKinds[e.Kind]++
					wantPaths[p.Options.Projects[e.Project].EnvelopePath()]++
				}
				srv.mu.Lock()
				defer srv.mu.Unlock()
				if len(srv.bodies) != len(want) {
					t.Fatalf("server saw %d distinct bodies, want %d", len(srv.bodies), len(want))
				}
				for b, c := range want {
					if srv.bodies[b] != c {
						t.Fatalf("a body arrived %d times, want %d", srv.bodies[b], c)
					}
				}
				for path, c := range wantPaths {
					if srv.paths[path] != c {
						t.Fatalf("path %s: %d requests, want %d", path, srv.paths[path], c)
					}
				}
				for k, c := range wantKinds {
					if res.ByKind[k] != c || res.OKByKind[k] != c {
						t.Fatalf("kind %s: sent %d ok %d, want %d", k, res.ByKind[k], res.OKByKind[k], c)
					}
				}
				keys := map[string]bool{}
				uas := map[string]bool{}
				for _, e := range p.Entries {
					keys[p.Options.Projects[e.Project].PublicKey] = true
					uas[e.UserAgent+"|"+e.ForwardedFor] = true
				}
				for _, h := range srv.hdrs {
					if got := h.Get("Content-Type"); got != "application/x-sentry-envelope" {
						t.Fatalf("Content-Type %q", got)
					}
					wantEnc := string(enc)
					if enc == compression.Identity {
						wantEnc = ""
					}
					if got := h.Get("Content-Encoding"); got != wantEnc {
						t.Fatalf("Content-Encoding %q, want %q", got, wantEnc)
					}
					if !keys[projects.ParseAuthKey(h.Get("X-Sentry-Auth"))] {
						t.Fatalf("X-Sentry-Auth %q has no pool project key", h.Get("X-Sentry-Auth"))
					}
					if !uas[h.Get("User-Agent")+"|"+h.Get("X-Forwarded-For")] {
						t.Fatalf("User-Agent %q / X-Forwarded-For %q not from the pool", h.Get("User-Agent"), h.Get("X-Forwarded-For"))
					}
				}
			})
		}
	}
}

// N shards of one schedule together send exactly what one process sends,
// and Merge adds them up exactly.
func TestRunShardsMerge(t *testing.T) {
	srv := newCountingServer(t)
	p := testPool(t, 50, compression.Gzip)
	const n = 999
	one, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 4000, Count: n, Timeout: exact})
	if err != nil {
		t.Fatal(err)
	}
	var parts []*Result
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 4000, Count: n, Shard: i, Shards: 3, Timeout: exact})
			if err != nil {
				t.Error(err)
				return
			}
			checkInvariants(t, r)
			if r.Sent != n/3 || r.ShareRate() != 4000.0/3 {
				t.Errorf("shard %d sent %d, share rate %v", i, r.Sent, r.ShareRate())
			}
			// Round trip through JSON, as blast merge does.
			b, err := json.Marshal(r)
			if err != nil {
				t.Error(err)
				return
			}
			var back Result
			if err := json.Unmarshal(b, &back); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			parts = append(parts, &back)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	m, err := Merge(parts...)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, m)
	if m.Sent != one.Sent || m.OK != one.OK || m.Scheduled != one.Scheduled || m.Shard != -1 || m.Parts != 3 {
		t.Fatalf("merged sent %d ok %d scheduled %d shard %d parts %d; one run %d %d %d", m.Sent, m.OK, m.Scheduled, m.Shard, m.Parts, one.Sent, one.OK, one.Scheduled)
	}
	for k, c := range one.ByKind {
		if m.ByKind[k] != c {
			t.Errorf("kind %s: merged %d, one run %d", k, m.ByKind[k], c)
		}
	}
	if srv.n.Load() != 2*n {
		t.Errorf("server got %d, want %d", srv.n.Load(), 2*n)
	}
	if _, err := Merge(parts[0], parts[0]); err == nil {
		t.Error("merging a shard with itself succeeded")
	}
}

// Rate accuracy, with bounds a loaded machine cannot break: nothing goes
// out early (exact), and the run is late by no more than a second plus the
// time the machine held the process back (testutil.Stalls). The exact
// rate and lag targets are in the benchmark.
func TestRunRate(t *testing.T) {
	srv := newCountingServer(t)
	p := testPool(t, 40, compression.Identity)
	const rate, slots = 500, 1000
	stalls := testutil.StartStalls()
	start := time.Now()
	res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: rate, Duration: 2 * time.Second, Timeout: exact})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	lost := stalls.Stop()
	checkInvariants(t, res)
	if res.Scheduled != slots || res.Sent+res.Dropped != slots {
		t.Fatalf("scheduled %d sent %d dropped %d, want %d", res.Scheduled, res.Sent, res.Dropped, slots)
	}
	t.Logf("took %v, %v of it lost to a loaded machine; %d windows, lag p50 %v max %v", took, lost, len(res.Windows), res.Lag.Quantile(0.5), res.Lag.Max())
	// Lower bounds are exact: nothing is released early. Run returns once
	// the last slot (at 1.998 s) is answered, which can be before the
	// plan's 2 s it measures over.
	if took < 1990*time.Millisecond || res.Elapsed < 2*time.Second || res.Elapsed > max(took, 2*time.Second) {
		t.Errorf("2 s schedule took %v, measured over %v", took, res.Elapsed)
	}
	if late := took - 2*time.Second; late > time.Second+lost {
		t.Errorf("2 s schedule took %v: %v late with %v lost to the machine", took, late, lost)
	}
	if a := res.AchievedRate(); a > rate+0.001 || a < float64(res.Sent)/max(took, res.Elapsed).Seconds() {
		t.Errorf("achieved %.1f/s of %d/s (%d sent in %v)", a, rate, res.Sent, took)
	}
	// A window is a second of send times: the last is the second the last
	// request went out in, before Run returned; none holds more than the
	// schedule had released by its end.
	if n := len(res.Windows); n < 2 || n > int(took/time.Second)+1 {
		t.Errorf("%d windows for 2 s that took %v", n, took)
	}
	var upTo int64
	for i, w := range res.Windows {
		upTo += w.Sent + w.Dropped
		if limit := min(int64(rate*(i+1)), slots); upTo > limit {
			t.Errorf("%d requests by the end of second %d, the schedule released %d", upTo, i, limit)
		}
	}
	if res.Lag.Count() != slots || res.Lag.Quantile(0.5) > 500*time.Millisecond+lost {
		t.Errorf("lag count %d p50 %v (%v lost to the machine)", res.Lag.Count(), res.Lag.Quantile(0.5), lost)
	}
}

func TestRunWarmup(t *testing.T) {
	srv := newCountingServer(t)
	p := testPool(t, 30, compression.Identity)
	var sent atomic.Int64
	res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 1000, Warmup: 200 * time.Millisecond, Count: 300, Timeout: exact, Sent: &sent})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, res)
	if res.WarmupSent+res.WarmupDropped != 200 || res.Sent+res.Dropped != 300 || srv.n.Load() != res.WarmupSent+res.Sent || res.WarmupOK != res.WarmupSent {
		t.Fatalf("warm-up %d+%d, measured %d+%d, server %d", res.WarmupSent, res.WarmupDropped, res.Sent, res.Dropped, srv.n.Load())
	}
	// Config.Sent counted every request, the warm-up's too.
	if sent.Load() != res.WarmupSent+res.Sent {
		t.Errorf("Config.Sent counted %d, want %d+%d", sent.Load(), res.WarmupSent, res.Sent)
	}
	if res.Elapsed < 300*time.Millisecond || res.Warmup != 200*time.Millisecond {
		t.Errorf("elapsed %v warmup %v", res.Elapsed, res.Warmup)
	}
}

func TestRunClosedLoop(t *testing.T) {
	for _, client := range clients {
		srv := newCountingServer(t)
		p := testPool(t, 30, compression.Identity)
		res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 0, Concurrency: 4, Count: 400, Client: client, Timeout: exact})
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, res)
		if res.Sent != 400 || res.OK != 400 || srv.n.Load() != 400 || res.Dropped != 0 {
			t.Fatalf("%s: sent %d ok %d server %d dropped %d", client, res.Sent, res.OK, srv.n.Load(), res.Dropped)
		}
		if res.Lag.Quantile(1) != 0 {
			t.Errorf("closed loop lag max %v, want 0", res.Lag.Quantile(1))
		}
		stalls := testutil.StartStalls()
		res, err = Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 0, Concurrency: 2, Duration: 300 * time.Millisecond, Client: client, Timeout: exact})
		if err != nil {
			t.Fatal(err)
		}
		lost := stalls.Stop()
		checkInvariants(t, res)
		if res.Sent == 0 || res.OK != res.Sent || res.Elapsed < 300*time.Millisecond || res.Elapsed > 3*time.Second+lost {
			t.Fatalf("%s: duration run sent %d ok %d elapsed %v (%v lost to the machine)", client, res.Sent, res.OK, res.Elapsed, lost)
		}
	}
}

func TestRunStatuses(t *testing.T) {
	srv := newCountingServer(t)
	srv.status = func(n int64) int {
		switch n % 4 {
		case 1:
			return 429
		case 2:
			return 500
		}
		return 200
	}
	p := testPool(t, 30, compression.Identity)
	res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 2000, Count: 400, Timeout: exact})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, res)
	if res.ByStatus[429] != 100 || res.ByStatus[500] != 100 || res.ByStatus[200] != 200 || res.OK != 200 {
		t.Fatalf("by status %v ok %d", res.ByStatus, res.OK)
	}
}

// A target slower than MaxInflight allows: slots are dropped, counted, and
// the run is marked invalid; it still ends on time.
func TestRunDrops(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-time.After(400 * time.Millisecond):
		}
	}))
	defer srv.Close()
	defer close(release)
	p := testPool(t, 30, compression.Identity)
	stalls := testutil.StartStalls()
	start := time.Now()
	res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 200, Duration: time.Second, MaxInflight: 5})
	if err != nil {
		t.Fatal(err)
	}
	took, lost := time.Since(start), stalls.Stop()
	checkInvariants(t, res)
	if res.Dropped < 100 || res.Scheduled != 200 || !res.Invalid || !strings.Contains(strings.Join(res.InvalidReasons, ";"), "dropped") {
		t.Fatalf("dropped %d of %d, invalid %v %q", res.Dropped, res.Scheduled, res.Invalid, res.InvalidReasons)
	}
	if took > 3*time.Second+lost {
		t.Errorf("took %v (%v lost to the machine)", took, lost)
	}
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
}

// rawServer accepts connections and hands each to handle.
func rawServer(t *testing.T, handle func(net.Conn)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); handle(c) }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// waitGoroutines waits until the goroutine count is back near base. The
// deadline only has to tell goroutines that end from goroutines that never
// do, so it is long: a loaded machine may take seconds to run them out.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, baseline %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A target that refuses, resets or never answers: every request counts in
// its error class, the run ends on time, goroutines return to baseline.
func TestRunFailingTargets(t *testing.T) {
	p := testPool(t, 30, compression.Identity)
	hijackClose := func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // RST
			}
		}
		c.Close()
	}
	closeAfterRead := func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err == nil {
			io.Copy(io.Discard, req.Body)
		}
		c.Close() // FIN before any response byte
	}
	neverAnswer := func(c net.Conn) {
		io.Copy(io.Discard, c) // read until the client gives up
		c.Close()
	}
	for _, client := range clients {
		// Only the silent server needs a short timeout; the others fail fast,
		// and a long timeout keeps a loaded machine from turning them into
		// timeouts.
		for _, tc := range []struct {
			name    string
			addr    func() string
			class   string
			timeout time.Duration
		}{
			{"refused", func() string { return freeAddr(t) }, ClassRefused, exact},
			{"reset", func() string { return rawServer(t, hijackClose) }, ClassReset, exact},
			{"closed", func() string { return rawServer(t, closeAfterRead) }, ClassReset, exact},
			{"never answers", func() string { return rawServer(t, neverAnswer) }, ClassTimeout, 200 * time.Millisecond},
		} {
			t.Run(client+"/"+tc.name, func(t *testing.T) {
				base := runtime.NumGoroutine()
				addr := tc.addr()
				stalls := testutil.StartStalls()
				start := time.Now()
				res, err := Run(context.Background(), Config{Target: "http://" + addr, Pool: p, Rate: 200, Duration: 500 * time.Millisecond,
					Timeout: tc.timeout, Client: client})
				if err != nil {
					t.Fatal(err)
				}
				took, lost := time.Since(start), stalls.Stop()
				checkInvariants(t, res)
				if res.Sent != 100 || res.Errors[tc.class] != 100 || res.OK != 0 {
					t.Fatalf("sent %d, errors %v %q, ok %d; want 100 %s", res.Sent, res.Errors, res.ErrorSamples, res.OK, tc.class)
				}
				if took > 10*time.Second+lost {
					t.Errorf("run took %v (%v lost to the machine)", took, lost)
				}
				waitGoroutines(t, base+1) // +1: the raw server's accept loop
			})
		}
	}
}

// Cancelling stops sending at once, waits for in-flight requests up to
// Grace, and returns the partial result. The cancel comes when the server
// has answered 100 requests, not at a time a loaded machine may not have
// sent any by.
func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := make(chan time.Time, 1)
	var handled atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if handled.Add(1) == 100 {
			cancelled <- time.Now()
			cancel()
		}
	}))
	defer srv.Close()
	p := testPool(t, 30, compression.Identity)
	stalls := testutil.StartStalls()
	start := time.Now()
	// A long Grace: every request in flight at the cancel is answered, and
	// Run still returns as soon as they are.
	res, err := Run(ctx, Config{Target: srv.URL, Pool: p, Rate: 1000, Duration: 10 * time.Second, Grace: exact, Timeout: exact})
	if err != nil {
		t.Fatal(err)
	}
	took, lost := time.Since(start), stalls.Stop()
	select {
	case at := <-cancelled:
		if after := time.Since(at); after > 2*time.Second+lost {
			t.Fatalf("cancelled run returned %v after the cancel (%v lost to the machine)", after, lost)
		}
	default:
		t.Fatalf("the run ended before the server answered 100 requests: %+v", res)
	}
	checkInvariants(t, res)
	// Nothing goes early: no more were sent than the schedule had released
	// when Run returned.
	if !res.Interrupted || !res.Invalid || res.Sent < 100 || float64(res.Sent) > 1000*took.Seconds()+1 || res.OK != res.Sent {
		t.Fatalf("interrupted %v invalid %v sent %d ok %d in %v", res.Interrupted, res.Invalid, res.Sent, res.OK, took)
	}
}

// Requests still out when the grace period ends count as abandoned. The
// server holds every request until the test lets go, and the requests'
// Timeout is long, so none can end before the grace period however slowly
// a loaded machine runs the test.
func TestRunCancelAbandons(t *testing.T) {
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var once sync.Once
	addr := rawServer(t, func(c net.Conn) {
		defer c.Close()
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil {
			return
		}
		once.Do(func() { time.AfterFunc(100*time.Millisecond, cancel) }) // a few more go out first
		go io.Copy(io.Discard, c)
		<-release
	})
	p := testPool(t, 30, compression.Identity)
	res, err := Run(ctx, Config{Target: "http://" + addr, Pool: p, Rate: 100, Duration: 5 * time.Second, Timeout: exact, Grace: 100 * time.Millisecond})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, res)
	if res.Abandoned == 0 || res.Abandoned != res.Sent || !res.Interrupted {
		t.Fatalf("abandoned %d sent %d interrupted %v", res.Abandoned, res.Sent, res.Interrupted)
	}
	waitGoroutines(t, base+1)
}

// Against the real fake upstream: what blast counts as OK is what the
// upstream accepted.
func TestRunAgainstUpstream(t *testing.T) {
	p := testPool(t, 200, compression.Zstd)
	up, err := upstream.Start(upstream.Config{Projects: p.Options.Projects})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	srv := up
	res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 2000, Count: 1000, Timeout: exact})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, res)
	st := up.Stats()
	if res.OK != 1000 || st.Envelopes != res.OK {
		t.Fatalf("blast ok %d (statuses %v), upstream accepted %d, errors %v", res.OK, res.ByStatus, st.Envelopes, st.Errors)
	}
}

func TestRunBadConfig(t *testing.T) {
	p := testPool(t, 10, compression.Identity)
	for _, cfg := range []Config{
		{Target: "http://127.0.0.1:1", Pool: p, Rate: -1},
		{Target: "ftp://127.0.0.1:1", Pool: p, Rate: 1},
		{Target: "::nonsense", Pool: p, Rate: 1},
		{Target: "http://127.0.0.1:1", Pool: nil, Rate: 1},
		{Target: "http://127.0.0.1:1", Pool: p, Rate: 1, Shard: 2, Shards: 2},
		{Target: "http://127.0.0.1:1", Pool: p, Rate: 1, Client: "curl"},
		{Target: "http://127.0.0.1:1", Pool: p, Rate: 1, Duration: -time.Second},
	} {
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v, want ErrConfig", cfg, err)
		}
	}
}

// Rates, counts and spans the schedule cannot hold are refused before
// anything is sent, and the error names the field and the limit (issue 33:
// --rate 1e300 spun for minutes, --rate 1e-9 sent nothing, --duration 1ns
// reported 16399.4/s from one request).
func TestRunRefusesWhatTheScheduleCannotHold(t *testing.T) {
	p := testPool(t, 10, compression.Identity)
	base := Config{Target: "http://127.0.0.1:1", Pool: p, Timeout: time.Second}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"a rate beyond any clock", func(c *Config) { c.Rate, c.Count = 1e300, 10 }, []string{"Rate: 1e+300", "0.001 to 10000000 requests/s"}},
		{"a rate above the cap", func(c *Config) { c.Rate, c.Count = 1e9, 10 }, []string{"Rate: 1000000000", "to 10000000"}},
		{"a rate below the floor", func(c *Config) { c.Rate, c.Duration = 1e-9, time.Second }, []string{"Rate: 1e-09", "from 0.001"}},
		{"not a number", func(c *Config) { c.Rate, c.Count = math.NaN(), 10 }, []string{"Rate: NaN"}},
		{"less than one request in the duration", func(c *Config) { c.Rate, c.Duration = 1000, time.Nanosecond }, []string{"Duration: 1ns at Rate 1000/s", "want at least 1ms"}},
		{"less than one request per shard", func(c *Config) { c.Rate, c.Duration, c.Shards = 1000, time.Millisecond, 4 }, []string{"Duration: 1ms", "per shard (4)", "at least 4ms"}},
		{"the default duration at a tiny rate", func(c *Config) { c.Rate = 0.01 }, []string{"Duration: 10s at Rate 0.01/s", "at least 1m40s"}},
		{"fewer slots than shards", func(c *Config) { c.Rate, c.Count, c.Shard, c.Shards = 1000, 1, 1, 2 }, []string{"Count: 1 with Shard i/2", "want at least 2, one slot per shard"}},
		{"a count that overflows the schedule", func(c *Config) { c.Rate, c.Count = 1000, math.MaxInt64 }, []string{"Count: 9223372036854775807", "at most 1000000000000000"}},
		{"more closed-loop workers than connections", func(c *Config) { c.Concurrency, c.Count = 1e9, 10 }, []string{"Concurrency: 1000000000: want 1 to 10000"}},
		{"a warm-up and duration that overflow", func(c *Config) { c.Rate, c.Warmup, c.Duration = 1000, math.MaxInt64, time.Second }, []string{"Duration: 1s with Warmup", "at most 8784h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			res, err := Run(context.Background(), cfg)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err %v (result %+v), want ErrConfig", err, res)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// The limits themselves are runnable.
	for _, cfg := range []Config{
		{Rate: MaxRate, Count: 1}, {Rate: MinRate, Count: 1}, {Rate: 1000, Duration: time.Millisecond}, {Rate: 1000, Duration: 4 * time.Millisecond, Shard: 3, Shards: 4},
	} {
		cfg.Target, cfg.Pool, cfg.Timeout = base.Target, p, time.Second
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

func TestForSending(t *testing.T) {
	p := testPool(t, 40, compression.Gzip)
	q := ForSending(p)
	if len(q.Entries) != len(p.Entries) || q.Options.Encoding != p.Options.Encoding {
		t.Fatal("entries or options lost")
	}
	for i, e := range q.Entries {
		o := p.Entries[i]
		if string(e.Body) != string(o.Body) || e.Kind != o.Kind || e.Project != o.Project || e.UserAgent != o.UserAgent ||
			e.ForwardedFor != o.ForwardedFor || e.EventID != o.EventID || e.RawSize != o.RawSize || e.Items != o.Items {
			t.Fatalf("entry %d differs", i)
		}
		if cap(e.Body) != len(e.Body) {
			t.Fatalf("entry %d body can grow into its neighbour", i)
		}
	}
}

// A target that dies mid-run: what was answered counts as OK, the rest by
// error class; the run still ends on schedule. The target dies once it has
// answered 100 requests, not at a time a loaded machine may not have sent
// any by.
func TestRunTargetDiesMidRun(t *testing.T) {
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			base := runtime.NumGoroutine()
			srv := newCountingServer(t)
			var dies sync.Once
			srv.status = func(n int64) int {
				if n == 100 {
					dies.Do(func() {
						go func() {
							srv.Listener.Close()
							srv.CloseClientConnections()
						}()
					})
				}
				return 200
			}
			p := testPool(t, 30, compression.Identity)
			stalls := testutil.StartStalls()
			start := time.Now()
			// A long Timeout: the requests a dead target leaves out fail
			// by themselves, and a loaded machine cannot turn the answers
			// before its death into timeouts.
			res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 500, Duration: time.Second,
				Timeout: exact, Client: client})
			if err != nil {
				t.Fatal(err)
			}
			took, lost := time.Since(start), stalls.Stop()
			checkInvariants(t, res)
			if took > 5*time.Second+lost {
				t.Errorf("took %v (%v lost to the machine)", took, lost)
			}
			if res.Sent != 500 || res.OK == 0 || res.OK > srv.n.Load() || res.Errors[ClassRefused] == 0 {
				t.Fatalf("sent %d ok %d (server %d) errors %v %q", res.Sent, res.OK, srv.n.Load(), res.Errors, res.ErrorSamples)
			}
			srv.Close()
			waitGoroutines(t, base)
		})
	}
}

// MaxConns bounds connections; requests beyond wait for one, and the wait
// shows in latency (from the intended time), not as drops or errors.
func TestRunMaxConns(t *testing.T) {
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			var cur, peak atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := cur.Add(1)
				defer cur.Add(-1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				io.Copy(io.Discard, r.Body)
				time.Sleep(40 * time.Millisecond)
			}))
			defer srv.Close()
			p := testPool(t, 20, compression.Identity)
			res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 200, Count: 60, MaxConns: 2, Timeout: exact, Client: client})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, res)
			if res.OK != 60 || res.Dropped != 0 || peak.Load() > 2 {
				t.Fatalf("ok %d dropped %d, server saw %d concurrent requests (want <= 2)", res.OK, res.Dropped, peak.Load())
			}
			// 60 requests × 40 ms over 2 connections take ≥ 1.2 s, the
			// schedule 0.3 s: the queueing shows in latency.
			if res.Latency.Max() < 800*time.Millisecond || res.Service.Max() < 40*time.Millisecond {
				t.Errorf("latency max %v service max %v: waiting for a connection not counted", res.Latency.Max(), res.Service.Max())
			}
		})
	}
}

// An entry without a User-Agent (a recorded envelope that had none) goes
// out with the SDK client's name; kinds beyond the pool's five are counted
// under their names; a pool with more kinds than the tables hold is refused.
func TestRecordedEntries(t *testing.T) {
	p := testPool(t, 4, compression.Identity)
	p.Entries[0].UserAgent = ""
	p.Entries[1].Kind = "feedback"
	srv := newCountingServer(t)
	res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 1000, Count: 4, SDKClient: "replayer/1", Timeout: exact})
	if err != nil {
		t.Fatal(err)
	}
	uas := map[string]bool{}
	for _, h := range srv.hdrs {
		uas[h.Get("User-Agent")] = true
	}
	if !uas["replayer/1"] || res.ByKind["feedback"] != 1 {
		t.Errorf("agents %v, by kind %v", uas, res.ByKind)
	}
	big := &pool.Pool{Options: p.Options}
	for i := range MaxKinds + 1 {
		e := p.Entries[0]
		e.Kind = pool.Kind("k" + strconv.Itoa(i))
		big.Entries = append(big.Entries, e)
	}
	if _, err := Run(context.Background(), Config{Target: srv.URL, Pool: big, Rate: 1000, Count: 1}); !errors.Is(err, ErrConfig) {
		t.Errorf("%d kinds: %v, want ErrConfig", MaxKinds+1, err)
	}
	q := *p
	q.Options.Corpus = "sha256:0123"
	if poolDigest(p) == poolDigest(&q) {
		t.Error("a replayed pool's digest ignores its corpus")
	}
}
