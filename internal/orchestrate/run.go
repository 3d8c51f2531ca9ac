package orchestrate

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/replay"
	"github.com/relayload/relayload/internal/statsd"
	"github.com/relayload/relayload/projects"
)

// runner is the state of one Run.
type runner struct {
	cfg      Config
	root     string
	projects []projects.Project
	pool     *pool.Pool
	threads  int
	perf     *perfPlan
	statsd   *statsd.Receiver
	nSteps   int // planned steps (for perf file names)
	// kindShare is each kind's share of a replayed pool's entries (nil for a
	// generated pool): what the warm-up, not counted by kind, sent of it.
	kindShare map[pool.Kind]float64

	mu    sync.Mutex
	notes []string
	logMu sync.Mutex // a comparison in slices starts its two builds at once

	prog *tracker // nil without Config.Progress
}

func (r *runner) logf(format string, a ...any) {
	if r.cfg.Log != nil {
		r.logMu.Lock()
		defer r.logMu.Unlock()
		fmt.Fprintf(r.cfg.Log, format+"\n", a...)
	}
}

func (r *runner) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.notes, s) {
		r.notes = append(r.notes, s)
	}
}

// Run runs the sweep and returns the report. When ctx ends it stops every
// child quickly and returns the partial report with Interrupted set and
// ctx's error. A bad config returns a *ConfigError (it wraps ErrConfig)
// and no report. Failed steps do not stop the sweep; Report.Failed counts
// them.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	r, err := newRunner(cfg)
	if err != nil {
		return nil, err
	}
	stopProgress := r.prog.run()
	defer stopProgress()
	harnessCPUs, restore, err := r.pinHarness()
	if err != nil {
		return nil, err
	}
	defer restore()
	rep := r.newReport(harnessCPUs)
	defer func() {
		rep.Finished = time.Now()
		rep.Notes = append(rep.Notes, r.notes...)
	}()
	for _, k := range relayconfig.UnknownSections(r.cfg.RelayConfig) {
		r.note("the Relay config overrides' " + relayconfig.UnknownSection(k))
	}
	if err := r.probeVersions(ctx); err != nil {
		rep.Interrupted = true
		return rep, err
	}
	cleanup, err := r.prepare(ctx, rep)
	defer cleanup()
	if err != nil {
		if ctx.Err() != nil {
			rep.Interrupted = true
			return rep, ctx.Err()
		}
		return nil, err
	}
	r.sweep(ctx, rep)
	rep.Interrupted = ctx.Err() != nil
	summarize(rep, r.cfg)
	if rep.Interrupted {
		return rep, ctx.Err()
	}
	return rep, nil
}

// newRunner validates cfg and checks the builds are executables.
func newRunner(cfg Config) (*runner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	r := &runner{cfg: cfg, prog: newTracker(cfg, time.Now())}
	for _, b := range cfg.Builds {
		if b.Bin == "" {
			continue
		}
		if st, err := os.Stat(b.Bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, configerr.Errorf("Builds", "build %s: %s is not an executable file", b.Name, b.Bin)
		}
	}
	if cfg.RelayCPUs != "" {
		r.threads, _ = CountCPUs(cfg.RelayCPUs)
	}
	return r, nil
}

// probeVersions asks each build for its version (bounded: see
// relayproc.ProbeVersion); the error is ctx's when it ended meanwhile.
// The report's builds share r.cfg.Builds' array, so they show the versions.
func (r *runner) probeVersions(ctx context.Context) error {
	for i, b := range r.cfg.Builds {
		if b.Bin == "" {
			continue
		}
		v, strays, err := relayproc.ProbeVersion(ctx, b.Bin, versionTimeout)
		if len(strays) > 0 {
			r.note(fmt.Sprintf("build %s, asked for its version, left %d process(es) running outside its process group (a daemon): %s; orchestrate ended them",
				b.Name, len(strays), joinStrays(strays)))
		}
		if err != nil {
			return err
		}
		r.cfg.Builds[i].Version = v
		if !strings.HasPrefix(v, "relay ") {
			// Relay answers --version with "relay <version>" (26.4.0: "relay 26.4.0").
			r.note(fmt.Sprintf("build %s answers --version with %q, not \"relay <version>\": it may not be Relay, and its figures may not be Relay's", b.Name, v))
		}
	}
	return nil
}

