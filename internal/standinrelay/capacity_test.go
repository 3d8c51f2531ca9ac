package standinrelay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/blast"
	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/pool"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
	"github.com/relayload/relayload/upstream"
)

func TestPacer(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		capacity float64
		at       []time.Duration // reserve calls, offsets from t0
		want     []time.Duration // waits
	}{
		// 200/s: 5 ms apart; 50 ms of idle credit = 10 envelopes + 1 now.
		{"burst after idle", 200, []time.Duration{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			[]time.Duration{-50 * ms, -45 * ms, -40 * ms, -35 * ms, -30 * ms, -25 * ms, -20 * ms, -15 * ms, -10 * ms, -5 * ms, 0, 5 * ms, 10 * ms}},
		// Arrivals slower than capacity never wait (and keep the full credit).
		{"below capacity", 200, []time.Duration{0, 10 * ms, 20 * ms, 30 * ms}, []time.Duration{-50 * ms, -50 * ms, -50 * ms, -50 * ms}},
		// Once the credit is spent, a steady 2× overload waits ever longer.
		{"above capacity", 100, []time.Duration{100 * ms, 105 * ms, 110 * ms, 115 * ms, 120 * ms, 125 * ms, 130 * ms},
			[]time.Duration{-50 * ms, -45 * ms, -40 * ms, -35 * ms, -30 * ms, -25 * ms, -20 * ms}},
		// 1/s: the credit is one interval (more than capacityBurst).
		{"slow capacity", 1, []time.Duration{0, 0, 0}, []time.Duration{-time.Second, 0, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPacer(tc.capacity)
			p.next = t0.Add(-time.Hour)
			for i, off := range tc.at {
				if got := p.reserve(t0.Add(off)); got != tc.want[i] {
					t.Errorf("reserve %d at +%s: wait %s, want %s", i, off, got, tc.want[i])
				}
			}
		})
	}
	// The overload case above, continued: after 50 ms of credit the waits
	// grow by 5 ms per 10 ms of arrivals.
	p := newPacer(100)
	var last time.Duration
	for i := range 40 {
		last = p.reserve(t0.Add(time.Duration(i) * 5 * ms))
	}
	// 40 envelopes take 390 ms at 100/s, minus 50 ms credit; the last arrives at 195 ms.
	if want := 390*ms - 50*ms - 195*ms; last != want {
		t.Errorf("40th of a 2× overload waits %s, want %s", last, want)
	}
	if newPacer(0) != nil {
		t.Error("capacity 0 is not unlimited")
	}
	if p := newPacer(1e-300); p == nil || p.interval <= 0 {
		t.Errorf("tiny capacity: %+v", p)
	}
}

// capacityRate is the standin.capacity the load tests use: the race
// detector makes the in-process stand-in several times slower, so it gets
// a capacity it can still reach on a loaded 2-core machine.
func capacityRate() float64 {
	if raceEnabled {
		return 25
	}
	return 200
}

// capacityRig is the real fake upstream (package upstream) in-process and
// a pool of mixed envelopes for its projects.
type capacityRig struct {
	srv  *upstream.Server
	url  string
	pool *pool.Pool
}

func newCapacityRig(t *testing.T, relays map[string]relayauth.PublicKey) *capacityRig {
	t.Helper()
	ps, err := projects.Generate(11, 8)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := upstream.New(upstream.Config{Projects: ps, VerifySignatures: true, AllowList: relays != nil, Relays: relays})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	pl, err := pool.Build(context.Background(), pool.Options{Seed: 5, Size: 400, Projects: ps, Encoding: compression.Zstd})
	if err != nil {
		t.Fatal(err)
	}
	return &capacityRig{srv: srv, url: hs.URL, pool: blast.ForSending(pl)}
}

// capacityConfig is a stand-in config for the rig's upstream with
// standin.capacity set. port "0" picks a free port.
func capacityConfig(upURL, port string, capacity float64) string {
	return fmt.Sprintf(`relay: {mode: managed, upstream: %q, host: 127.0.0.1, port: %s}
http: {timeout: 5}
outcomes: {emit_outcomes: true, source: capacity-test}
aggregator: {bucket_interval: 0.5, initial_delay: 0}
cache: {batch_interval: 5, global_config_fetch_interval: 1}
limits: {shutdown_timeout: 10, max_thread_count: 2}
logging: {level: info}
standin: {capacity: %g}
`, upURL+"/", port, capacity)
}

