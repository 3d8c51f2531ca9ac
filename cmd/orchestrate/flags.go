package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/cli/upstreamflag"
	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/replay"
	"github.com/relayload/relayload/internal/useragent"
)

// options are orchestrate's flags as given.
type options struct {
	relayBin, relayName, rates, maxRSS, quotasFile, fault, relayConf string
	relayCPUs, harnCPUs, logLevel, perfFile, callGraph, statsdAddr   string
	host                                                             string
	statsdListen, mix, encoding, out, baseline, failOn               string
	compareIn, precision, processNoise, agentsFile, envelopes        string

	concurrency, rounds, userAgents, poolSize, projects, maxInflight, probes int
	seed                                                                     uint64

	duration, warmup, idle, readyTO, shutTO, warmTO, drainTO, maxCatchUp, maxP99, timeout time.Duration
	slice, block, budget                                                                  time.Duration

	inbound, findMax, keep, uniqueUA, quiet, perfHarness bool

	compare, metrics cli.List
	quotas           cli.Repeated

	// set are the flags given on the command line.
	set map[string]bool
}

// define binds the flags to o. A `word` in a meaning names the value in
// --help.
func (o *options) define(fs *flag.FlagSet) {
	fs.StringVar(&o.relayBin, "relay-bin", "", "the Relay binary to measure, at `PATH` (none: measure the harness, blast → fake upstream)")
	fs.StringVar(&o.relayName, "relay-name", "baseline", "`NAME` of --relay-bin in the report")
	fs.StringVar(&o.rates, "rates", "", "target envelopes per second, a comma-separated `LIST`; max: as fast as Relay answers, --concurrency senders (with --find-max: the two bounds)")
	fs.IntVar(&o.concurrency, "concurrency", orchestrate.DefaultConcurrency, "closed-loop senders of a --rates max step")
	fs.StringVar(&o.maxRSS, "max-relay-rss", "4GiB", "stop blast when Relay's RSS passes this `SIZE` (e.g. 800MiB), and say so")
	fs.DurationVar(&o.maxCatchUp, "max-catch-up", orchestrate.DefaultMaxCatchUp, "a step kept up only if the last envelope reached the upstream within this after blast ended")
	fs.StringVar(&o.quotasFile, "quotas", "", "JSON `FILE` with a list of quota objects for every project of the fake upstream")
	fs.Var(&o.quotas, "quota", "a quota for every project of the fake upstream; `SPEC` is CATEGORIES[:LIMIT[:REASON]], e.g. 'transaction:0' (repeatable; quote it: ';' separates categories)")
	fs.BoolVar(&o.inbound, "inbound-filters", false, "turn on the fake upstream's inbound filters (web crawlers, legacy browsers, localhost, browser extensions)")
	fs.DurationVar(&o.duration, "duration", orchestrate.DefaultDuration, "measured window per step")
	fs.DurationVar(&o.warmup, "warmup", orchestrate.DefaultWarmup, "blast warm-up before the measured window, discarded; 0: none")
	fs.DurationVar(&o.idle, "idle", orchestrate.DefaultIdle, "idle CPU measurement before blast; 0: skip")
	fs.DurationVar(&o.readyTO, "ready-timeout", orchestrate.DefaultReadyTimeout, "how long Relay may take to become ready")
	fs.DurationVar(&o.shutTO, "shutdown-timeout", orchestrate.DefaultShutdownTimeout, "SIGKILL Relay this long after SIGTERM (at least 5 s more than Relay's own limits.shutdown_timeout)")
	fs.DurationVar(&o.warmTO, "warmup-timeout", orchestrate.DefaultWarmupTimeout, "bound on waiting for project configs and first forwards")
	fs.DurationVar(&o.drainTO, "drain-timeout", orchestrate.DefaultDrainTimeout, "bound on waiting for forwarding and outcomes to settle")
	fs.IntVar(&o.rounds, "rounds", 1, "repeat the sweep, interleaved (every rate once, then again); medians and spread reported")
	fs.BoolVar(&o.findMax, "find-max", false, "bisect between the two --rates for the highest rate Relay keeps up with")
	fs.IntVar(&o.probes, "find-max-probes", orchestrate.DefaultFindMaxProbes, "steps --find-max may run at most")
	fs.StringVar(&o.fault, "fault", "", "an upstream fault in the measured window; `SPEC` is outage=10s[:refuse|hang|unavailable], 429-storm[=10s], errors=10s[:STATUS[:SHARE]] or latency=10s:DELAY, @START to place it")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (configs, Relay logs)")
	fs.StringVar(&o.relayConf, "relay-config", "", "YAML `FILE` merged into the generated config.yml (null removes a key)")
	fs.StringVar(&o.relayCPUs, "relay-cpus", "", "pin Relay with taskset -c `CPUS`; sets limits.max_thread_count to match")
	fs.StringVar(&o.harnCPUs, "harness-cpus", "", "pin blast and the fake upstream to `CPUS` (default with --relay-cpus: the other CPUs; \"none\": never)")
	fs.StringVar(&o.logLevel, "relay-log-level", "info", "`LEVEL` of Relay's logging (logging.level)")
	fs.StringVar(&o.host, "host", "127.0.0.1", "local `ADDRESS` the fake upstream and Relay listen on, IPv4 or IPv6 (e.g. ::1); relay.host in --relay-config moves Relay alone")
	fs.StringVar(&o.perfFile, "perf", "", "record Relay with perf over each measured window into `FILE`")
	fs.StringVar(&o.callGraph, "call-graph", "dwarf", "perf --call-graph `MODE`: dwarf, lbr or fp")
	fs.BoolVar(&o.perfHarness, "perf-harness", false, "with --perf, also record orchestrate itself and split the harness's CPU into blast, the fake upstream, the Go scheduler and the rest")
	fs.StringVar(&o.statsdAddr, "statsd", "", "send Relay's StatsD metrics to `ADDR` (host:port)")
	fs.StringVar(&o.statsdListen, "statsd-listen", "", "run the built-in StatsD receiver on `ADDR` (e.g. 127.0.0.1:0) and point Relay at it")
	fs.Var(&o.metrics, "statsd-metric", "timer or counter `NAME` to report from --statsd-listen (repeatable or comma-separated)")
	fs.StringVar(&o.mix, "mix", "", "envelope kinds and `WEIGHTS`, e.g. errors=3,transactions=2,sessions=1,checkins=1,logs=1")
	fs.StringVar(&o.envelopes, "envelopes", "", "replay the recorded *.envelope files in `DIR` (a fake-upstream --capture or a blast --dump) instead of generating the pool: re-targeted to the projects, with new ids and current timestamps")
	fs.IntVar(&o.userAgents, "user-agents", pool.DefaultUserAgents, "distinct user agents, drawn with Zipf")
	fs.BoolVar(&o.uniqueUA, "unique-user-agents", false, "every envelope gets a user agent no other has (of --user-agents-file: each in turn)")
	fs.StringVar(&o.agentsFile, "user-agents-file", "", userAgentsFileUsage)
	fs.IntVar(&o.poolSize, "pool", orchestrate.DefaultPoolSize, "envelopes in the pool (replayed in a loop)")
	fs.StringVar(&o.encoding, "encoding", "identity", "Content-Encoding `NAME` of blast's bodies: identity, gzip, deflate, br, zstd")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for projects and pool")
	fs.IntVar(&o.projects, "projects", orchestrate.DefaultProjects, "projects (Zipf-weighted)")
	fs.DurationVar(&o.maxP99, "max-p99", orchestrate.DefaultMaxP99, "latency p99 above this counts as falling behind")
	fs.IntVar(&o.maxInflight, "max-inflight", 0, "blast's in-flight cap; 0: blast's default")
	fs.DurationVar(&o.timeout, "timeout", 0, "blast's per-request timeout; 0: blast's default")
	fs.StringVar(&o.out, "out", "", "write report.md (every table), results.json, results.csv and SVG charts into `DIR` (checked before the run; an earlier report's files there are replaced, other files left alone)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines and no status line on stderr")
	fs.StringVar(&o.baseline, "baseline", "", "an earlier run's results.json `FILE` to hold this one against (with a change in --fail-on)")
	fs.StringVar(&o.failOn, "fail-on", "", "exit 1 when a figure crosses a `THRESHOLD` (comma-separated). A limit, held at every rate: e.g. 'p99>1s,cpu_ms_per_envelope>5,peak_rss>800MiB', or kept_up<500: crossed unless a rate of 500/s or more kept up; exit 3 when a rate has no figure to hold. A change: e.g. 'cpu_ms_per_envelope>+5%,forwarded_rate<-5%', with --compare in slices when the change's whole interval is beyond it (exit 3 when it straddles it, or with fewer than 10 pairs or no data; exit 1 when a build failed), with --baseline when the median moved past it")
	fs.Var(&o.compare, "compare", "another build, `NAME=BIN[:CONFIG.yml]` (CONFIG.yml is merged into its Relay's config; its relayload: section sets inbound_filters for its fake upstream), compared with --relay-bin")
	fs.StringVar(&o.compareIn, "compare-in", "", "how --compare runs: `slices` (both Relays started afresh every --block, traffic alternating in ABBA pairs of --slice until --precision or --budget; the default) or steps (a fresh Relay per step and round; the default with --rounds, --find-max or --fault)")
	fs.DurationVar(&o.slice, "slice", orchestrate.DefaultSlice, "with --compare in slices: how long each build takes the traffic in turn")
	fs.DurationVar(&o.block, "block", orchestrate.DefaultBlock, "with --compare in slices: how long both builds' Relays live before both are started afresh (a block); more blocks shrink what two processes of one binary differ by (a --block of at least --budget keeps one process per build)")
	fs.StringVar(&o.precision, "precision", "", "with --compare in slices: stop once the 95% interval of the change in CPU per envelope is within ±this `PERCENT`, e.g. 3%")
	fs.StringVar(&o.processNoise, "process-noise", "", "with --compare in slices: what two processes of one binary are expected to differ by in CPU per envelope (a `PERCENT`), before the run's own blocks weigh in; default "+strconv.FormatFloat(100*compare.DefaultPrior().Spread, 'g', -1, 64)+"%, from A/A runs on shared 2-vCPU VMs (the report says which was used)")
	fs.DurationVar(&o.budget, "budget", orchestrate.DefaultBudget, "with --compare in slices: the longest a comparison may take, split over the rates")
}