// joinStrays lists processes ended as "pid N (command), …".
func joinStrays(strays []relayproc.Stray) string {
	s := make([]string, len(strays))
	for i, p := range strays {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// agentsFrom names where Config.Agents came from ("" without them).
func agentsFrom(cfg Config) string {
	switch {
	case len(cfg.Agents) == 0:
		return ""
	case cfg.AgentsFrom == "":
		return "a list"
	}
	return cfg.AgentsFrom
}

// newReport starts the report with what shapes the numbers.
func (r *runner) newReport(harnessCPUs string) *Report {
	cfg := r.cfg
	rep := &Report{Started: time.Now(), Harness: cfg.Harness(), Host: hostInfo(), KeptUpWith: map[string]float64{}}
	rep.Setup = Setup{
		Builds: cfg.Builds, Rates: cfg.Rates, Rounds: cfg.Rounds, FindMax: cfg.FindMax,
		Duration: cfg.Duration, Warmup: cfg.Warmup, Idle: cfg.Idle, Seed: cfg.Seed, Projects: cfg.Projects,
		PoolSize: cfg.PoolSize, UserAgents: cfg.UserAgents, UniqueUserAgents: cfg.UniqueUserAgents,
		UserAgentsFrom: agentsFrom(cfg), Encoding: string(cfg.Encoding), RelayCPUs: cfg.RelayCPUs, HarnessCPUs: harnessCPUs, Fault: cfg.Fault, RelayConfig: cfg.RelayConfig,
		StatsDMetrics: cfg.StatsDMetrics, HarnessProcs: runtime.GOMAXPROCS(0), HarnessSysmon: sysmonState(),
	}
	if cfg.Slices {
		rep.Setup.Slice, rep.Setup.Precision, rep.Setup.Budget = cfg.Slice, cfg.Precision, cfg.Budget
	}
	if rep.Setup.Encoding == "" {
		rep.Setup.Encoding = string(compression.Identity)
	}
	return rep
}

// prepare sets up what every step shares: perf, the StatsD receiver, the
// work directory, the projects and the pool. cleanup undoes it (also after
// an error).
func (r *runner) prepare(ctx context.Context, rep *Report) (cleanup func(), err error) {
	cfg := r.cfg
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if cfg.Perf != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.Perf), 0o755); err != nil {
			return cleanup, configerr.Wrap("Perf", err)
		}
		if r.perf, err = preparePerf(ctx, cfg.CallGraph); err != nil {
			return cleanup, err
		}
		for _, n := range r.perf.notes {
			r.note(n)
		}
	}
	if cfg.StatsDListen != "" {
		// Relay 26.4.0's exporter (metrics-exporter-dogstatsd, aggressive
		// aggregation) sends what it aggregated every 10 s or so.
		r.note("Relay aggregates its StatsD metrics and sends them about every 10 s: the StatsD figures cover what arrived during the measured window and the drain, not its last seconds")
		if r.statsd, err = statsd.Listen(ctx, cfg.StatsDListen); err != nil {
			return cleanup, configerr.Wrap("StatsDListen", err)
		}
		undo = append(undo, func() { r.statsd.Close() })
	}
	var stale []string
	if r.root, stale, err = makeWorkDir(cfg.WorkDir, cfg.Keep); err != nil {
		return cleanup, err
	}
	for _, d := range stale {
		r.logf("removed %s: the work directory of an earlier run that did not end", d)
	}
	if cfg.Keep {
		r.note("work directory kept: " + r.root)
	} else {
		root := r.root
		undo = append(undo, func() { os.RemoveAll(root) })
	}
	if r.projects, err = projects.Generate(cfg.Seed, cfg.Projects); err != nil {
		return cleanup, configerr.Wrap("Projects", err)
	}
	if cfg.Corpus != nil {
		sum := cfg.Corpus.Summary()
		r.logf("building a pool of %d envelopes from %s (%d files; seed %d, %d projects)", cfg.PoolSize, cfg.Corpus, sum.Files, cfg.Seed, cfg.Projects)
		r.pool, err = replay.Build(ctx, cfg.Corpus, pool.Options{
			Seed: cfg.Seed, Size: cfg.PoolSize, Projects: r.projects, Encoding: cfg.Encoding,
		})
		if err != nil {
			return cleanup, configerr.Wrap("PoolSize", err)
		}
		rep.Setup.Corpus = &sum
		r.kindShare = kindShares(r.pool)
	} else {
		r.logf("building a pool of %d envelopes (seed %d, %d projects)", cfg.PoolSize, cfg.Seed, cfg.Projects)
		opts := pool.Options{
			Seed: cfg.Seed, Size: cfg.PoolSize, Mix: cfg.Mix, Projects: r.projects,
			UserAgents: cfg.UserAgents, UniqueUserAgents: cfg.UniqueUserAgents, Agents: cfg.Agents, AgentsFrom: agentsFrom(cfg),
			Encoding: cfg.Encoding,
		}
		if note := opts.AgentsNote(); note != "" {
			r.logf("%s", note)
		}
		r.pool, err = pool.Build(ctx, opts)
		if err != nil {
			return cleanup, configerr.Wrap("PoolSize", err)
		}
		rep.Setup.Mix = r.pool.Options.Mix.String()
		rep.Setup.UserAgents = r.pool.Options.UserAgents
	}
	ps := r.pool.Stats()
	rep.Setup.PoolBytes = map[string]int64{"raw": ps.RawBytes, "encoded": ps.EncodedBytes}
	return cleanup, nil
}