// warmUp sends every pool entry of a distinct project once and waits until
// the upstream has them all: project configs are cached, the connections
// are open, and the pacer's idle credit is what remains.
func (rig *capacityRig) warmUp(t *testing.T, base string) {
	t.Helper()
	before := rig.srv.DataEnvelopes()
	seen := map[int]bool{}
	for _, e := range rig.pool.Entries {
		if seen[e.Project] {
			continue
		}
		seen[e.Project] = true
		p := rig.pool.Options.Projects[e.Project]
		req, _ := http.NewRequest(http.MethodPost, base+p.EnvelopePath(), bytes.NewReader(e.Body))
		req.Header.Set("Content-Type", "application/x-sentry-envelope")
		req.Header.Set("Content-Encoding", "zstd")
		req.Header.Set("X-Sentry-Auth", p.AuthHeader("relayload-test/1.0"))
		req.Header.Set("X-Forwarded-For", e.ForwardedFor)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("warm-up: %d %s", resp.StatusCode, b)
		}
	}
	waitFor(t, 10*time.Second, "warm-up envelopes at the upstream", func() bool {
		return rig.srv.DataEnvelopes()-before >= int64(len(seen))
	})
}

// load sends rate envelopes/s for d with blast's open-loop schedule and
// checks that every one was answered 200.
func (rig *capacityRig) load(t *testing.T, base string, rate float64, d time.Duration) *blast.Result {
	t.Helper()
	res, err := blast.Run(context.Background(), blast.Config{Target: base, Pool: rig.pool, Rate: rate, Duration: d, SDKClient: "relayload-test/1.0"})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != res.Sent || res.Dropped != 0 || res.Abandoned != 0 {
		t.Errorf("blast at %g/s: sent %d, 2xx %d, by status %v, errors %v, dropped %d", rate, res.Sent, res.OK, res.ByStatus, res.Errors, res.Dropped)
	}
	if want := int64(rate * d.Seconds()); res.Sent < want*9/10 {
		t.Errorf("blast at %g/s for %s sent only %d (want ≈ %d)", rate, d, res.Sent, want)
	}
	return res
}

// machineStall describes how the machine stalled during a load window, or
// is "" if it did not: blast's open-loop schedule ran 100 ms late at some
// point, or the window overran by more than 10%. (blast's own validity
// bound, lag p99 ≤ 5 ms, is routinely missed with the stand-in and the
// upstream beside it on 2 cores and says nothing about the stand-in's pace.)
func machineStall(res *blast.Result, window, took time.Duration) string {
	if lag := res.Quantile(blast.MetricLag, 1); lag > 100*time.Millisecond || took > window*110/100 {
		return fmt.Sprintf("the machine stalled (a %s window at %g/s took %s, blast's send lag reached %s)", window, res.Rate, took.Round(time.Millisecond), lag.Round(time.Millisecond))
	}
	return ""
}

// TestCapacityBacklog runs the in-process stand-in with standin.capacity N
// against the real fake upstream. Offered 2N/s it answers 200 to every
// envelope, forwards ≈ N/s while the load lasts, holds the rest as a backlog
// and forwards it at ≈ N/s after the load stops (seen with Relay 26.4.0 on
// 2 CPUs: 1,400/s offered, 200s, ~770/s forwarded, 16 s to forward the
// backlog). Offered 0.7N/s, nothing waits: forwarded keeps up with what is
// sent and nothing is left when the load stops.
//
// Accounting (every envelope answered 200, processed and forwarded once) is
// checked on every attempt. The timing checks are retried, up to three
// attempts, only when the machine demonstrably stalled during the attempt
// (machineStall); a failure in an attempt without a stall fails the test.
func TestCapacityBacklog(t *testing.T) {
	n := capacityRate()
	for _, tc := range []struct {
		name    string
		offered float64 // × capacity
	}{
		{"above capacity", 2},
		{"below capacity", 0.7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for attempt := 1; ; attempt++ {
				problems, stalled := capacityAttempt(t, n, tc.offered)
				if len(problems) == 0 {
					return
				}
				if stalled != "" && attempt < 3 {
					t.Logf("attempt %d: %s while %s; trying again", attempt, strings.Join(problems, "; "), stalled)
					continue
				}
				for _, p := range problems {
					t.Error(p)
				}
				if stalled != "" {
					t.Logf("every attempt stalled (last: %s)", stalled)
				}
				return
			}
		})
	}
}

