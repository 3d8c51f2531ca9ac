package orchestrate

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/orchestrate/relayproc"
	"github.com/relayload/relayload/pool"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/statsd"
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

	mu    sync.Mutex
	notes []string
}

func (r *runner) logf(format string, a ...any) {
	if r.cfg.Log != nil {
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
// ctx's error. A bad config returns an error wrapping ErrConfig and no
// report. Failed steps do not stop the sweep; Report.Failed counts them.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	for _, b := range cfg.Builds {
		if b.Bin == "" {
			continue
		}
		if st, err := os.Stat(b.Bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%w: build %s: %s is not an executable file", ErrConfig, b.Name, b.Bin)
		}
	}
	r := &runner{cfg: cfg}
	cfg.Builds = append([]Build(nil), cfg.Builds...) // the caller's slice stays as it was
	for i, b := range cfg.Builds {
		if b.Bin == "" {
			continue
		}
		cfg.Builds[i].Version = probeVersion(ctx, b.Bin)
		if strings.Contains(cfg.Builds[i].Version, "not Relay") {
			r.notes = append(r.notes, fmt.Sprintf("build %s is %q: a stand-in for tests, not Relay; its CPU and memory figures say nothing about Relay's", b.Name, cfg.Builds[i].Version))
		}
	}
	r.cfg = cfg
	if cfg.RelayCPUs != "" {
		r.threads, _ = CountCPUs(cfg.RelayCPUs)
	}
	harnessCPUs, restore, err := r.pinHarness()
	if err != nil {
		return nil, err
	}
	defer restore()
	rep := &Report{Started: time.Now(), Harness: cfg.Harness(), Host: hostInfo(), KeptUpWith: map[string]float64{}}
	rep.Setup = Setup{
		Builds: cfg.Builds, Rates: cfg.Rates, Rounds: cfg.Rounds, FindMax: cfg.FindMax,
		Duration: cfg.Duration, Warmup: cfg.Warmup, Idle: cfg.Idle, Seed: cfg.Seed, Projects: cfg.Projects,
		PoolSize: cfg.PoolSize, UserAgents: cfg.UserAgents, UniqueUserAgents: cfg.UniqueUserAgents,
		Encoding: string(cfg.Encoding), RelayCPUs: cfg.RelayCPUs, HarnessCPUs: harnessCPUs, Fault: cfg.Fault, RelayConfig: cfg.RelayConfig,
		StatsDMetrics: cfg.StatsDMetrics,
	}
	if rep.Setup.Encoding == "" {
		rep.Setup.Encoding = string(compression.Identity)
	}
	defer func() {
		rep.Finished = time.Now()
		rep.Notes = append(rep.Notes, r.notes...)
	}()

	if cfg.Perf != "" {
		r.perf, err = preparePerf(ctx, cfg.CallGraph)
		if err != nil {
			return nil, err
		}
		for _, n := range r.perf.notes {
			r.note(n)
		}
	}
	if cfg.StatsDListen != "" {
		r.statsd, err = statsd.Listen(ctx, cfg.StatsDListen)
		if err != nil {
			return nil, fmt.Errorf("%w: --statsd-listen: %v", ErrConfig, err)
		}
		defer r.statsd.Close()
	}

	r.root, err = os.MkdirTemp(cfg.WorkDir, "relayload-")
	if err != nil {
		return nil, err
	}
	if cfg.Keep {
		r.note("work directory kept: " + r.root)
	} else {
		defer os.RemoveAll(r.root)
	}

	r.projects, err = projects.Generate(cfg.Seed, cfg.Projects)
	if err != nil {
		return nil, fmt.Errorf("%w: projects: %v", ErrConfig, err)
	}
	r.logf("building a pool of %d envelopes (seed %d, %d projects)", cfg.PoolSize, cfg.Seed, cfg.Projects)
	r.pool, err = pool.Build(ctx, pool.Options{
		Seed: cfg.Seed, Size: cfg.PoolSize, Mix: cfg.Mix, Projects: r.projects,
		UserAgents: cfg.UserAgents, UniqueUserAgents: cfg.UniqueUserAgents, Encoding: cfg.Encoding,
	})
	if err != nil {
		if ctx.Err() != nil {
			rep.Interrupted = true
			return rep, ctx.Err()
		}
		return nil, fmt.Errorf("%w: pool: %v", ErrConfig, err)
	}
	rep.Setup.Mix = r.pool.Options.Mix.String()
	rep.Setup.UserAgents = r.pool.Options.UserAgents
	ps := r.pool.Stats()
	rep.Setup.PoolBytes = map[string]int64{"raw": ps.RawBytes, "encoded": ps.EncodedBytes}

	run := func(b Build, round int, rate float64, probe bool) *Step {
		st := &Step{Index: len(rep.Steps) + 1, Build: b.Name, Round: round, Rate: rate, Probe: probe}
		rep.Steps = append(rep.Steps, st)
		r.logf("step %d: %s, round %d, %g/s", st.Index, b.Name, round, rate)
		r.runStep(ctx, st, b)
		if st.Failed {
			rep.Failed++
			r.logf("  FAILED: %s", st.Error)
			if st.LogTail != "" {
				r.logf("  relay log tail:\n%s", indent(st.LogTail, "    | "))
			}
		} else {
			r.logf("  %s: sent %.0f/s, accepted %.0f/s, p99 %.1f ms, cpu %.3f cores (%.3f ms/envelope), peak RSS %.1f MB %s",
				st.Verdict, st.AchievedRate, st.AcceptedRate, st.Latency.P99, st.CPU.NetCores, st.CPU.MsPerEnv,
				float64(st.Memory.PeakRSS)/(1<<20), strings.Join(st.Reasons, "; "))
		}
		return st
	}

	if cfg.FindMax {
		r.nSteps = len(cfg.Builds) * cfg.FindMaxProbes
		for _, b := range cfg.Builds {
			if ctx.Err() != nil {
				break
			}
			rep.FindMax = append(rep.FindMax, r.findMax(ctx, b, run))
		}
	} else {
		r.nSteps = len(cfg.Builds) * len(cfg.Rates) * cfg.Rounds
	sweep:
		for round := 1; round <= cfg.Rounds; round++ {
			for _, rate := range cfg.Rates {
				// Alternate the order of builds from round to round, so
				// that drift of the machine affects each build alike.
				order := slices.Clone(cfg.Builds)
				if round%2 == 0 {
					slices.Reverse(order)
				}
				for _, b := range order {
					if ctx.Err() != nil {
						break sweep
					}
					run(b, round, rate, false)
				}
			}
		}
	}
	rep.Interrupted = ctx.Err() != nil
	summarize(rep, cfg)
	if rep.Interrupted {
		return rep, ctx.Err()
	}
	return rep, nil
}

