package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/internal/profile"
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

// shutdownMargin is how much longer than Relay's own limits.shutdown_timeout
// orchestrate waits after SIGTERM before it sends SIGKILL: Relay waits that
// whole timeout before it exits (relay-system's Controller), so a grace no
// longer than it never measures a shutdown.
const shutdownMargin = 5 * time.Second

// errRelayExited cancels a step's context when Relay dies under it.
var errRelayExited = errors.New("relay exited")

// upPoint is the fake upstream's forwarded (data) envelopes at one moment.
type upPoint struct {
	at        time.Time
	envelopes int64
}

// step is one build measured at one rate. runStep runs its phases in
// order; each fills its part of the Step and returns an error that ends
// the step. close undoes whatever was started, whichever phase ended it.
type step struct {
	r       *runner
	cfg     *Config
	st      *Step
	build   Build
	harness bool
	dir     string

	parent context.Context // the run's: its end is an interrupt
	ctx    context.Context // also ends when Relay exits under the step
	cancel context.CancelCauseFunc

	up     *upstream.Server
	srv    upstream.Serving
	origin string // the fake upstream
	target string // where blast sends: Relay, or the fake upstream

	proc     *relayproc.Process
	stopping atomic.Bool
	stopped  bool
	grace    time.Duration // SIGTERM → SIGKILL
	selfRSS  uint64        // orchestrate's RSS when Relay was started
	sampler  *relayproc.Sampler

	// The measured window and the drain.
	watch      watch
	blastStart time.Time
	atBlast    relayproc.Sample // sampler reading at blast's start
	res        *blast.Result
	blastEnd   time.Time
	atDrainEnd relayproc.Sample
	faults     faultWatch
}

func newStep(ctx context.Context, r *runner, st *Step, b Build) *step {
	s := &step{r: r, cfg: &r.cfg, st: st, build: b, harness: b.Bin == "", parent: ctx, grace: r.cfg.ShutdownTimeout}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	return s
}

// runStep measures build b at st.Rate. It never panics on a Relay failure:
// the step is marked failed with the reason and Relay's log tail.
func (r *runner) runStep(ctx context.Context, st *Step, b Build) {
	st.Started = time.Now()
	st.LoadAvg[0] = relayproc.LoadAvg1()
	s := newStep(ctx, r, st, b)
	defer func() {
		s.close()
		st.Took = time.Since(st.Started)
		if st.Took > 0 && st.Elapsed > 0 {
			st.OutsideWindow = 100 * (1 - st.Elapsed.Seconds()/st.Took.Seconds())
		}
		st.LoadAvg[1] = relayproc.LoadAvg1()
		if n := loadNote(st.LoadAvg, runtime.NumCPU()); n != "" {
			st.Notes = append(st.Notes, n)
		}
		if ctx.Err() != nil && !st.Failed {
			st.Verdict, st.Reasons = VerdictInterrupted, []string{"interrupted"}
		}
	}()
	for _, ph := range s.phases() {
		if err := ph.run(); err != nil {
			s.fail(ph.name, err)
			if s.res != nil {
				// Failed or interrupted after blast ran: keep what was
				// measured, judged by nobody (interrupted: marked partial).
				s.collect()
				st.Partial = ctx.Err() != nil
			}
			return
		}
	}
	s.collect()
	judge(st, r.cfg, s.harness)
}

type phase struct {
	name string
	run  func() error
}

// phases are a step's phases, in order.
func (s *step) phases() []phase {
	return []phase{
		{"work dir", s.makeDir},
		{"fake upstream", s.startUpstream},
		{"relay start", s.startRelay},
		{"sampler", s.startSampler},
		{"warm-up", s.warmUp},
		{"idle", s.measureIdle},
		{"measured window", s.measure},
		{"drain", s.drain},
		{"shutdown", s.stop},
	}
}

// fail ends the step after phase name returned err: failed, unless the run
// was interrupted (the deferred verdict says so then).
func (s *step) fail(name string, err error) {
	if s.parent.Err() != nil {
		return
	}
	s.st.Failed, s.st.Verdict = true, VerdictFailed
	if errors.Is(err, errRelayExited) {
		s.st.Error = fmt.Sprintf("%v during the %s", err, name)
	} else {
		s.st.Error = err.Error()
	}
	if s.proc != nil {
		s.st.LogTail = s.proc.LogTail(logTailLines)
	}
}