// help is orchestrate's --help.
var help = cli.Help{
	About: `orchestrate: where does a Relay stop keeping up, and what does an envelope cost it? For every rate a fresh fake upstream and a fresh Relay: warm-up, idle CPU, blast at the rate, Relay's CPU, memory, latency and forwarding measured, a verdict per step, a summary on stdout and the full report with --out.`,
	Usage: []string{
		"orchestrate --relay-bin PATH --rates 200,500,1000 [flags]",
		"orchestrate --rates 2000,4000 [flags]                 no Relay: measures the harness itself",
		"orchestrate relay-report --relay-bin PATH --out DIR   one report: see relay-report --help",
	},
	Examples: []cli.Example{
		{What: "Where does your Relay stop keeping up? Summary on stdout, every table in out/report.md",
			Command: "orchestrate --relay-bin ~/relay/target/release/relay --rates 200,500,1000 --out out/"},
		{What: "The highest rate it keeps up with, bisected between two bounds",
			Command: "orchestrate --relay-bin ./relay --rates 100,5000 --find-max --out out/"},
		{What: "Is a branch cheaper? Alternating slices until the change is known to ±3%, at most 10 min",
			Command: "orchestrate --relay-bin ./relay-main --relay-name main --compare pr=./relay-pr \\\n    --rates 300 --precision 3% --budget 10m"},
	},
	Groups: []cli.Group{
		{Title: "Traffic", Flags: []string{"rates", "duration", "warmup", "idle", "rounds", "concurrency", "mix", "envelopes", "encoding",
			"projects", "pool", "seed", "user-agents", "user-agents-file", "unique-user-agents", "max-inflight", "timeout"}},
		{Title: "Relay", Flags: []string{"relay-bin", "relay-name", "relay-config", "relay-log-level", "host", "relay-cpus",
			"harness-cpus", "max-relay-rss", "ready-timeout", "shutdown-timeout"}},
		{Title: "Fake upstream", Flags: []string{"quota", "quotas", "inbound-filters", "fault"}},
		{Title: "Verdict", Flags: []string{"max-p99", "max-catch-up", "find-max", "find-max-probes", "warmup-timeout",
			"drain-timeout"}},
		{Title: "Comparing builds", Flags: []string{"compare", "compare-in", "slice", "block", "precision", "process-noise", "budget"}},
		{Title: "CI gate", Flags: []string{"fail-on", "baseline"}},
		{Title: "Profiles and Relay's metrics", Flags: []string{"perf", "call-graph", "perf-harness", "statsd", "statsd-listen", "statsd-metric"}},
		{Title: "Output", Flags: []string{"out", "quiet", "keep"}},
	},
	After: "Exit status: 0 all steps ran, 1 some step failed, a --fail-on threshold was crossed or --relay-bin kept up with no rate tried (every step judged fell behind), 2 bad usage, 3 inconclusive (a --fail-on threshold inside the interval of a comparison in slices: rerun with a larger --budget; a --fail-on limit with no figure at a rate), 130 interrupted.",
}