// capacityAttempt is one run of TestCapacityBacklog: a fresh upstream and
// stand-in, offered × n envelopes/s for 3 s. Accounting failures are
// reported at once; timing problems are returned with a description of the
// machine's stall, if there was one.
func capacityAttempt(t *testing.T, n, offeredX float64) (problems []string, stalled string) {
	t.Helper()
	const window = 3 * time.Second
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	rig := newCapacityRig(t, nil)
	s := startStandin(t, capacityConfig(rig.url, "0", n))
	defer s.stop()
	waitFor(t, 10*time.Second, "ready", s.Ready)
	rig.warmUp(t, s.url)
	s0 := s.Stats()

	// Sample the backlog while the load runs.
	var (
		mu                    sync.Mutex
		peakBacklog, samples  int
		sumBacklog            int
		stopSampling, sampled = make(chan struct{}), make(chan struct{})
	)
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				b := s.Stats().Backlog
				mu.Lock()
				peakBacklog = max(peakBacklog, b)
				sumBacklog += b
				samples++
				mu.Unlock()
			}
		}
	}()

	offered := offeredX * n
	d0, t0 := rig.srv.DataEnvelopes(), time.Now()
	res := rig.load(t, s.url, offered, window)
	d1, t1 := rig.srv.DataEnvelopes(), time.Now()
	close(stopSampling)
	<-sampled
	st := s.Stats()
	backlogAtEnd := st.Backlog
	accepted := st.Queued - s0.Queued
	elapsed := t1.Sub(t0)
	fwdRate := float64(d1-d0) / elapsed.Seconds()
	stalled = machineStall(res, window, elapsed)

	// Everything accepted is forwarded eventually; time the drain.
	want := d0 + accepted
	waitFor(t, 30*time.Second, "the backlog forwarded", func() bool { return rig.srv.DataEnvelopes() >= want })
	drain := time.Since(t1)
	time.Sleep(100 * time.Millisecond) // nothing more may arrive
	mu.Lock()
	meanBacklog := float64(sumBacklog) / float64(max(samples, 1))
	mu.Unlock()
	end := s.Stats()
	t.Logf("capacity %g/s, offered %g/s for %s: sent %d in %s, accepted %d, forwarded %.0f/s during the load (timeline %v), backlog peak %d mean %.0f at end %d, drained in %s, peak buffer %d envelopes %d bytes",
		n, offered, window, res.Sent, elapsed.Round(time.Millisecond), accepted, fwdRate, rig.srv.Stats().Timeline.Envelopes, peakBacklog, meanBacklog, backlogAtEnd, drain.Round(time.Millisecond), end.PeakBuffered, end.PeakBufferedBytes)

	if accepted != res.OK {
		t.Errorf("stand-in accepted %d, blast got %d 2xx", accepted, res.OK)
	}
	if got := rig.srv.DataEnvelopes() - d0; got != accepted {
		t.Errorf("upstream got %d data envelopes for %d accepted", got, accepted)
	}
	if end.Processed-s0.Processed != accepted || end.Backlog != 0 || end.LostAtShutdown != 0 {
		t.Errorf("processed %d of %d, backlog %d, lost %d", end.Processed-s0.Processed, accepted, end.Backlog, end.LostAtShutdown)
	}
	if offeredX > 1 {
		// Forwarding at capacity, the rest held.
		if fwdRate < 0.85*n || fwdRate > 1.15*n {
			problem("forwarded %.0f/s during the load, want %g/s ±15%%", fwdRate, n)
		}
		wantBacklog := (offered - n) * window.Seconds()
		if float64(backlogAtEnd) < 0.6*wantBacklog {
			problem("backlog %d when the load stopped, want ≈ %.0f", backlogAtEnd, wantBacklog)
		}
		// The backlog goes out at capacity, not at once.
		wantDrain := time.Duration(float64(backlogAtEnd) / n * float64(time.Second))
		if drain < wantDrain*8/10 || drain > 2*wantDrain+2*time.Second {
			problem("backlog of %d drained in %s, want ≈ %s at %g/s", backlogAtEnd, drain, wantDrain, n)
		}
		if end.PeakBuffered < backlogAtEnd || end.PeakBufferedBytes <= 0 {
			t.Errorf("peak buffer %d (%d bytes), backlog was %d", end.PeakBuffered, end.PeakBufferedBytes, backlogAtEnd)
		}
	} else {
		// Nothing waits: forwarded keeps up with what was sent.
		if sendRate := float64(res.Sent) / elapsed.Seconds(); fwdRate < 0.85*sendRate {
			problem("forwarded %.0f/s during the load, sent %.0f/s", fwdRate, sendRate)
		}
		// A capacity of half of N would leave a backlog growing at 0.2N/s,
		// averaging 0.3·N over the window; none at all is expected.
		if limit := 0.05 * n * window.Seconds(); meanBacklog > limit {
			problem("below capacity: mean backlog %.1f (limit %.1f)", meanBacklog, limit)
		}
		if drain > 2*time.Second {
			problem("below capacity the last envelopes took %s after the load", drain)
		}
	}
	return problems, stalled
}