// check is the step context's error: the run's interrupt, or Relay's exit.
func (s *step) check() error { return context.Cause(s.ctx) }

// close stops whatever is still running: sampling, Relay (quickly when
// interrupted), the fake upstream.
func (s *step) close() {
	s.watch.stop()
	grace := s.grace
	if s.parent.Err() != nil {
		grace = interruptGrace
	}
	s.stopRelay(grace)
	if s.srv != nil {
		s.srv.Close()
	}
	s.cancel(nil)
}

func (s *step) makeDir() error {
	st := s.st
	s.dir = filepath.Join(s.r.root, fmt.Sprintf("%03d-%s-r%d-%s", st.Index, s.build.Name, st.Round, rateName(st.Rate)))
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("step dir: %w", err)
	}
	if s.cfg.Keep {
		st.Dir = s.dir
	}
	return nil
}

// forwardBatchPeriod is how long a Relay forward waits, answered, for its
// checks and counting (upstream.Config.BatchForwards) in a step with a
// fault, whose watch reads the upstream's counts at 10 Hz during the
// window.
const forwardBatchPeriod = 100 * time.Millisecond

// forwardHold bounds the memory in which the fake upstream holds Relay's
// forwards through a step's measured window (upstream.Config.HoldForwards):
// each held forward counts its body (3.7 KB on average with the default
// mix) plus 512 bytes, so at 800/s over the default 32 s of warm-up and
// window the hold counts about 105 MiB. Half full (128 MiB: about 1,000/s
// at the default durations) it is checked during the window, and the step
// says so.
const forwardHold = 256 << 20

// hold is the fake upstream's hold of Relay's forwards in the step: none
// when the watch reads counts during the window (a fault), or when there is
// no Relay to forward (the harness).
func (s *step) hold() int64 {
	if s.cfg.Fault != nil || s.harness {
		return 0
	}
	return forwardHold
}

// startUpstream starts a fresh fake upstream on a free loopback port.
func (s *step) startUpstream() error {
	up, err := upstream.New(upstream.Config{
		Projects: s.r.projects, VerifySignatures: !s.harness, AllowList: !s.harness, Seed: s.cfg.Seed,
		Quotas: s.cfg.Quotas, InboundFilters: s.cfg.InboundFilters, VerifyEnvelopeEvery: s.cfg.VerifyEnvelopeEvery,
		// Relay's forwards checked in batches cost the harness less, and
		// held until the window ends they cost it nothing inside the window
		// (docs/harness-cost.md); every count is complete when read. A step
		// with a fault reads counts during the window (the fault report).
		BatchForwards: forwardBatchPeriod,
		HoldForwards:  s.hold(),
	})
	if err != nil {
		return fmt.Errorf("fake upstream: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fake upstream listen: %w", err)
	}
	s.up = up
	// fasthttp: the fake upstream shares the CPUs with Relay, and costs
	// less on it (docs/harness-cost.md).
	if s.srv, err = up.ServeWith(upstream.FastHTTP, ln, nil); err != nil {
		ln.Close()
		return fmt.Errorf("fake upstream: %w", err)
	}
	s.origin = "http://" + ln.Addr().String()
	s.target = s.origin
	return nil
}