// flagNames maps orchestrate.Config fields to the flags that set them, so
// that a configuration error reads in the command line's words.
func flagNames() map[string]string {
	return map[string]string{
		"Builds": "--relay-bin", "Rates": "--rates", "Rounds": "--rounds", "FindMax": "--find-max", "FindMaxProbes": "--find-max-probes",
		"Concurrency": "--concurrency", "MaxRelayRSS": "--max-relay-rss", "Duration": "--duration", "Warmup": "--warmup",
		"Idle": "--idle", "ReadyTimeout": "--ready-timeout", "ShutdownTimeout": "--shutdown-timeout",
		"WarmupTimeout": "--warmup-timeout", "DrainTimeout": "--drain-timeout", "MaxP99": "--max-p99",
		"MaxCatchUp": "--max-catch-up", "Seed": "--seed", "Projects": "--projects", "PoolSize": "--pool", "Mix": "--mix",
		"UserAgents": "--user-agents", "Encoding": "--encoding", "MaxInflight": "--max-inflight", "Timeout": "--timeout",
		"RelayCPUs": "--relay-cpus", "HarnessCPUs": "--harness-cpus", "RelayConfig": "--relay-config",
		"RelayLogLevel": "--relay-log-level", "Host": "--host", "Perf": "--perf", "CallGraph": "--call-graph", "PerfHarness": "--perf-harness", "StatsD": "--statsd",
		"StatsDListen": "--statsd-listen", "StatsDMetrics": "--statsd-metric", "Fault": "--fault", "Quotas": "--quota",
		"InboundFilters": "--inbound-filters", "WorkDir": "TMPDIR",
		"Baseline": "--baseline", "FailOn": "--fail-on", "Agents": "--user-agents-file",
		"Slices": "--compare-in slices", "Corpus": "--envelopes", "Slice": "--slice", "Block": "--block", "Precision": "--precision", "Prior": "--process-noise", "Budget": "--budget",
	}
}