// sweep runs the steps: the bisection with FindMax, else every rate of
// every round, builds alternating.
func (r *runner) sweep(ctx context.Context, rep *Report) {
	cfg := r.cfg
	run := func(b Build, round int, rate float64, probe bool) *Step {
		return r.step(ctx, rep, b, round, rate, probe)
	}
	if cfg.FindMax {
		r.nSteps = len(cfg.Builds) * cfg.FindMaxProbes
		r.prog.plan(r.nSteps, true)
		for _, b := range cfg.Builds {
			if ctx.Err() != nil {
				return
			}
			rep.FindMax = append(rep.FindMax, r.findMax(ctx, b, run))
		}
		return
	}
	if cfg.Slices {
		budget := cfg.Budget / time.Duration(len(cfg.Rates))
		for i, rate := range cfg.Rates {
			if ctx.Err() != nil {
				return
			}
			r.prog.beginRate(budget, budget*time.Duration(len(cfg.Rates)-1-i))
			if c := r.compareSlices(ctx, rep, rate, budget); strings.HasPrefix(c.Ended, "failed") {
				rep.Failed++
			}
		}
		return
	}
	r.nSteps = len(cfg.Builds) * len(cfg.Rates) * cfg.Rounds
	r.prog.plan(r.nSteps, false)
	for round := 1; round <= cfg.Rounds; round++ {
		for _, rate := range cfg.Rates {
			// Alternate the order of builds from round to round, so that
			// drift of the machine affects each build alike.
			order := slices.Clone(cfg.Builds)
			if round%2 == 0 {
				slices.Reverse(order)
			}
			for _, b := range order {
				if ctx.Err() != nil {
					return
				}
				run(b, round, rate, false)
			}
		}
	}
}

// step runs one step, adds it to the report and logs how it went.
func (r *runner) step(ctx context.Context, rep *Report, b Build, round int, rate float64, probe bool) *Step {
	st := &Step{Index: len(rep.Steps) + 1, Build: b.Name, Round: round, Rate: rate, Probe: probe}
	rep.Steps = append(rep.Steps, st)
	r.logf("step %d: %s, round %d, %s", st.Index, b.Name, round, rateLabel(rate))
	if r.cfg.onStep != nil {
		r.cfg.onStep(st, false)
		defer r.cfg.onStep(st, true)
	}
	r.runStep(ctx, st, b)
	if st.Verdict == VerdictInterrupted {
		r.logf("  interrupted")
		return st
	}
	if st.Failed {
		rep.Failed++
		r.logf("  FAILED: %s", st.Error)
		if st.LogTail != "" {
			r.logf("  relay log tail:\n%s", indent(st.LogTail, "    | "))
		}
		return st
	}
	proc := "Relay"
	if b.Bin == "" {
		proc = "harness"
	}
	line := fmt.Sprintf("  %s: sent %.0f/s, accepted %.0f/s, forwarded %.0f/s, p99 %.1f ms, %s CPU %.3f cores (%.3f ms per envelope), peak RSS %s",
		st.Verdict, st.AchievedRate, st.AcceptedRate, st.Steady.ForwardedRate, st.Latency.P99, proc, st.CPU.NetCores, st.CPU.MsPerEnv,
		mib(st.Memory.PeakRSS))
	if len(st.Reasons) > 0 {
		line += ": " + strings.Join(st.Reasons, "; ")
	}
	r.logf("%s", line)
	return st
}