// startRelay writes Relay's config dir (fresh credentials, registered with
// the fake upstream), starts Relay and waits until it is ready. Without a
// Relay (the harness) blast sends straight to the fake upstream.
func (s *step) startRelay() error {
	if s.harness {
		return nil
	}
	creds, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	_, pub, err := creds.Keys()
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	s.up.RegisterRelay(creds.ID, pub)
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("relay port: %w", err)
	}
	statsdAddr := s.cfg.StatsD
	if s.r.statsd != nil {
		statsdAddr = s.r.statsd.Addr()
	}
	conf := relayconfig.Merge(relayconfig.Default(relayconfig.Options{
		Upstream: s.origin + "/", Host: "127.0.0.1", Port: port, LogLevel: s.cfg.RelayLogLevel,
		Threads: s.r.threads, StatsD: statsdAddr,
	}), s.cfg.RelayConfig)
	host, port := relayAddr(conf, port)
	s.grace = max(s.cfg.ShutdownTimeout, relayconfig.ShutdownTimeout(conf)+shutdownMargin)
	cfgDir := filepath.Join(s.dir, "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		return fmt.Errorf("config dir: %w", err)
	}
	if err := relayconfig.Write(cfgDir, conf, creds); err != nil {
		return err
	}
	if self, err := relayproc.NewSampler(os.Getpid()); err == nil {
		if smp, err := self.Read(); err == nil {
			s.selfRSS = smp.RSS
		}
	}
	s.proc, err = relayproc.Start(relayproc.Spec{
		Bin: s.build.Bin, Args: []string{"-c", cfgDir, "run"}, CPUs: s.cfg.RelayCPUs,
		LogPath: filepath.Join(s.dir, "relay.log"),
	})
	if err != nil {
		return err
	}
	s.target = "http://" + net.JoinHostPort(host, strconv.Itoa(port))
	ready, err := s.proc.WaitReady(s.ctx, s.target+"/api/relay/healthcheck/ready/", ReadyPoll, s.cfg.ReadyTimeout)
	if err != nil {
		return fmt.Errorf("relay did not become ready: %w", err)
	}
	s.st.ReadyAfter = ready
	proc := s.proc
	go func() {
		select {
		case <-proc.Done():
			if !s.stopping.Load() {
				_, how := proc.Exited()
				s.cancel(fmt.Errorf("%w: %s", errRelayExited, how))
			}
		case <-s.ctx.Done():
		}
	}()
	return nil
}

// alive is nil while Relay runs (or there is none).
func (s *step) alive() error {
	if s.proc == nil {
		return nil
	}
	if ok, how := s.proc.Exited(); ok && !s.stopping.Load() {
		return fmt.Errorf("%w: %s", errRelayExited, how)
	}
	return nil
}

// startSampler prepares to sample Relay's process tree (a wrapper script
// and the Relay it runs: see relayproc.NewTreeSampler) or, for the
// harness, orchestrate itself from procfs.
func (s *step) startSampler() error {
	var err error
	if s.proc != nil {
		s.sampler, err = relayproc.NewTreeSampler(s.proc.PID())
	} else {
		s.sampler, err = relayproc.NewSampler(os.Getpid())
	}
	if err != nil {
		return err
	}
	if s.harness {
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
		if err := s.sampler.ResetPeakRSS(); err != nil {
			s.st.Notes = append(s.st.Notes, "peak RSS covers the whole run so far: "+err.Error())
		}
	}
	return nil
}

// warmUp sends one envelope per project and waits (bounded) until every
// config was served and data forwarded.
func (s *step) warmUp() error {
	s.r.logf("  warm-up")
	s.st.Warm = s.r.warmUp(s.ctx, s.up, s.target, s.harness, s.alive)
	if err := s.check(); err != nil {
		return err
	}
	if err := s.alive(); err != nil {
		return err
	}
	if !s.st.Warm.Complete {
		s.r.note(fmt.Sprintf("step %d (%s at %s): %s", s.st.Index, s.build.Name, rateLabel(s.st.Rate), s.st.Warm.Note))
	}
	return nil
}

// measureIdle measures Relay's CPU with no load.
func (s *step) measureIdle() error {
	if s.cfg.Idle <= 0 {
		return nil
	}
	s.r.logf("  idle %s", s.cfg.Idle)
	a, err := s.sampler.Read()
	if err != nil {
		return nil // the process is gone: the next phase says why
	}
	sleepCtx(s.ctx, s.cfg.Idle)
	if err := s.check(); err != nil {
		return err
	}
	if b, err := s.sampler.Read(); err == nil {
		s.st.CPU.IdleCores = relayproc.Cores(a, b)
	}
	return nil
}