// TestCapacityShutdownTimeout: a backlog larger than capacity ×
// limits.shutdown_timeout is forwarded at capacity during the graceful
// drain; the rest is dropped unprocessed at the timeout, counted and logged,
// and Run returns promptly.
func TestCapacityShutdownTimeout(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	s := startStandin(t, baseConfig(up.srv.URL)+"standin:\n  capacity: 20\nlimits:\n  shutdown_timeout: 0.5\n")
	waitFor(t, 5*time.Second, "ready", s.Ready)
	const sent = 40
	for range sent {
		if status, _, body := post(t, s.url+"/api/42/envelope/", singleItem("check_in", `{"check_in_id":"83a7c03ed0a04e1b97e2e3b18d38f244","monitor_slug":"m","status":"ok"}`), authHeader(keyA)); status != 200 {
			t.Fatalf("ingest: %d %v", status, body)
		}
	}
	start := time.Now()
	s.stop()
	took := time.Since(start)
	st := s.Stats()
	got := len(up.received())
	t.Logf("capacity 20/s, %d sent, shutdown_timeout 0.5 s: processed %d, forwarded %d, lost %d, shutdown took %s", sent, st.Processed, got, st.LostAtShutdown, took.Round(time.Millisecond))
	if st.Queued != sent || st.Processed+st.LostAtShutdown != sent {
		t.Errorf("queued %d, processed %d + lost %d, want %d", st.Queued, st.Processed, st.LostAtShutdown, sent)
	}
	// 40 at 20/s take 2 s; sending them and the 0.5 s drain leave time for
	// about a dozen. The send of one processed at the deadline may be cut.
	if st.Processed < 5 || st.Processed > 30 || int64(got) > st.Processed || int64(got) < st.Processed-2 {
		t.Errorf("processed %d, forwarded %d: want the capacity's share of the drain", st.Processed, got)
	}
	if took > 2*time.Second {
		t.Errorf("shutdown took %s with limits.shutdown_timeout 0.5 s", took)
	}
	if log := s.log(); !strings.Contains(log, "WARN standin-relay: shutdown timeout: ") || !strings.Contains(log, fmt.Sprintf("%d envelopes accepted, %d processed", sent, st.Processed)) {
		t.Errorf("log does not report the loss and the counts:\n%s", log)
	}
}

// procCPU is a process's user+system CPU from /proc (CLK_TCK = 100).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name in parentheses: state is field 3,
	// utime 14, stime 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return time.Duration(ut+st) * (time.Second / 100)
}

// procRSS is a process's VmRSS and VmHWM from /proc/PID/status.
func procRSS(t *testing.T, pid int) (rss, hwm int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			hwm = kb << 10
		}
	}
	return rss, hwm
}