// config checks what the library cannot know about (a zero that would
// silently mean a default, files to read, specs to parse) and builds the
// orchestrate.Config; the library validates the rest.
func (o *options) config() (orchestrate.Config, error) {
	cfg := orchestrate.Config{
		Rounds: o.rounds, FindMax: o.findMax, Duration: o.duration, Warmup: o.warmup, Idle: o.idle,
		ReadyTimeout: o.readyTO, ShutdownTimeout: o.shutTO, WarmupTimeout: o.warmTO, DrainTimeout: o.drainTO,
		Seed: o.seed, Projects: o.projects, PoolSize: o.poolSize, UserAgents: o.userAgents, UniqueUserAgents: o.uniqueUA,
		RelayCPUs: o.relayCPUs, HarnessCPUs: o.harnCPUs, RelayLogLevel: o.logLevel, Host: o.host, StatsD: o.statsdAddr,
		StatsDListen: o.statsdListen, StatsDMetrics: o.metrics, Keep: o.keep, MaxP99: o.maxP99,
		MaxInflight: o.maxInflight, Timeout: o.timeout, Concurrency: o.concurrency, MaxCatchUp: o.maxCatchUp,
		InboundFilters: o.inbound, FindMaxProbes: o.probes,
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--duration", o.duration}, {"--ready-timeout", o.readyTO}, {"--shutdown-timeout", o.shutTO},
		{"--warmup-timeout", o.warmTO}, {"--drain-timeout", o.drainTO}, {"--max-p99", o.maxP99}, {"--max-catch-up", o.maxCatchUp}} {
		if err := cli.Positive(d.name, d.v); err != nil {
			return cfg, err
		}
	}
	for _, n := range []struct {
		name   string
		v, min int
	}{{"--rounds", o.rounds, 1}, {"--concurrency", o.concurrency, 1},
		{"--user-agents", o.userAgents, 1}, {"--pool", o.poolSize, 1}, {"--projects", o.projects, 1}, {"--find-max-probes", o.probes, 2}} {
		if err := cli.AtLeast(n.name, n.v, n.min); err != nil {
			return cfg, err
		}
	}
	if o.warmup < 0 || o.idle < 0 || o.timeout < 0 || o.maxInflight < 0 {
		return cfg, cli.Usagef("--warmup, --idle, --timeout and --max-inflight must not be negative")
	}
	if err := o.rateList(&cfg); err != nil {
		return cfg, err
	}
	if err := o.builds(&cfg); err != nil {
		return cfg, err
	}
	return cfg, o.specs(&cfg)
}