// measure runs blast over the warm-up and the measured window while the
// watch samples Relay at 10 Hz; perf, the fault and the StatsD window
// start when the measured window does.
func (s *step) measure() error {
	st, cfg := s.st, s.cfg
	blastCtx, stopBlast := context.WithCancel(s.ctx)
	defer stopBlast()
	var rssLimit uint64
	if !s.harness {
		rssLimit = cfg.MaxRelayRSS
	}
	// Second 0 of the upstream's arrival timeline is blast's start.
	s.reserveHold()
	s.up.ResetStats()
	s.atBlast, _ = s.sampler.Read()
	s.blastStart = time.Now()
	counts := s.up // the fault report's series
	if cfg.Fault == nil {
		counts = nil
	}
	s.watch.start(s.sampler, counts, cfg.SampleInterval, rssLimit, func(rss uint64, after time.Duration) {
		st.StoppedEarly = fmt.Sprintf("Relay's RSS passed %s (%.1f MiB) %.1f s after blast started; blast was stopped there",
			mib(rssLimit), float64(rss)/(1<<20), after.Seconds())
		stopBlast()
	})
	w := s.openWindow()
	defer w.close()

	bc := blast.Config{
		Target: s.target, Pool: s.r.pool, Rate: st.Rate, Duration: cfg.Duration, Warmup: cfg.Warmup,
		MaxInflight: cfg.MaxInflight, Timeout: cfg.Timeout, Grace: blastGrace,
	}
	if st.Rate == RateMax {
		bc.Concurrency = cfg.Concurrency
		st.Concurrency = cfg.Concurrency
		s.r.logf("  blast as fast as possible (%d senders) for %s after %s warm-up", cfg.Concurrency, cfg.Duration, cfg.Warmup)
	} else {
		s.r.logf("  blast %g/s for %s after %s warm-up", st.Rate, cfg.Duration, cfg.Warmup)
	}
	res, err := blast.Run(blastCtx, bc)
	s.blastEnd = time.Now()
	w.close()
	if err != nil {
		return fmt.Errorf("blast: %w", err)
	}
	s.res = res
	s.fillLoad(res)
	return s.check()
}

// window is what starts with the measured window (after blast's warm-up):
// the CPU readings of Relay and of orchestrate itself (the harness, whose
// CPU is CPU Relay could not use), the StatsD reset and perf; and the
// fault at its offset. close ends it and fills the step's window CPU.
type window struct {
	s      *step
	self   *relayproc.Sampler // orchestrate; nil for the harness (it is s.sampler)
	timers []*time.Timer

	mu              sync.Mutex
	relayA, selfA   relayproc.Sample
	relayOK, selfOK bool
	perf            *perfRun
	harnessPerf     *perfRun // orchestrate itself (Config.PerfHarness)
	closed          bool
}

func (s *step) openWindow() *window {
	w := &window{s: s}
	if !s.harness {
		w.self, _ = relayproc.NewSampler(os.Getpid())
	}
	w.timers = append(w.timers, time.AfterFunc(s.cfg.Warmup, w.begin))
	if f := s.cfg.Fault; f != nil {
		w.timers = append(w.timers,
			time.AfterFunc(s.cfg.Warmup+f.Start, func() { s.faults.begin(s.up, f) }),
			time.AfterFunc(s.cfg.Warmup+f.Start+f.Duration, func() { s.faults.end(s.up) }))
	}
	return w
}

// read takes a reading of Relay and of orchestrate.
func (w *window) read() (relay, self relayproc.Sample, relayOK, selfOK bool) {
	relay, err := w.s.sampler.Read()
	relayOK = err == nil
	if w.self != nil {
		self, err = w.self.Read()
		selfOK = err == nil
	}
	return relay, self, relayOK, selfOK
}

func (w *window) begin() {
	s := w.s
	relay, self, relayOK, selfOK := w.read()
	w.mu.Lock()
	w.relayA, w.selfA, w.relayOK, w.selfOK = relay, self, relayOK, selfOK
	w.mu.Unlock()
	if s.r.statsd != nil {
		s.r.statsd.Reset()
	}
	if s.r.perf == nil {
		return
	}
	file := s.r.perfFile(s.st)
	var wg sync.WaitGroup
	if s.cfg.PerfHarness {
		// perf takes a while to attach: both start at once.
		wg.Go(func() {
			w.startPerf(s.r.perf.startHarness, []int{os.Getpid()}, harnessPerfFile(file), &s.st.HarnessPerf, &w.harnessPerf)
		})
	}
	w.startPerf(s.r.perf.start, s.sampler.PIDs(), file, &s.st.Perf, &w.perf)
	wg.Wait()
}

