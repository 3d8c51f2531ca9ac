package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/blast"
	"github.com/relayload/relayload/orchestrate/relayconfig"
	"github.com/relayload/relayload/orchestrate/relayproc"
	"github.com/relayload/relayload/relayauth"
	"github.com/relayload/relayload/upstream"
)

// interruptGrace bounds each stop after an interrupt, so that every child is
// gone within 2 s of SIGINT.
const interruptGrace = 700 * time.Millisecond

// blastGrace is how long a cancelled blast waits for requests in flight.
const blastGrace = 300 * time.Millisecond

// logTailLines is how much of Relay's log a failed step shows.
const logTailLines = 20

// errRelayExited cancels a step's context when Relay dies under it.
var errRelayExited = errors.New("relay exited")

// upPoint is the fake upstream's forwarded count at one moment.
type upPoint struct {
	at        time.Time
	envelopes int64
}

// runStep measures build b at st.Rate. It never panics on a Relay failure:
// the step is marked failed with the reason and Relay's log tail.
func (r *runner) runStep(ctx context.Context, st *Step, b Build) {
	st.Started = time.Now()
	st.LoadAvg[0] = relayproc.LoadAvg1()
	defer func() {
		st.Took = time.Since(st.Started)
		st.LoadAvg[1] = relayproc.LoadAvg1()
		if ctx.Err() != nil && !st.Failed {
			st.Verdict, st.Reasons = VerdictInterrupted, []string{"interrupted"}
		}
	}()
	fail := func(format string, a ...any) {
		st.Failed = true
		st.Verdict = VerdictFailed
		st.Error = fmt.Sprintf(format, a...)
	}
	harness := b.Bin == ""

	dir := filepath.Join(r.root, fmt.Sprintf("%03d-%s-r%d-%s", st.Index, b.Name, st.Round, strconv.FormatFloat(st.Rate, 'f', -1, 64)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("step dir: %v", err)
		return
	}
	if r.cfg.Keep {
		st.Dir = dir
	}

	// 1. A fresh fake upstream on a free loopback port.
	up, err := upstream.New(upstream.Config{Projects: r.projects, VerifySignatures: !harness, AllowList: !harness, Seed: r.cfg.Seed})
	if err != nil {
		fail("fake upstream: %v", err)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("fake upstream listen: %v", err)
		return
	}
	srv := &http.Server{Handler: up.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	origin := "http://" + ln.Addr().String()
	target := origin

	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// 2.–3. Relay: config dir, process, readiness.
	var (
		proc     *relayproc.Process
		stopping atomic.Bool
		stopped  bool
	)
	stopRelay := func(grace time.Duration) {
		if proc == nil || stopped {
			return
		}
		stopping.Store(true)
		res := proc.Stop(grace)
		stopped = true
		st.Shutdown = Shutdown{Took: res.Took, Killed: res.Killed, Exit: res.Exit}
		st.Memory.RusageMaxRSS = res.MaxRSS
		st.CPU.UserSecs, st.CPU.SystemSecs = res.UserTime.Seconds(), res.SystemTime.Seconds()
	}
	defer func() {
		grace := r.cfg.ShutdownTimeout
		if ctx.Err() != nil {
			grace = interruptGrace
		}
		stopRelay(grace)
	}()
	pid := os.Getpid()
	var selfRSS uint64 // orchestrate's RSS when Relay was started
	alive := func() error { return nil }
	if !harness {
		creds, err := relayauth.GenerateCredentials(nil)
		if err != nil {
			fail("credentials: %v", err)
			return
		}
		_, pub, err := creds.Keys()
		if err != nil {
			fail("credentials: %v", err)
			return
		}
		up.RegisterRelay(creds.ID, pub)
		port, err := freePort()
		if err != nil {
			fail("relay port: %v", err)
			return
		}
		statsdAddr := r.cfg.StatsD
		if r.statsd != nil {
			statsdAddr = r.statsd.Addr()
		}
		conf := relayconfig.Merge(relayconfig.Default(relayconfig.Options{
			Upstream: origin + "/", Host: "127.0.0.1", Port: port, LogLevel: r.cfg.RelayLogLevel,
			Threads: r.threads, StatsD: statsdAddr,
		}), r.cfg.RelayConfig)
		host, port := relayAddr(conf, port)
		cfgDir := filepath.Join(dir, "config")
		if err := os.MkdirAll(cfgDir, 0o755); err != nil {
			fail("config dir: %v", err)
			return
		}
		if err := relayconfig.Write(cfgDir, conf, creds); err != nil {
			fail("%v", err)
			return
		}
		if self, err := relayproc.NewSampler(os.Getpid()); err == nil {
			if smp, err := self.Read(); err == nil {
				selfRSS = smp.RSS
			}
		}
		proc, err = relayproc.Start(relayproc.Spec{
			Bin: b.Bin, Args: []string{"-c", cfgDir, "run"}, CPUs: r.cfg.RelayCPUs,
			LogPath: filepath.Join(dir, "relay.log"),
		})
		if err != nil {
			fail("%v", err)
			return
		}
		pid = proc.PID()
		target = "http://" + net.JoinHostPort(host, strconv.Itoa(port))
		ready, err := proc.WaitReady(stepCtx, target+"/api/relay/healthcheck/ready/", ReadyPoll, r.cfg.ReadyTimeout)
		if err != nil {
			if ctx.Err() == nil {
				fail("relay did not become ready: %v", err)
				st.LogTail = proc.LogTail(logTailLines)
			}
			return
		}
		st.ReadyAfter = ready
		go func() {
			select {
			case <-proc.Done():
				if !stopping.Load() {
					_, how := proc.Exited()
					cancel(fmt.Errorf("%w: %s", errRelayExited, how))
				}
			case <-stepCtx.Done():
			}
		}()
		alive = func() error {
			if ok, how := proc.Exited(); ok && !stopping.Load() {
				return fmt.Errorf("%w: %s", errRelayExited, how)
			}
			return nil
		}
	}
	relayDied := func() bool {
		if err := context.Cause(stepCtx); errors.Is(err, errRelayExited) {
			fail("%v during the step", err)
			st.LogTail = proc.LogTail(logTailLines)
			return true
		}
		return false
	}

	sampler, err := relayproc.NewSampler(pid)
	if err != nil {
		fail("%v", err)
		return
	}
	if harness {
		// orchestrate's own high-water mark covers earlier steps and the
		// pool build; start afresh for this step. Collect first, and give
		// the freed pages back: the heap is mostly the pool (long-lived),
		// so the GC runs about once per 80 MB allocated, i.e. once per
		// several steps at 1000/s, and the garbage of earlier steps
		// (and their upstream's and blast's sync.Pools, which outlive one
		// collection) would otherwise be in this step's RSS, growing
		// step after step at the same rate. Two collections: the first
		// moves sync.Pool contents to their victim caches, FreeOSMemory's
		// drops them and returns the pages.
		runtime.GC()
		debug.FreeOSMemory()
		if err := sampler.ResetPeakRSS(); err != nil {
			st.Notes = append(st.Notes, "peak RSS covers the whole run so far: "+err.Error())
		}
	}

	// 4. Warm-up.
	r.logf("  warm-up")
	st.Warm = r.warmUp(stepCtx, up, target, harness, alive)
	if relayDied() || ctx.Err() != nil {
		return
	}
	if !st.Warm.Complete {
		r.note(fmt.Sprintf("step %d (%s at %g/s): %s", st.Index, b.Name, st.Rate, st.Warm.Note))
	}
	up.ResetStats()

	// 5. Idle CPU.
	if r.cfg.Idle > 0 {
		r.logf("  idle %s", r.cfg.Idle)
		a, err := sampler.Read()
		if err == nil {
			sleepCtx(stepCtx, r.cfg.Idle)
			if relayDied() || ctx.Err() != nil {
				return
			}
			if b2, err := sampler.Read(); err == nil {
				st.CPU.IdleCores = relayproc.Cores(a, b2)
			}
		}
	}

	// 6. Measured window: blast, 10 Hz sampling, perf, fault, statsd.
	sampCtx, stopSampling := context.WithCancel(context.Background())
	var sampWG sync.WaitGroup
	sampWG.Add(2)
	go func() { defer sampWG.Done(); sampler.Run(sampCtx, r.cfg.SampleInterval) }()
	var (
		upMu     sync.Mutex
		upSeries []upPoint
	)
	go func() {
		defer sampWG.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			s := up.Stats()
			upMu.Lock()
			upSeries = append(upSeries, upPoint{time.Now(), s.Envelopes})
			upMu.Unlock()
			select {
			case <-sampCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	defer func() { stopSampling(); sampWG.Wait() }()

	blastStart := time.Now()
	windowStart := blastStart.Add(r.cfg.Warmup)
	var (
		winMu    sync.Mutex
		winA     relayproc.Sample
		winAOK   bool
		perfProc *perfRun
		faultObs faultWatch
	)
	timers := []*time.Timer{time.AfterFunc(r.cfg.Warmup, func() {
		s, err := sampler.Read()
		winMu.Lock()
		winA, winAOK = s, err == nil
		winMu.Unlock()
		if r.statsd != nil {
			r.statsd.Reset()
		}
		if r.perf != nil {
			p, err := r.perf.start(pid, r.perfFile(st))
			winMu.Lock()
			if err != nil {
				st.Perf = &PerfRecord{File: r.perfFile(st), Note: err.Error()}
			} else {
				perfProc = p
			}
			winMu.Unlock()
		}
	})}
	if f := r.cfg.Fault; f != nil {
		timers = append(timers, time.AfterFunc(r.cfg.Warmup+f.Start, func() { faultObs.begin(up, f) }))
		timers = append(timers, time.AfterFunc(r.cfg.Warmup+f.Start+f.Duration, func() { faultObs.end(up) }))
	}
	stopPerf := func() {
		winMu.Lock()
		p := perfProc
		perfProc = nil
		winMu.Unlock()
		if p != nil {
			grace := 3 * time.Second
			if ctx.Err() != nil {
				grace = 500 * time.Millisecond
			}
			st.Perf = p.stop(grace)
		}
	}
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
		stopPerf()
	}()

	r.logf("  blast %g/s for %s after %s warm-up", st.Rate, r.cfg.Duration, r.cfg.Warmup)
	res, err := blast.Run(stepCtx, blast.Config{
		Target: target, Pool: r.pool, Rate: st.Rate, Duration: r.cfg.Duration, Warmup: r.cfg.Warmup,
		MaxInflight: r.cfg.MaxInflight, Timeout: r.cfg.Timeout, Grace: blastGrace,
	})
	winB, errB := sampler.Read()
	for _, t := range timers {
		t.Stop()
	}
	stopPerf()
	faultObs.end(up)
	if err != nil {
		fail("blast: %v", err)
		return
	}
	r.fillLoad(st, res)
	winMu.Lock()
	if winAOK && errB == nil {
		st.CPU.LoadCores = relayproc.Cores(winA, winB)
		st.CPU.NetCores = st.CPU.LoadCores - st.CPU.IdleCores
		if st.AcceptedRate > 0 {
			st.CPU.MsPerEnv = st.CPU.NetCores * 1000 / st.AcceptedRate
		}
	}
	winMu.Unlock()
	if relayDied() || ctx.Err() != nil {
		return
	}

	// 7. Drain: until forwarded counts and outcomes stop moving (bounded).
	r.logf("  drain")
	accepted := st.OK + st.warmupOK(res)
	st.Drain = r.drain(stepCtx, up, accepted, harness)
	if relayDied() || ctx.Err() != nil {
		return
	}
	if peak, err := sampler.PeakRSS(); err == nil {
		st.Memory.PeakRSS = peak
	}
	if s, err := sampler.Read(); err == nil {
		st.Memory.EndRSS = s.RSS
	}
	if r.statsd != nil {
		st.StatsD, st.StatsDCounters = r.statsdFigures()
	}
	stopSampling()
	sampWG.Wait()
	stopRelay(r.cfg.ShutdownTimeout)
	if harness {
		st.Memory.RusageMaxRSS = 0 // orchestrate's own process: no exit
	} else if ru, hwm := st.Memory.RusageMaxRSS, st.Memory.PeakRSS; ru > 0 && hwm > 0 {
		// getrusage also covers shutdown and the pre-exec image, which is
		// orchestrate's own memory (see relayproc.StopResult.MaxRSS): it
		// may exceed VmHWM by that much, and is never below it.
		const slack = 4 << 20
		switch {
		case ru+slack < hwm:
			st.Notes = append(st.Notes, fmt.Sprintf("getrusage peak RSS %.1f MB is below VmHWM %.1f MB: one of them is wrong",
				float64(ru)/(1<<20), float64(hwm)/(1<<20)))
		case ru > max(hwm, selfRSS)+slack:
			st.Notes = append(st.Notes, fmt.Sprintf("Relay's RSS grew to %.1f MB after the last VmHWM reading (%.1f MB), during the shutdown",
				float64(ru)/(1<<20), float64(hwm)/(1<<20)))
		}
	}

	final := up.Stats()
	st.Upstream = UpstreamSeen{
		Envelopes: final.Envelopes, ItemsByType: final.ItemsByType, Gap: accepted - final.Envelopes,
		Outcomes: final.Outcomes.Rows, Requests: final.Requests, Errors: final.Errors, Leaks: final.Canaries.Leaks,
	}
	smp, _ := sampler.Samples()
	st.Series, st.CPU.PeakCores = series(smp, blastStart.Sub(sampler.Start()))
	for i := 1; i < len(smp); i++ {
		st.Stall = max(st.Stall, smp[i].At-smp[i-1].At)
	}
	upMu.Lock()
	ups := append([]upPoint(nil), upSeries...)
	upMu.Unlock()
	if r.cfg.Fault != nil {
		st.Fault = faultObs.report(r.cfg.Fault, ups, res, windowStart, accepted)
	}
	judge(st, r.cfg, harness)
}

// fillLoad copies blast's figures into the step.
func (r *runner) fillLoad(st *Step, res *blast.Result) {
	st.Sent, st.OK, st.Dropped, st.WarmupSent = res.Sent, res.OK, res.Dropped, res.WarmupSent
	st.Failures = res.Sent - res.OK
	st.Elapsed = res.Elapsed
	st.AchievedRate = res.AchievedRate()
	if res.Elapsed > 0 {
		st.AcceptedRate = float64(res.OK) / res.Elapsed.Seconds()
	}
	st.ByStatus = map[string]int64{}
	for code, n := range res.ByStatus {
		st.ByStatus[strconv.Itoa(code)] = n
	}
	st.Errors = res.Errors
	q := func(p float64) float64 { return res.Latency.QuantileMillis(p) }
	if res.Latency.Count() > 0 {
		st.Latency = Quantiles{P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: q(1)}
	}
	if res.Lag.Count() > 0 {
		st.LagP99 = res.Lag.QuantileMillis(0.99)
	}
	st.BlastInvalid = res.InvalidReasons
	st.warmOK = 0
	for _, w := range res.Windows {
		st.warmOK += w.OK
	}
	st.warmOK -= res.OK
	if st.warmOK < 0 {
		st.warmOK = 0
	}
}

// warmupOK is blast's 2xx answers during its warm-up: every window's OK
// count minus the measured OK.
func (st *Step) warmupOK(*blast.Result) int64 { return st.warmOK }

// drain waits until the upstream's forwarded envelopes and outcomes have
// not moved for a settle period (and, for the harness, every accepted
// envelope arrived), at most DrainTimeout.
func (r *runner) drain(ctx context.Context, up *upstream.Server, accepted int64, harness bool) Drain {
	start := time.Now()
	settle := 1500 * time.Millisecond // aggregator.bucket_interval (1 s) plus margin for outcome buckets
	if harness {
		settle = 200 * time.Millisecond
	}
	if r.cfg.Fault != nil {
		settle = 3 * time.Second // Relay backs off after upstream failures
	}
	if r.cfg.settle > 0 {
		settle = r.cfg.settle
	}
	deadline := time.NewTimer(r.cfg.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastEnv, lastOut int64 = -1, -1
	lastChange := time.Now()
	for {
		s := up.Stats()
		var out int64
		for _, n := range s.Outcomes.ByOutcome {
			out += n
		}
		if s.Envelopes != lastEnv || out != lastOut {
			lastEnv, lastOut, lastChange = s.Envelopes, out, time.Now()
		}
		if harness && s.Envelopes >= accepted {
			return Drain{Took: time.Since(start), Settled: true}
		}
		if time.Since(lastChange) >= settle {
			return Drain{Took: time.Since(start), Settled: true}
		}
		select {
		case <-ctx.Done():
			return Drain{Took: time.Since(start)}
		case <-deadline.C:
			return Drain{Took: time.Since(start)}
		case <-tick.C:
		}
	}
}

// series turns samples into chart points: seconds since blast started,
// RSS in MB, and cores over each sampling interval. It also returns the
// highest 1 s average of cores.
func series(smp []relayproc.Sample, offset time.Duration) ([]SeriesPoint, float64) {
	out := make([]SeriesPoint, 0, len(smp))
	peak := 0.0
	j := 0
	for i, s := range smp {
		p := SeriesPoint{T: (s.At - offset).Seconds(), RSSMB: float64(s.RSS) / (1 << 20)}
		if i > 0 {
			p.Cores = relayproc.Cores(smp[i-1], s)
		}
		for j < i && s.At-smp[j].At > time.Second {
			j++
		}
		if s.At-smp[j].At >= 900*time.Millisecond {
			peak = math.Max(peak, relayproc.Cores(smp[j], s))
		}
		out = append(out, p)
	}
	return out, peak
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// relayAddr reads relay.host and relay.port back from the merged config
// (overrides may have changed them).
func relayAddr(c relayconfig.Config, port int) (string, int) {
	host := "127.0.0.1"
	if h, ok := relayconfig.Lookup(c, "relay", "host"); ok {
		if s, ok := h.(string); ok && s != "" && s != "0.0.0.0" && s != "::" {
			host = s
		}
	}
	if p, ok := relayconfig.Lookup(c, "relay", "port"); ok {
		if n, ok := p.(int); ok {
			port = n
		}
	}
	return host, port
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