// pinHarness keeps orchestrate (blast, fake upstream) off Relay's CPUs:
// it pins every thread to HarnessCPUs, or to the CPUs Relay does not use,
// and sets GOMAXPROCS to match. restore undoes both.
func (r *runner) pinHarness() (cpus string, restore func(), err error) {
	restore = func() {}
	if r.cfg.HarnessCPUs == "none" {
		return "", restore, nil
	}
	if r.cfg.RelayCPUs == "" && r.cfg.HarnessCPUs == "" {
		if !r.cfg.Harness() && os.Getenv("GOMAXPROCS") == "" {
			// Sharing the CPUs with Relay, the harness runs on one P:
			// fewer threads spin and wake each other, so it takes less of
			// the CPU Relay could use at the same rate (a step's
			// cpu.harness_cores) and still delivers high and closed-loop
			// rates.
			prev := runtime.GOMAXPROCS(1)
			return "", func() { runtime.GOMAXPROCS(prev) }, nil
		}
		return "", restore, nil
	}
	self := os.Getpid()
	allowed, err := relayproc.Affinity(self)
	if err != nil {
		return "", restore, err
	}
	inAllowed := func(list []int, what string) error {
		for _, c := range list {
			if !slices.Contains(allowed, c) {
				return configerr.Errorf(what, "CPU %d is not available (allowed: %s)", c, relayproc.FormatCPUList(allowed))
			}
		}
		return nil
	}
	relay, _ := relayproc.ParseCPUList(r.cfg.RelayCPUs)
	if err := inAllowed(relay, "RelayCPUs"); r.cfg.RelayCPUs != "" && err != nil {
		return "", restore, err
	}
	var harness []int
	if r.cfg.HarnessCPUs != "" {
		harness, _ = relayproc.ParseCPUList(r.cfg.HarnessCPUs)
		if err := inAllowed(harness, "HarnessCPUs"); err != nil {
			return "", restore, err
		}
	} else {
		for _, c := range allowed {
			if !slices.Contains(relay, c) {
				harness = append(harness, c)
			}
		}
		if len(harness) == 0 {
			r.note("Relay's CPUs are all the CPUs there are: blast and the fake upstream share them with Relay")
			return "", restore, nil
		}
	}
	if err := relayproc.PinProcess(self, harness); err != nil {
		return "", restore, err
	}
	prev := runtime.GOMAXPROCS(len(harness))
	return relayproc.FormatCPUList(harness), func() {
		_ = relayproc.PinProcess(self, allowed)
		runtime.GOMAXPROCS(prev)
	}, nil
}

// perfFile is the perf output path for a step: Config.Perf for a one-step
// run, else with "-<build>-r<round>-<rate>" before the extension.
func (r *runner) perfFile(st *Step) string {
	if r.nSteps <= 1 {
		return r.cfg.Perf
	}
	ext := filepath.Ext(r.cfg.Perf)
	base := strings.TrimSuffix(r.cfg.Perf, ext)
	return fmt.Sprintf("%s-%s-r%d-%g%s", base, st.Build, st.Round, st.Rate, ext)
}

// statsdFigures reads the --statsd-metric values from the receiver. A name
// is looked up as given, then with and without Relay's "sentry.relay." prefix.
func (r *runner) statsdFigures() (map[string]Quantiles, map[string]float64) {
	snap := r.statsd.Snapshot()
	timers, counters := map[string]Quantiles{}, map[string]float64{}
	for _, name := range r.cfg.StatsDMetrics {
		for _, cand := range []string{name, "sentry.relay." + name, strings.TrimPrefix(name, "sentry.relay.")} {
			if q, ok := snap.Timers[cand]; ok {
				timers[name] = Quantiles{P50: q.P50, P90: q.P90, P99: q.P99, Max: q.Max}
				break
			}
			if v, ok := snap.Counters[cand]; ok {
				counters[name] = v
				break
			}
		}
	}
	return timers, counters
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