// TestBinaryCapacityCPU runs the built stand-in with standin.capacity N
// below (N/2) and above (2N) capacity and compares its CPU per forwarded
// envelope, measured as orchestrate measures it: the process's CPU over
// the load window divided by what reached the upstream in that window.
// Above capacity the stand-in still parses and buffers every envelope it
// accepts but forwards only N/s, so its CPU per forwarded envelope must
// not fall (by half or at all, beyond noise); and the backlog's paced wait
// is a timer sleep, so the drain costs no more per envelope than below
// capacity does.
func TestBinaryCapacityCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	const (
		n      = 200.0
		window = 3 * time.Second
	)
	dir, creds := configDir(t, "placeholder")
	_, pub, err := creds.Keys()
	if err != nil {
		t.Fatal(err)
	}
	rig := newCapacityRig(t, map[string]relayauth.PublicKey{creds.ID: pub})
	port := freePort(t)
	writeFile(t, dir+"/config.yml", capacityConfig(rig.url, port, n))
	p := startBinary(t, "-c", dir, "run")
	base := "http://127.0.0.1:" + port
	p.waitReady(t, base)
	rig.warmUp(t, base)
	pid := p.cmd.Process.Pid

	type phase struct {
		cpu       time.Duration
		forwarded int64
		elapsed   time.Duration
	}
	perEnvelope := func(ph phase) time.Duration {
		return ph.cpu / time.Duration(max(ph.forwarded, 1))
	}
	measure := func(f func()) phase {
		c0, d0, t0 := procCPU(t, pid), rig.srv.DataEnvelopes(), time.Now()
		f()
		return phase{procCPU(t, pid) - c0, rig.srv.DataEnvelopes() - d0, time.Since(t0)}
	}
	rate := func(ph phase) float64 { return float64(ph.forwarded) / ph.elapsed.Seconds() }
	// load runs one blast window and says whether the machine stalled in it.
	load := func(rate float64, sent *int64, stalled *string) func() {
		return func() {
			t0 := time.Now()
			res := rig.load(t, base, rate, window)
			*sent = res.Sent
			if st := machineStall(res, window, time.Since(t0)); st != "" {
				*stalled = st
			}
		}
	}

	idle := measure(func() { time.Sleep(time.Second) })
	t.Logf("capacity %g/s; idle %s CPU in %s", n, idle.cpu, idle.elapsed.Round(time.Millisecond))
	// As in TestCapacityBacklog, up to three attempts, the next one only
	// after a stall of the machine.
	for attempt := 1; ; attempt++ {
		var (
			sent     int64
			stalled  string
			problems []string
		)
		problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
		d0 := rig.srv.DataEnvelopes()
		below := measure(load(n/2, &sent, &stalled))
		waitFor(t, 10*time.Second, "below-capacity load forwarded", func() bool { return rig.srv.DataEnvelopes()-d0 >= sent })
		time.Sleep(300 * time.Millisecond)
		d0 = rig.srv.DataEnvelopes()
		rss0, _ := procRSS(t, pid)
		above := measure(load(2*n, &sent, &stalled))
		rss1, _ := procRSS(t, pid)
		drain := measure(func() {
			waitFor(t, 30*time.Second, "the backlog forwarded", func() bool { return rig.srv.DataEnvelopes()-d0 >= sent })
		})
		for _, x := range []struct {
			name string
			ph   phase
		}{{"below (N/2 offered)", below}, {"above (2N offered)", above}, {"drain after above", drain}} {
			t.Logf("%-20s forwarded %5d in %6s = %4.0f/s, CPU %6s, %s per forwarded envelope",
				x.name, x.ph.forwarded, x.ph.elapsed.Round(time.Millisecond), rate(x.ph), x.ph.cpu, perEnvelope(x.ph).Round(time.Microsecond))
		}
		_, hwm := procRSS(t, pid)
		t.Logf("RSS %.1f MB before the 2N load, %.1f MB at its end (backlog %d), peak %.1f MB", float64(rss0)/1e6, float64(rss1)/1e6, sent-above.forwarded, float64(hwm)/1e6)

		if r := rate(above); r < 0.85*n || r > 1.15*n {
			problem("offered 2N: forwarded %.0f/s, want %g/s ±15%%", r, n)
		}
		if below.cpu < 50*time.Millisecond {
			problem("below capacity the stand-in used only %s CPU: too little to compare", below.cpu)
		}
		if perEnvelope(above) < perEnvelope(below)/2 {
			problem("CPU per forwarded envelope fell from %s below capacity to %s above", perEnvelope(below), perEnvelope(above))
		}
		if perEnvelope(drain) > perEnvelope(below)*3/2 {
			problem("draining the backlog cost %s per envelope, below capacity %s: the paced wait burns CPU", perEnvelope(drain), perEnvelope(below))
		}
		if len(problems) == 0 {
			break
		}
		if stalled != "" && attempt < 3 {
			t.Logf("attempt %d: %s while %s; trying again", attempt, strings.Join(problems, "; "), stalled)
			continue
		}
		for _, p := range problems {
			t.Error(p)
		}
		break
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	log := p.stderr.String()
	var accepted, processed int64
	if !strings.Contains(log, "processing capacity 200 envelopes/s") {
		t.Errorf("log lacks the capacity line:\n%s", log)
	}
	if i := strings.LastIndex(log, "shut down in "); i < 0 {
		t.Errorf("log lacks the shutdown line:\n%s", log)
	} else if _, err := fmt.Sscanf(log[strings.Index(log[i:], "; ")+i:], "; %d envelopes accepted, %d processed", &accepted, &processed); err != nil || accepted == 0 || processed != accepted {
		t.Errorf("shutdown line: accepted %d, processed %d (%v):\n%s", accepted, processed, err, log[i:])
	}
}