// startPerf records pids into file: the running recording goes to *run, or
// the record of a failed (or too late) start to *rec.
func (w *window) startPerf(start func([]int, string) (*perfRun, error), pids []int, file string, rec **PerfRecord, run **perfRun) {
	p, err := start(pids, file)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		*rec = &PerfRecord{File: file, Note: err.Error()}
	case w.closed: // the step ended while perf started
		*rec = p.stop(500 * time.Millisecond)
	default:
		*run = p
	}
}

// close stops the timers, perf and the fault, and sets the window's CPU;
// it may be called more than once.
func (w *window) close() {
	for _, t := range w.timers {
		t.Stop()
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	relayB, selfB, relayOK, selfOK := w.read()
	w.mu.Lock()
	p, hp := w.perf, w.harnessPerf
	w.perf, w.harnessPerf = nil, nil
	cpu := &w.s.st.CPU
	if w.relayOK && relayOK {
		cpu.LoadCores = relayproc.Cores(w.relayA, relayB)
		cpu.NetCores = cpu.LoadCores - cpu.IdleCores
	}
	if w.selfOK && selfOK {
		cpu.HarnessCores = relayproc.Cores(w.selfA, selfB)
		cpu.windowSecs = (selfB.At - w.selfA.At).Seconds()
		if cpu.LoadCores > 0 {
			cpu.HarnessShare = 100 * cpu.HarnessCores / cpu.LoadCores
		}
	}
	w.mu.Unlock()
	grace := 3 * time.Second
	if w.s.parent.Err() != nil {
		grace = 500 * time.Millisecond
	}
	if p != nil {
		w.s.st.Perf = p.stop(grace)
	}
	if hp != nil {
		w.s.st.HarnessPerf = hp.stop(grace)
	}
	w.s.faults.end(w.s.up)
}

// fillLoad copies blast's figures into the step.
func (s *step) fillLoad(res *blast.Result) {
	st := s.st
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
	st.warmOK = max(st.warmOK-res.OK, 0)
}

// reserveHold has the fake upstream map the memory its hold will take in
// the step (upstream.Server.ReserveHold): blast's envelopes over the warm-up
// and the window, each forward taking a third of the pool's mean envelope
// (Relay's zstd forwards of the default mix average 3.7 KB for 14 KB sent;
// the warm-up's forwards are smaller than the window's), at least 1 KiB.
// A hold that needs more maps it as it fills.
func (s *step) reserveHold() {
	if s.hold() == 0 || s.st.Rate == RateMax {
		return
	}
	n := int(s.st.Rate*(s.cfg.Warmup+s.cfg.Duration).Seconds()*1.1) + 64
	mean := int64(1 << 10)
	if ps := s.r.pool.Stats(); ps.Entries > 0 {
		mean = max(mean, ps.RawBytes/int64(ps.Entries)/3)
	}
	s.up.ReserveHold(n, int64(n)*mean)
}

// checkHeld has the fake upstream check the forwards it held through the
// window, and counts the harness's CPU for it. Without a hold, or without a
// reading of orchestrate's CPU, the drain's first read of the counts checks
// them.
func (s *step) checkHeld() {
	if s.hold() == 0 {
		return
	}
	self, err := relayproc.NewSampler(os.Getpid())
	if err != nil {
		return
	}
	a, errA := self.Read()
	s.up.CheckForwards()
	b, errB := self.Read()
	if errA != nil || errB != nil {
		return
	}
	cpu := &s.st.CPU
	cpu.HarnessHeldSecs = math.Round((b.CPU-a.CPU)*1000) / 1000 // /proc's ticks, without float noise
	if cpu.LoadCores > 0 && cpu.windowSecs > 0 {
		cpu.HarnessShareWithHeld = 100 * (cpu.HarnessCores + cpu.HarnessHeldSecs/cpu.windowSecs) / cpu.LoadCores
	}
}

// drain waits until forwarding and outcomes settle, then takes the last
// readings of Relay's memory and the StatsD figures.
func (s *step) drain() error {
	s.r.logf("  drain")
	s.checkHeld()
	s.st.Drain = s.r.drain(s.ctx, s.up, s.st.OK+s.st.warmOK, s.harness, s.blastEnd)
	if err := s.check(); err != nil {
		return err
	}
	var err error
	if s.atDrainEnd, err = s.sampler.Read(); err != nil {
		return s.alive() // gone: say how
	}
	if peak, err := s.sampler.PeakRSS(); err == nil {
		// The kernel's high-water mark can lag a reading taken just before
		// it (seen with the stand-in: VmHWM one page below the RSS read
		// before it, after memory was given back): no peak below a reading.
		peak = max(peak, s.atDrainEnd.RSS)
		smp, _ := s.sampler.Samples()
		for _, x := range smp {
			peak = max(peak, x.RSS)
		}
		s.st.Memory.PeakRSS = peak
	}
	s.st.Memory.EndRSS = s.atDrainEnd.RSS
	if s.r.statsd != nil {
		s.st.StatsD, s.st.StatsDCounters = s.r.statsdFigures()
	}
	s.watch.stop()
	return nil
}

// stop sends Relay SIGTERM and times its exit (SIGKILL after the grace).
func (s *step) stop() error {
	s.stopRelay(s.grace)
	st := &s.st.Memory
	if s.harness {
		st.RusageMaxRSS = 0 // orchestrate's own process: no exit
		return nil
	}
	if ru, hwm := st.RusageMaxRSS, st.PeakRSS; ru > 0 && hwm > 0 && s.treeMembers() == 1 {
		// getrusage also covers shutdown and the pre-exec image, which is
		// orchestrate's own memory (see relayproc.StopResult.MaxRSS): it
		// may exceed VmHWM by that much, and is never below it.
		const slack = 4 << 20
		switch {
		case ru+slack < hwm:
			s.st.Notes = append(s.st.Notes, fmt.Sprintf("getrusage peak RSS %s is below VmHWM %s: one of them is wrong", mib(ru), mib(hwm)))
		case ru > max(hwm, s.selfRSS)+slack:
			s.st.Notes = append(s.st.Notes, fmt.Sprintf("Relay's RSS grew to %s after the last VmHWM reading (%s), during the shutdown", mib(ru), mib(hwm)))
		}
	}
	return nil
}

func (s *step) stopRelay(grace time.Duration) {
	if s.proc == nil || s.stopped {
		return
	}
	s.stopping.Store(true)
	res := s.proc.Stop(grace)
	s.stopped = true
	s.st.Shutdown = Shutdown{Took: res.Took, Killed: res.Killed, Exit: res.Exit}
	stopTotals(s.st, res, s.treeMembers())
}

// collect turns what the phases recorded into the step's figures: what
// reached the upstream, the per-second series and the steady state, the
// true cost per envelope, the 10 Hz series and the fault's effect.
func (s *step) collect() {
	st := s.st
	final := s.up.Stats()
	accepted := st.OK + st.warmOK
	st.Upstream = UpstreamSeen{
		Envelopes: final.Envelopes, Forwarded: final.DataEnvelopes, ItemsByType: final.ItemsByType,
		Gap: accepted - final.DataEnvelopes, Outcomes: final.Outcomes.Rows, Requests: final.Requests,
		Errors: final.Errors, Canaries: final.Canaries, Signatures: final.Signatures,
		BatchedForwards: final.BatchedForwards,
	}
	smp, _ := s.sampler.Samples()
	samplesAt := s.blastStart.Sub(s.sampler.Start())
	end := int(s.atDrainEnd.At-samplesAt+time.Second-1) / int(time.Second)
	st.Seconds = secondsSeries(end, s.res.Windows, s.res.Start, final.Timeline, smp, samplesAt)
	loss := 0.0
	if st.Drain.Settled && accepted > 0 && st.Upstream.Gap > 0 {
		loss = float64(st.Upstream.Gap) / float64(accepted)
	}
	from, to := windowSeconds(s.res)
	if to-from < 2 && st.StoppedEarly != "" {
		// Stopped before the measured window had two whole seconds (a
		// Relay that buffers everything passes the RSS bound fast): judge
		// what was sent, warm-up included.
		from, to = 0, int((s.res.Warmup+s.res.Elapsed)/time.Second)
		st.Notes = append(st.Notes, fmt.Sprintf("blast stopped %.1f s after it started, before the measured window had two whole seconds: the steady-state figures cover seconds 0–%d, blast's warm-up included",
			(s.res.Warmup+s.res.Elapsed).Seconds(), to))
	}
	st.Steady = steadyState(st.Seconds, from, to, loss, smp, samplesAt)
	if st.StoppedEarly != "" && st.Steady.Seconds > 0 {
		st.AcceptedRate = st.Steady.AcceptedRate
		var sent int64
		for _, p := range st.Seconds[from:to] {
			sent += p.Sent
		}
		st.AchievedRate = float64(sent) / float64(to-from)
	}
	if st.Drain.Settled {
		st.Steady.CatchUp = st.Drain.LastForward
	}
	st.CPU.MsPerEnv, st.CPU.CostSpan, st.CPU.CostCPUSecs, st.CPU.CostEnvelopes = trueCost(s.atBlast, s.atDrainEnd, st.CPU.IdleCores, final.DataEnvelopes)
	if n := costBelowIdle(st.CPU); n != "" {
		st.Notes = append(st.Notes, n)
	}
	if n := st.Upstream.BatchedForwards.FailedAfterAnswer; n > 0 {
		st.Notes = append(st.Notes, fmt.Sprintf("%d of Relay's forwards failed the fake upstream's checks after it had answered them 200 (their bodies, and in a hold their headers but for the relay's registration, are checked after the answer); they are in the upstream's errors by reason", n))
	}
	if n := st.Upstream.BatchedForwards.HoldFull; n > 0 {
		st.Notes = append(st.Notes, fmt.Sprintf("the fake upstream's hold of Relay's forwards (%d MiB) filled half way %d times, and those forwards were checked during the measured window: the harness's CPU in it includes their checks", forwardHold>>20, n))
	}
	st.Series, st.CPU.PeakCores = series(smp, samplesAt)
	for i := 1; i < len(smp); i++ {
		st.Stall = max(st.Stall, smp[i].At-smp[i-1].At)
	}
	if st.Perf != nil && st.Perf.Exit == "ok" && s.r.perf != nil && s.parent.Err() == nil {
		s.r.logf("  reading the perf recording back")
		s.r.perf.analyze(s.parent, st.Perf, fmt.Sprintf("%s at %s (step %d)", s.build.Name, rateLabel(st.Rate), st.Index), profile.DefaultGroups())
	}
	if hp := st.HarnessPerf; hp != nil && hp.Exit == "ok" && s.parent.Err() == nil {
		s.r.logf("  reading the harness's perf recording back")
		s.r.perf.analyze(s.parent, hp, fmt.Sprintf("the harness at %s (step %d)", rateLabel(st.Rate), st.Index), harnessGroups())
		if hp.Profile != nil {
			if n := tooFewHarnessSamples(hp.Profile, st.CPU.HarnessCores, s.cfg.Duration.Seconds(), hp.Event); n != "" {
				st.Notes = append(st.Notes, n)
			} else {
				st.CPU.HarnessSplit = splitHarness(hp.Profile, st.CPU.HarnessCores)
			}
		}
	}
	if s.cfg.Fault != nil {
		st.Fault = s.faults.report(s.cfg.Fault, s.watch.forwarded(), s.res, s.res.Start.Add(s.res.Warmup), accepted)
	}
}

// windowSeconds is the measured window in whole seconds since blast's
// start: from the first second after the warm-up to the last whole second.
func windowSeconds(res *blast.Result) (from, to int) {
	from = int((res.Warmup + time.Second - 1) / time.Second)
	to = int((res.Warmup + res.Elapsed) / time.Second)
	return from, max(to, from)
}

// NoteCostBelowIdle begins the note a step carries when Relay used no more
// CPU under load than at idle.
const NoteCostBelowIdle = "Relay used no more CPU under load than at idle"

// costBelowIdle is the note for a step whose load CPU over the cost span
// was no more than its idle reading ("" otherwise): idle CPU is read over a
// short window in 10 ms ticks, and at a low rate Relay's load falls within
// that error, which makes the cost per envelope zero or negative.
func costBelowIdle(c CPU) string {
	if c.CostEnvelopes == 0 || c.CostSpan <= 0 || c.CostCPUSecs > 0 {
		return ""
	}
	secs := c.CostSpan.Seconds()
	return fmt.Sprintf(NoteCostBelowIdle+" (%.3f cores over %.1f s, idle %.3f): the cost per envelope (%.2f ms) is within the idle reading's error; lengthen --duration or --idle",
		c.CostCPUSecs/secs+c.IdleCores, secs, c.IdleCores, c.MsPerEnv)
}

// trueCost is CPU per forwarded envelope from blast's start (a) until
// forwarding settled (b), with idle CPU subtracted.
func trueCost(a, b relayproc.Sample, idleCores float64, forwarded int64) (ms float64, span time.Duration, cpu float64, n int64) {
	span = b.At - a.At
	if span <= 0 || b.CPU == 0 {
		return 0, 0, 0, forwarded
	}
	cpu = b.CPU - a.CPU - idleCores*span.Seconds()
	if forwarded > 0 {
		ms = cpu * 1000 / float64(forwarded)
	}
	return ms, span, cpu, forwarded
}

// watch samples Relay (CPU and RSS) and the upstream's forwarded count at
// the sampling interval from blast's start to the drain's end, and calls
// over once when Relay's RSS passes the limit (0: no limit). With up nil it
// reads no counts (they would check the forwards the upstream holds).
type watch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	fwd []upPoint
}