// gate reads --baseline and parses --fail-on: its changes need --baseline
// or a comparison in slices (and --baseline needs a change), its absolute
// limits need neither.
func (o *options) gate(cfg orchestrate.Config) (gate, error) {
	g := gate{path: o.baseline}
	switch {
	case o.baseline != "" && o.failOn == "":
		return g, cli.Usagef("--baseline needs --fail-on")
	case o.failOn == "":
		return g, nil
	}
	ths, err := orchestrate.ParseThresholds(o.failOn)
	if err != nil {
		return g, err
	}
	for _, th := range ths {
		if th.Abs {
			g.limits = append(g.limits, th)
		} else {
			g.thresholds = append(g.thresholds, th)
		}
	}
	switch {
	case g.thresholds != nil && o.baseline == "" && !cfg.Slices:
		return g, cli.Usagef("--fail-on needs --baseline, or --compare in slices (the gate then holds the change's interval against it), for %q; a limit such as p99>1s needs neither", g.thresholds[0].Spec)
	case g.thresholds == nil && o.baseline != "":
		return g, cli.Usagef("--baseline needs a change among --fail-on's thresholds, such as p99>+20%%; %q has only limits, which need no baseline", o.failOn)
	case g.limits != nil && cfg.Slices:
		return g, cli.Usagef("--fail-on %q: a limit holds the figures of steps, and a comparison in slices runs none (--compare-in steps does)", g.limits[0].Spec)
	case o.baseline == "":
		return g, nil
	}
	g.base, err = orchestrate.ReadReport(o.baseline)
	return g, err
}

// rateList parses --rates.
func (o *options) rateList(cfg *orchestrate.Config) error {
	if o.rates == "" {
		return cli.Usagef("--rates is required (e.g. --rates 200,500,1000)")
	}
	for r := range strings.SplitSeq(o.rates, ",") {
		r = strings.TrimSpace(r)
		if r == "max" {
			cfg.Rates = append(cfg.Rates, orchestrate.RateMax)
			continue
		}
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || blast.CheckRate(v) != nil {
			return cli.Usagef("--rates: %q is not %s, or max", r, blast.RateLimits)
		}
		cfg.Rates = append(cfg.Rates, v)
	}
	return nil
}

// builds turns --relay-bin, --relay-name and --compare into the builds.
func (o *options) builds(cfg *orchestrate.Config) error {
	if o.relayBin != "" {
		cfg.Builds = append(cfg.Builds, orchestrate.Build{Name: o.relayName, Bin: o.relayBin})
	}
	for _, c := range o.compare {
		name, bin, ok := strings.Cut(c, "=")
		if !ok || name == "" || bin == "" {
			return cli.Usagef("--compare %q: want NAME=BIN[:CONFIG.yml]", c)
		}
		b := orchestrate.Build{Name: name, Bin: bin}
		if i := strings.LastIndexByte(bin, ':'); i > 0 && (strings.HasSuffix(bin, ".yml") || strings.HasSuffix(bin, ".yaml")) {
			b.Bin = bin[:i]
			var err error
			if b.RelayConfig, b.InboundFilters, err = buildConfig(bin[i+1:]); err != nil {
				return cli.Usagef("--compare %q: %v", c, err)
			}
		}
		cfg.Builds = append(cfg.Builds, b)
	}
	if len(o.compare) > 0 && o.relayBin == "" {
		return cli.Usagef("--compare needs --relay-bin (the baseline)")
	}
	switch o.compareIn {
	case "":
		cfg.Slices = len(o.compare) > 0 && o.rounds <= 1 && !o.findMax && o.fault == ""
	case "slices":
		cfg.Slices = len(o.compare) > 0
	case "steps":
	default:
		return cli.Usagef("--compare-in %q: want slices or steps", o.compareIn)
	}
	if !cfg.Slices {
		return nil
	}
	cfg.Slice, cfg.Block, cfg.Budget = o.slice, o.block, o.budget
	if o.precision != "" {
		p, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(o.precision), "%"), 64)
		if err != nil || p <= 0 || p >= 100 {
			return cli.Usagef("--precision %q: want a percentage such as 3%%", o.precision)
		}
		cfg.Precision = p / 100
	}
	if o.processNoise != "" {
		p, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(o.processNoise), "%"), 64)
		if err != nil || p < 0 || p >= 100 {
			return cli.Usagef("--process-noise %q: want a percentage such as 1.5%%", o.processNoise)
		}
		cfg.Prior = &compare.Prior{Spread: p / 100, DF: compare.DefaultPrior().DF, Source: "--process-noise"}
	}
	return nil
}

