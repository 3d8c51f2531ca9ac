package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
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

// step is one build measured at one rate. runStep runs its phases in
// order (phases); each fills its part of the Step and returns an error that
// ends the step. What a phase leaves for the later ones is in the fields
// below, grouped by the phase that sets them. close undoes whatever was
// started, whichever phase ended it. The measured window's readings are in
// window.go, the drain loop in drain.go, the step's figures in collect.go.
type step struct {
	r       *runner
	cfg     *Config
	st      *Step
	build   Build
	harness bool

	parent context.Context // the run's: its end is an interrupt
	ctx    context.Context // also ends when Relay exits under the step
	cancel context.CancelCauseFunc

	dir string // "work dir"

	up     *upstream.Server // "fake upstream"
	target string           // where blast sends: the fake upstream, then Relay ("relay start")

	// "relay start"
	proc     *relayproc.Process
	stopping atomic.Bool
	stopped  bool
	grace    time.Duration // SIGTERM → SIGKILL
	selfRSS  uint64        // orchestrate's RSS when Relay was started

	sampler *relayproc.Sampler // "sampler"

	// "measured window"
	watch      watch
	blastStart time.Time
	atBlast    relayproc.Sample // sampler reading at blast's start
	sent       atomic.Int64     // blast's requests so far (the status line's rate)
	res        *blast.Result
	blastEnd   time.Time
	faults     faultWatch

	atDrainEnd relayproc.Sample // "drain"
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
	r.prog.beginStep(s)
	defer r.prog.endStep(s)
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
		r.prog.phase(s, ph.name)
		err := ph.run()
		if err == nil {
			err = s.logErr()
		}
		if err != nil {
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
	return append(s.startPhases(),
		phase{"measured window", s.measure},
		phase{"drain", s.drain},
		phase{"shutdown", s.stop},
	)
}

// startPhases start the step's fake upstream and Relay, warm them up and
// measure Relay's idle CPU: what a comparison in slices runs once per build.
func (s *step) startPhases() []phase {
	return []phase{
		{"work dir", s.makeDir},
		{"fake upstream", s.startUpstream},
		{"relay start", s.startRelay},
		{"sampler", s.startSampler},
		{"warm-up", s.warmUp},
		{"idle", s.measureIdle},
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

// logErr is an error once Relay's log could not be written (a full disk):
// what Relay said, an error among it, is lost, so the step fails.
func (s *step) logErr() error {
	if s.proc == nil {
		return nil
	}
	if err := s.proc.LogErr(); err != nil {
		return fmt.Errorf("writing Relay's log failed: %w", err)
	}
	return nil
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
	if s.up != nil {
		s.up.Close()
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

// startUpstream starts a fresh fake upstream on a free loopback port.
func (s *step) startUpstream() error {
	filters := s.cfg.InboundFilters
	if s.build.InboundFilters != nil {
		filters = *s.build.InboundFilters
	}
	up, err := upstream.Start(upstream.Config{
		Addr:     net.JoinHostPort(s.cfg.Host, "0"),
		Projects: s.r.projects, VerifySignatures: !s.harness, AllowList: !s.harness, Seed: s.cfg.Seed,
		Quotas: s.cfg.Quotas, InboundFilters: filters,
	})
	if err != nil {
		return fmt.Errorf("fake upstream: %w", err)
	}
	s.up = up
	s.target = up.URL
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
	statsdAddr := s.cfg.StatsD
	if s.r.statsd != nil {
		statsdAddr = s.r.statsd.Addr()
	}
	conf := relayconfig.Merge(relayconfig.Default(relayconfig.Options{
		Upstream: s.up.URL + "/", Host: s.cfg.Host, LogLevel: s.cfg.RelayLogLevel,
		Threads: s.r.threads, StatsD: statsdAddr,
	}), s.cfg.RelayConfig)
	conf = relayconfig.Merge(conf, s.build.RelayConfig)
	host, port := relayAddr(conf, s.cfg.Host)
	if port == 0 {
		// A free port in the family Relay listens in: a port free on
		// 127.0.0.1 need not be on ::1.
		if port, err = freePort(host); err != nil {
			return fmt.Errorf("relay port: %w", err)
		}
		conf = relayconfig.Merge(conf, relayconfig.Config{"relay": map[string]any{"port": port}})
	}
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
		MaxInflight: cfg.MaxInflight, Timeout: cfg.Timeout, Grace: blastGrace, Sent: &s.sent,
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
	if err := s.check(); err != nil {
		return err
	}
	if err := s.alive(); err != nil {
		return err // a dead Relay refuses too: say it died
	}
	return unreachable(res, s.target)
}

// unreachable is an error when blast never reached target: not one request
// got an answer and every one failed to connect (refused, or an error of
// no known class such as an address blast could not dial). That is a
// failed step with its reason, never a Relay that did not keep up: an
// overloaded Relay answers late, resets or times out, but a listening
// socket does not refuse.
func unreachable(res *blast.Result, target string) error {
	if res.Sent == 0 || res.OK > 0 || len(res.ByStatus) > 0 {
		return nil
	}
	var n int64
	var why []string
	for _, c := range []string{blast.ClassRefused, blast.ClassOther} {
		n += res.Errors[c]
		if msg := res.ErrorSamples[c]; msg != "" {
			why = append(why, fmt.Sprintf("%s: %s", c, msg))
		}
	}
	if n != res.Sent {
		return nil
	}
	return fmt.Errorf("blast could not reach %s: none of the %d requests got an answer (%s)", target, res.Sent, strings.Join(why, "; "))
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

// drain waits until forwarding and outcomes settle, then takes the last
// readings of Relay's memory and the StatsD figures.
func (s *step) drain() error {
	s.r.logf("  drain")
	s.st.Drain = s.r.drain(s.ctx, s.up, s.r.dataAccepted(s.res, s.st.OK, s.st.warmOK), s.harness, s.blastEnd)
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
	for _, p := range res.Strays {
		s.st.Shutdown.Strays = append(s.st.Shutdown.Strays, p.String())
	}
	if n := len(res.Strays); n > 0 {
		s.r.note(fmt.Sprintf("step %d (%s at %s): %d process(es) Relay started still ran outside its process group after it was gone (a daemon): %s; orchestrate ended them",
			s.st.Index, s.build.Name, rateLabel(s.st.Rate), n, strings.Join(s.st.Shutdown.Strays, ", ")))
	}
	if n := s.proc.LogDiscarded(); n > 0 {
		s.st.Notes = append(s.st.Notes, fmt.Sprintf("Relay's log passed its cap of %s: its oldest %s were dropped; relay.log.1 and relay.log hold the rest",
			mib(relayproc.DefaultLogMax), mib(uint64(n))))
	}
	stopTotals(s.st, res, s.treeMembers())
}

// freePort is a TCP port free on host.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// relayAddr reads relay.host and relay.port back from the merged config
// (overrides may have changed them): the address to reach Relay at, which
// is def when Relay listens on every address, and the port (0 if unset).
func relayAddr(c relayconfig.Config, def string) (string, int) {
	host := def
	if h, ok := relayconfig.Lookup(c, "relay", "host"); ok {
		if s, ok := h.(string); ok && s != "" && s != "0.0.0.0" && s != "::" {
			host = s
		}
	}
	var port int
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