// pinHarness keeps orchestrate (blast, fake upstream) off Relay's CPUs:
// it pins every thread to HarnessCPUs, or to the CPUs Relay does not use,
// and sets GOMAXPROCS to match. restore undoes both.
func (r *runner) pinHarness() (cpus string, restore func(), err error) {
	restore = func() {}
	if r.cfg.HarnessCPUs == "none" || r.cfg.RelayCPUs == "" && r.cfg.HarnessCPUs == "" {
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
				return fmt.Errorf("%w: %s: CPU %d is not available (allowed: %s)", ErrConfig, what, c, relayproc.FormatCPUList(allowed))
			}
		}
		return nil
	}
	relay, _ := relayproc.ParseCPUList(r.cfg.RelayCPUs)
	if err := inAllowed(relay, "--relay-cpus"); r.cfg.RelayCPUs != "" && err != nil {
		return "", restore, err
	}
	var harness []int
	if r.cfg.HarnessCPUs != "" {
		harness, _ = relayproc.ParseCPUList(r.cfg.HarnessCPUs)
		if err := inAllowed(harness, "--harness-cpus"); err != nil {
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

// findMax bisects between the two rates for the highest one b keeps up with.
func (r *runner) findMax(ctx context.Context, b Build, run func(Build, int, float64, bool) *Step) FindMax {
	lo, hi := math.Min(r.cfg.Rates[0], r.cfg.Rates[1]), math.Max(r.cfg.Rates[0], r.cfg.Rates[1])
	fm := FindMax{Build: b.Name}
	// probe runs one step; broken means the search cannot go on: the step
	// failed, was interrupted, or was harness-limited (the load asked for
	// was not delivered, so Relay was not judged).
	probe := func(rate float64) (ok, broken bool) {
		fm.Probes = append(fm.Probes, rate)
		st := run(b, 1, rate, true)
		switch {
		case ctx.Err() != nil:
			fm.Stopped = "interrupted"
		case st.Failed:
			fm.Stopped = fmt.Sprintf("the step at %g/s failed: %s", rate, st.Error)
		case st.Verdict == VerdictHarnessLimited:
			fm.Stopped = fmt.Sprintf("the step at %g/s was harness-limited (%s)", rate, strings.Join(st.Reasons, "; "))
		default:
			return st.Verdict == VerdictKeptUp, false
		}
		return false, true
	}
	ok, broken := probe(lo)
	if broken || !ok {
		if !broken {
			fm.FellBehind = lo
		}
		return fm
	}
	fm.KeptUp = lo
	ok, broken = probe(hi)
	if broken {
		return fm
	}
	if ok {
		fm.KeptUp = hi
		return fm
	}
	fm.FellBehind = hi
	for len(fm.Probes) < r.cfg.FindMaxProbes && fm.FellBehind/fm.KeptUp > 1.05 && ctx.Err() == nil {
		mid := roundRate(math.Sqrt(fm.KeptUp * fm.FellBehind)) // geometric: rates span decades
		if mid <= fm.KeptUp || mid >= fm.FellBehind {
			break
		}
		ok, broken := probe(mid)
		if broken {
			break
		}
		if ok {
			fm.KeptUp = mid
		} else {
			fm.FellBehind = mid
		}
	}
	return fm
}

// roundRate keeps two significant digits (three above 10 000).
func roundRate(x float64) float64 {
	if x <= 0 {
		return x
	}
	digits := 2.0
	if x >= 10000 {
		digits = 3
	}
	p := math.Pow(10, math.Floor(math.Log10(x))-digits+1)
	return math.Round(x/p) * p
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

func hostInfo() Host {
	h := Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}

// maxStall is the longest pause of the 10 Hz sampler that still counts as
// the harness running normally.
const maxStall = time.Second

// judge sets the step's verdict and reasons.
func judge(st *Step, cfg Config, harness bool) {
	if st.Failed {
		st.Verdict = VerdictFailed
		return
	}
	who := "Relay"
	if harness {
		who = "the fake upstream"
	}
	var behind, limited []string
	scheduled := st.Sent + st.Dropped
	if st.Dropped > 0 && float64(st.Dropped) > 0.001*float64(scheduled) {
		behind = append(behind, fmt.Sprintf("%d of %d requests could not start: %d were already in flight waiting for %s",
			st.Dropped, scheduled, st.Dropped, who))
	}
	if st.Sent > 0 && float64(st.Failures) > 0.001*float64(st.Sent) {
		behind = append(behind, fmt.Sprintf("%d of %d requests not accepted (%s)", st.Failures, st.Sent, failureDetail(st)))
	}
	if st.Latency.P99 > float64(cfg.MaxP99)/1e6 {
		behind = append(behind, fmt.Sprintf("latency p99 %.0f ms > %s", st.Latency.P99, cfg.MaxP99))
	}
	accepted := st.OK + st.warmOK
	if accepted > 0 && float64(st.Upstream.Gap) > 0.01*float64(accepted) {
		behind = append(behind, fmt.Sprintf("%d of %d accepted envelopes (%.1f%%) never reached the upstream",
			st.Upstream.Gap, accepted, 100*float64(st.Upstream.Gap)/float64(accepted)))
	}
	if !st.Drain.Settled {
		behind = append(behind, fmt.Sprintf("still forwarding %s after blast ended", st.Drain.Took.Round(time.Second)))
	}
	if st.Rate > 0 && st.AchievedRate < 0.99*st.Rate && len(behind) == 0 {
		limited = append(limited, fmt.Sprintf("blast sent %.0f/s of %.0f/s", st.AchievedRate, st.Rate))
	}
	if st.LagP99 > 5 && len(behind) == 0 {
		lag := fmt.Sprintf("blast's schedule lag p99 %.1f ms > 5 ms", st.LagP99)
		if harness && st.LagP99 <= 100 {
			// Measuring the harness, timer jitter on a busy machine is
			// not the harness failing to move the load.
			st.Notes = append(st.Notes, lag)
		} else {
			limited = append(limited, lag)
		}
	}
	if st.Stall > maxStall {
		// The sampler, blast and the fake upstream all stood still: the
		// latencies and timeouts of that step say nothing about Relay.
		reasons := []string{fmt.Sprintf("orchestrate itself got no CPU for %.1f s (machine overloaded or paused)", st.Stall.Seconds())}
		for _, b := range behind {
			reasons = append(reasons, "also: "+b)
		}
		st.Verdict, st.Reasons = VerdictHarnessLimited, reasons
		return
	}
	switch {
	case len(behind) > 0:
		st.Verdict, st.Reasons = VerdictFellBehind, behind
	case len(limited) > 0 && !harness:
		st.Verdict, st.Reasons = VerdictHarnessLimited, limited
	case len(limited) > 0:
		st.Verdict, st.Reasons = VerdictFellBehind, limited
	default:
		st.Verdict = VerdictKeptUp
	}
	if st.Warm.Note != "" && !st.Warm.Complete {
		st.Reasons = append(st.Reasons, st.Warm.Note)
	}
}

func failureDetail(st *Step) string {
	var parts []string
	for _, code := range sortedKeys(st.ByStatus) {
		if code[0] != '2' {
			parts = append(parts, fmt.Sprintf("%s×%d", code, st.ByStatus[code]))
		}
	}
	for _, class := range sortedKeys(st.Errors) {
		if n := st.Errors[class]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s×%d", class, n))
		}
	}
	return strings.Join(parts, ", ")
}

// summarize fills Summary, Comparisons and KeptUpWith from the steps.
func summarize(rep *Report, cfg Config) {
	type key struct {
		build string
		rate  float64
	}
	groups := map[key][]*Step{}
	var keys []key
	for _, st := range rep.Steps {
		if st.Verdict == VerdictInterrupted {
			continue
		}
		k := key{st.Build, st.Rate}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], st)
	}
	buildIndex := map[string]int{}
	for i, b := range cfg.Builds {
		buildIndex[b.Name] = i
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].build != keys[j].build {
			return buildIndex[keys[i].build] < buildIndex[keys[j].build]
		}
		return keys[i].rate < keys[j].rate
	})
	byKey := map[key]*Point{}
	for _, k := range keys {
		p := &Point{Build: k.build, Rate: k.rate}
		var ok []*Step
		for _, st := range groups[k] {
			p.Runs++
			if st.Failed {
				p.Failed++
				p.Reasons = append(p.Reasons, "failed: "+st.Error)
				continue
			}
			ok = append(ok, st)
			if st.Verdict == VerdictKeptUp {
				p.KeptUp++
			} else {
				for _, r := range st.Reasons {
					if !slices.Contains(p.Reasons, r) {
						p.Reasons = append(p.Reasons, r)
					}
				}
			}
		}
		med := func(f func(*Step) float64) float64 {
			v := make([]float64, len(ok))
			for i, st := range ok {
				v[i] = f(st)
			}
			return Median(v)
		}
		spread := func(f func(*Step) float64) float64 {
			v := make([]float64, len(ok))
			for i, st := range ok {
				v[i] = f(st)
			}
			return Spread(v)
		}
		if len(ok) > 0 {
			p.AchievedRate = med(func(s *Step) float64 { return s.AchievedRate })
			p.AcceptedRate = med(func(s *Step) float64 { return s.AcceptedRate })
			p.Latency = Quantiles{
				P50: med(func(s *Step) float64 { return s.Latency.P50 }),
				P90: med(func(s *Step) float64 { return s.Latency.P90 }),
				P99: med(func(s *Step) float64 { return s.Latency.P99 }),
				Max: med(func(s *Step) float64 { return s.Latency.Max }),
			}
			p.NetCores = med(func(s *Step) float64 { return s.CPU.NetCores })
			p.IdleCores = med(func(s *Step) float64 { return s.CPU.IdleCores })
			p.MsPerEnv = med(func(s *Step) float64 { return s.CPU.MsPerEnv })
			p.PeakRSS = med(func(s *Step) float64 { return float64(s.Memory.PeakRSS) })
			p.Shutdown = med(func(s *Step) float64 { return s.Shutdown.Took.Seconds() })
			p.Gap = med(func(s *Step) float64 { return float64(s.Upstream.Gap) })
			p.CoresSpread = spread(func(s *Step) float64 { return s.CPU.NetCores })
			p.MsPerEnvSpread = spread(func(s *Step) float64 { return s.CPU.MsPerEnv })
		}
		p.Verdict = pointVerdict(groups[k])
		p.KeptUpJudged = p.KeptUp > 0
		for _, st := range groups[k] {
			if st.Verdict != VerdictKeptUp && st.Verdict != VerdictHarnessLimited {
				p.KeptUpJudged = false
			}
		}
		rep.Summary = append(rep.Summary, p)
		byKey[k] = p
		if p.KeptUpJudged && p.Rate > rep.KeptUpWith[k.build] {
			rep.KeptUpWith[k.build] = p.Rate
		}
	}
	for _, fm := range rep.FindMax {
		rep.KeptUpWith[fm.Build] = fm.KeptUp
	}
	if len(cfg.Builds) > 1 {
		base := cfg.Builds[0].Name
		for _, k := range keys {
			if k.build == base {
				continue
			}
			bp, p := byKey[key{base, k.rate}], byKey[k]
			if bp == nil || p == nil || bp.Verdict == VerdictFailed || p.Verdict == VerdictFailed {
				continue
			}
			rep.Comparisons = append(rep.Comparisons, Comparison{
				Build: k.build, Baseline: base, Rate: k.rate,
				BaseCores: bp.NetCores, Cores: p.NetCores, CoresChange: change(bp.NetCores, p.NetCores),
				BaseMsPerEnv: bp.MsPerEnv, MsPerEnv: p.MsPerEnv, MsPerEnvChange: change(bp.MsPerEnv, p.MsPerEnv),
				P99Change: change(bp.Latency.P99, p.Latency.P99), PeakRSSChange: change(bp.PeakRSS, p.PeakRSS),
			})
		}
	}
}

// pointVerdict is the verdict over the rounds of one build at one rate: the
// common verdict when all agree, else how many rounds had each, e.g.
// "mixed: 2 kept up, 1 fell behind".
func pointVerdict(steps []*Step) string {
	count := map[string]int{}
	for _, s := range steps {
		count[s.Verdict]++
	}
	if len(count) == 1 {
		return steps[0].Verdict
	}
	var parts []string
	for _, v := range []string{VerdictKeptUp, VerdictFellBehind, VerdictHarnessLimited, VerdictFailed} {
		if n := count[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	return "mixed: " + strings.Join(parts, ", ")
}

// change is (b−a)/a in percent (0 when a is 0).
func change(a, b float64) float64 {
	if a == 0 {
		return 0
	}
	return 100 * (b - a) / a
}

// Median of v (0 for none); v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Spread is (max−min)/|median| in percent (0 for fewer than two values).
func Spread(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := Median(v)
	if m == 0 {
		return 0
	}
	return 100 * (slices.Max(v) - slices.Min(v)) / math.Abs(m)
}

// probeVersion returns the first line bin prints for --version, or "" when
// it prints nothing within two seconds. The report names each build's
// version, and says so when a build is the stand-in rather than Relay.
func probeVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}