// buildConfig reads a compared build's CONFIG.yml: Relay config overrides
// and, in its relayload: section, the build's own fake-upstream settings.
func buildConfig(path string) (relayconfig.Config, *bool, error) {
	conf, err := relayconfig.LoadOverrides(path)
	if err != nil {
		return nil, nil, err
	}
	own, ok := conf["relayload"]
	if !ok {
		return conf, nil, nil
	}
	delete(conf, "relayload")
	m, ok := own.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("%s: relayload: want a mapping (inbound_filters: true|false)", path)
	}
	var filters *bool
	for k, v := range m {
		b, isBool := v.(bool)
		if k != "inbound_filters" || !isBool {
			return nil, nil, fmt.Errorf("%s: relayload.%s: the relayload section takes inbound_filters: true|false", path, k)
		}
		filters = &b
	}
	return conf, filters, nil
}

// userAgentsFileUsage is --user-agents-file's meaning, orchestrate's and relay-report's.
const userAgentsFileUsage = "real user agents instead, one per line of `FILE`: AGENT, or AGENT<TAB>WEIGHT to draw by weight, not by line order with Zipf"

// readAgents reads --user-agents-file (none: nil).
func readAgents(path string) ([]useragent.Weighted, error) {
	if path == "" {
		return nil, nil
	}
	l, err := useragent.ReadFile(path)
	if err != nil {
		return nil, cli.Usagef("--user-agents-file: %w", err)
	}
	return l, nil
}

// loadCorpus reads --envelopes, refusing the pool flags that do not apply
// to recorded envelopes (set: the flags given).
func loadCorpus(dir string, set map[string]bool) (*replay.Corpus, error) {
	for _, f := range []string{"mix", "user-agents", "user-agents-file", "unique-user-agents"} {
		if set[f] {
			return nil, cli.Usagef("--envelopes replays recorded envelopes: --%s does not apply", f)
		}
	}
	c, err := replay.Load(dir, 0)
	if err != nil {
		return nil, cli.Usagef("--envelopes: %w", err)
	}
	return c, nil
}

// specs parses the flags whose values are specs or files.
func (o *options) specs(cfg *orchestrate.Config) error {
	rss, err := upstreamflag.ParseSize(o.maxRSS)
	if err != nil {
		return cli.Usagef("--max-relay-rss %q: want a size such as 4GiB", o.maxRSS)
	}
	cfg.MaxRelayRSS = uint64(rss)
	if o.quotasFile != "" {
		if cfg.Quotas, err = upstreamflag.LoadQuotas(o.quotasFile); err != nil {
			return cli.Usagef("--quotas: %w", err)
		}
	}
	for _, q := range o.quotas {
		raw, err := upstreamflag.ParseQuota(q, len(cfg.Quotas))
		if err != nil {
			return cli.Usagef("--quota: %w", err)
		}
		cfg.Quotas = append(cfg.Quotas, raw)
	}
	if o.mix != "" {
		if cfg.Mix, err = pool.ParseMix(o.mix); err != nil {
			return cli.Usagef("--mix: %w", err)
		}
	}
	if o.envelopes != "" {
		if cfg.Corpus, err = loadCorpus(o.envelopes, o.set); err != nil {
			return err
		}
		cfg.UserAgents = 0
	}
	if cfg.Encoding, err = compression.ParseEncoding(o.encoding); err != nil {
		return cli.Usagef("--encoding: %w", err)
	}
	if o.relayConf != "" {
		if cfg.RelayConfig, err = relayconfig.LoadOverrides(o.relayConf); err != nil {
			return cli.Usagef("--relay-config: %w", err)
		}
	}
	if o.perfFile != "" {
		cfg.Perf, cfg.CallGraph = o.perfFile, o.callGraph
	}
	cfg.PerfHarness = o.perfHarness
	if cfg.Agents, err = readAgents(o.agentsFile); err != nil {
		return err
	}
	cfg.AgentsFrom = o.agentsFile
	if o.fault != "" {
		if cfg.Fault, err = orchestrate.ParseFault(o.fault); err != nil {
			return err // a configerr: rendered as --fault
		}
	}
	return nil
}