func (w *watch) start(smp *relayproc.Sampler, up *upstream.Server, interval time.Duration, limit uint64, over func(rss uint64, after time.Duration)) {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	start := time.Now()
	tripped := false
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		smp.Run(ctx, interval, func(s relayproc.Sample) {
			if up != nil {
				w.mu.Lock()
				w.fwd = append(w.fwd, upPoint{time.Now(), up.DataEnvelopes()})
				w.mu.Unlock()
			}
			if limit > 0 && s.RSS > limit && !tripped {
				tripped = true
				over(s.RSS, time.Since(start))
			}
		})
	}()
}

// stop ends sampling; it may be called more than once.
func (w *watch) stop() {
	if w.cancel != nil {
		w.cancel()
		w.wg.Wait()
	}
}

// forwarded is the forwarded-envelopes series taken so far.
func (w *watch) forwarded() []upPoint {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]upPoint(nil), w.fwd...)
}

// drain waits until the upstream's forwarded envelopes and outcomes have
// not moved for a settle period (and, for the harness, every accepted
// envelope arrived), at most DrainTimeout. LastForward is when data last
// arrived, from blastEnd.
func (r *runner) drain(ctx context.Context, up *upstream.Server, accepted int64, harness bool, blastEnd time.Time) Drain {
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
	var lastEnv, lastData, lastOut int64 = -1, -1, -1
	lastChange := time.Now()
	var d Drain
	for {
		s := up.Stats()
		var out int64
		for _, n := range s.Outcomes.ByOutcome {
			out += n
		}
		now := time.Now()
		if s.DataEnvelopes != lastData {
			if lastData >= 0 {
				d.LastForward = now.Sub(blastEnd)
			}
			lastData = s.DataEnvelopes
		}
		if s.Envelopes != lastEnv || out != lastOut {
			lastEnv, lastOut, lastChange = s.Envelopes, out, now
		}
		d.Took = now.Sub(start)
		if harness && s.DataEnvelopes >= accepted || now.Sub(lastChange) >= settle {
			d.Settled = true
			return d
		}
		select {
		case <-ctx.Done():
			return d
		case <-deadline.C:
			d.Took = time.Since(start)
			return d
		case <-tick.C:
		}
	}
}

// series turns samples into chart points: seconds since blast started,
// RSS in MiB, and cores over each sampling interval. It also returns the
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
			peak = max(peak, relayproc.Cores(smp[j], s))
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

// rateName is a rate in file names: "300", "max".
func rateName(r float64) string {
	if r == RateMax {
		return "max"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// rateLabel is a rate in sentences: "300/s", "max".
func rateLabel(r float64) string {
	if r == RateMax {
		return "max rate"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}

// mib formats bytes as MiB (or GiB from 1 GiB on).
func mib(b uint64) string {
	if b >= 1<<30 {
		return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB"
}
