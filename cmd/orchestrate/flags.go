package main

import (
	"flag"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/upstream"
)

// options are orchestrate's flags as given.
type options struct {
	relayBin, relayName, rates, maxRSS, quotasFile, fault, relayConf string
	relayCPUs, harnCPUs, logLevel, perfFile, callGraph, statsdAddr   string
	statsdListen, mix, encoding, out, baseline, failOn               string

	concurrency, verifyN, rounds, userAgents, poolSize, projects, maxInflight, probes int
	seed                                                                              uint64

	duration, warmup, idle, readyTO, shutTO, warmTO, drainTO, maxCatchUp, maxP99, timeout time.Duration

	inbound, findMax, keep, uniqueUA, quiet, perfHarness bool

	compare, metrics cli.List
	quotas           cli.Repeated
}

// define binds the flags to o.
func (o *options) define(fs *flag.FlagSet) {
	fs.StringVar(&o.relayBin, "relay-bin", "", "Relay binary to measure (none: measure the harness, blast → fake upstream)")
	fs.StringVar(&o.relayName, "relay-name", "baseline", "name of --relay-bin in the report")
	fs.StringVar(&o.rates, "rates", "", "target envelopes per second, comma-separated; max: as fast as Relay answers, --concurrency senders (with --find-max: the two bounds)")
	fs.IntVar(&o.concurrency, "concurrency", orchestrate.DefaultConcurrency, "closed-loop senders of a --rates max step")
	fs.StringVar(&o.maxRSS, "max-relay-rss", "4GiB", "stop blast when Relay's RSS passes this (e.g. 4GiB, 800MiB), and say so")
	fs.DurationVar(&o.maxCatchUp, "max-catch-up", orchestrate.DefaultMaxCatchUp, "a step kept up only if the last envelope reached the upstream within this after blast ended")
	fs.StringVar(&o.quotasFile, "quotas", "", "JSON file with a list of quota objects for every project of the fake upstream")
	fs.Var(&o.quotas, "quota", "quota 'CATEGORIES[:LIMIT[:REASON]]' for every project of the fake upstream (repeatable; quote it: ';' separates categories), e.g. 'transaction:0'")
	fs.IntVar(&o.verifyN, "verify-envelope-every", orchestrate.DefaultVerifyEnvelopeEvery, "fully verify the signature of every Nth envelope Relay forwards, form and age on the rest (1: all)")
	fs.BoolVar(&o.inbound, "inbound-filters", false, "turn on the fake upstream's inbound filters (web crawlers, legacy browsers, localhost, browser extensions)")
	fs.DurationVar(&o.duration, "duration", orchestrate.DefaultDuration, "measured window per step")
	fs.DurationVar(&o.warmup, "warmup", orchestrate.DefaultWarmup, "blast warm-up before the measured window, discarded (0: none)")
	fs.DurationVar(&o.idle, "idle", orchestrate.DefaultIdle, "idle CPU measurement before blast (0: skip)")
	fs.DurationVar(&o.readyTO, "ready-timeout", orchestrate.DefaultReadyTimeout, "how long Relay may take to become ready")
	fs.DurationVar(&o.shutTO, "shutdown-timeout", orchestrate.DefaultShutdownTimeout, "SIGKILL Relay this long after SIGTERM (at least 5 s more than Relay's own limits.shutdown_timeout)")
	fs.DurationVar(&o.warmTO, "warmup-timeout", orchestrate.DefaultWarmupTimeout, "bound on waiting for project configs and first forwards")
	fs.DurationVar(&o.drainTO, "drain-timeout", orchestrate.DefaultDrainTimeout, "bound on waiting for forwarding and outcomes to settle")
	fs.IntVar(&o.rounds, "rounds", 1, "repeat the sweep, interleaved (every rate once, then again); medians and spread reported")
	fs.BoolVar(&o.findMax, "find-max", false, "bisect between the two --rates for the highest rate Relay keeps up with")
	fs.IntVar(&o.probes, "find-max-probes", orchestrate.DefaultFindMaxProbes, "steps --find-max may run at most")
	fs.StringVar(&o.fault, "fault", "", "upstream fault in the measured window: outage=10s[:refuse|hang|unavailable], 429-storm[=10s], errors=10s[:STATUS[:SHARE]], latency=10s:DELAY; @START to place it")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (configs, Relay logs)")
	fs.StringVar(&o.relayConf, "relay-config", "", "YAML file merged into the generated config.yml (null removes a key)")
	fs.StringVar(&o.relayCPUs, "relay-cpus", "", "pin Relay with taskset -c CPUS; sets limits.max_thread_count to match")
	fs.StringVar(&o.harnCPUs, "harness-cpus", "", "pin blast and the fake upstream to CPUS (default with --relay-cpus: the other CPUs; \"none\": never)")
	fs.StringVar(&o.logLevel, "relay-log-level", "info", "Relay's logging.level")
	fs.StringVar(&o.perfFile, "perf", "", "record Relay with perf over each measured window into FILE")
	fs.StringVar(&o.callGraph, "call-graph", "dwarf", "perf --call-graph mode: dwarf, lbr or fp")
	fs.BoolVar(&o.perfHarness, "perf-harness", false, "with --perf, also record orchestrate itself and split the harness's CPU into blast, the fake upstream, the Go scheduler and the rest")
	fs.StringVar(&o.statsdAddr, "statsd", "", "send Relay's StatsD metrics to ADDR (host:port)")
	fs.StringVar(&o.statsdListen, "statsd-listen", "", "run the built-in StatsD receiver on ADDR (e.g. 127.0.0.1:0) and point Relay at it")
	fs.Var(&o.metrics, "statsd-metric", "timer or counter to report from --statsd-listen (repeatable or comma-separated)")
	fs.StringVar(&o.mix, "mix", "", "envelope kinds and weights, e.g. errors=3,transactions=2,sessions=1,checkins=1,logs=1")
	fs.IntVar(&o.userAgents, "user-agents", pool.DefaultUserAgents, "distinct user agents, drawn with Zipf")
	fs.BoolVar(&o.uniqueUA, "unique-user-agents", false, "every envelope gets a user agent no other has")
	fs.IntVar(&o.poolSize, "pool", orchestrate.DefaultPoolSize, "envelopes in the pool (replayed in a loop)")
	fs.StringVar(&o.encoding, "encoding", "identity", "Content-Encoding of blast's bodies: identity, gzip, deflate, br, zstd")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for projects and pool")
	fs.IntVar(&o.projects, "projects", orchestrate.DefaultProjects, "projects (Zipf-weighted)")
	fs.DurationVar(&o.maxP99, "max-p99", orchestrate.DefaultMaxP99, "latency p99 above this counts as falling behind")
	fs.IntVar(&o.maxInflight, "max-inflight", 0, "blast's in-flight cap (0: blast's default)")
	fs.DurationVar(&o.timeout, "timeout", 0, "blast's per-request timeout (0: blast's default)")
	fs.StringVar(&o.out, "out", "", "write results.json, results.csv, report.md and SVG charts into DIR (checked before the run; an earlier report's files there are replaced, other files left alone)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.StringVar(&o.baseline, "baseline", "", "an earlier run's results.json to hold this one against (with --fail-on)")
	fs.StringVar(&o.failOn, "fail-on", "", "exit 1 if a figure changed against --baseline beyond a threshold: 'cpu_ms_per_envelope>+5%,p99>+20%,forwarded_rate<-5%'")
	fs.Var(&o.compare, "compare", "other builds, NAME=BIN,…: run alternately with --relay-bin in every round, change in % reported")
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
		"RelayLogLevel": "--relay-log-level", "Perf": "--perf", "CallGraph": "--call-graph", "PerfHarness": "--perf-harness", "StatsD": "--statsd",
		"StatsDListen": "--statsd-listen", "StatsDMetrics": "--statsd-metric", "Fault": "--fault", "Quotas": "--quota",
		"InboundFilters": "--inbound-filters", "VerifyEnvelopeEvery": "--verify-envelope-every", "WorkDir": "TMPDIR",
		"Baseline": "--baseline", "FailOn": "--fail-on",
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
		RelayCPUs: o.relayCPUs, HarnessCPUs: o.harnCPUs, RelayLogLevel: o.logLevel, StatsD: o.statsdAddr,
		StatsDListen: o.statsdListen, StatsDMetrics: o.metrics, Keep: o.keep, MaxP99: o.maxP99,
		MaxInflight: o.maxInflight, Timeout: o.timeout, Concurrency: o.concurrency, MaxCatchUp: o.maxCatchUp,
		InboundFilters: o.inbound, VerifyEnvelopeEvery: o.verifyN, FindMaxProbes: o.probes,
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
	}{{"--rounds", o.rounds, 1}, {"--concurrency", o.concurrency, 1}, {"--verify-envelope-every", o.verifyN, 1},
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

// gate reads --baseline and parses --fail-on (both or neither).
func (o *options) gate() (*orchestrate.Report, []orchestrate.Threshold, error) {
	if (o.baseline == "") != (o.failOn == "") {
		return nil, nil, cli.Usagef("--baseline and --fail-on go together")
	}
	if o.baseline == "" {
		return nil, nil, nil
	}
	ths, err := orchestrate.ParseThresholds(o.failOn)
	if err != nil {
		return nil, nil, err
	}
	base, err := orchestrate.ReadReport(o.baseline)
	return base, ths, err
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
		if err != nil || !(v > 0) {
			return cli.Usagef("--rates: %q is not a positive number or max", r)
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
			return cli.Usagef("--compare %q: want NAME=BIN", c)
		}
		cfg.Builds = append(cfg.Builds, orchestrate.Build{Name: name, Bin: bin})
	}
	if len(o.compare) > 0 && o.relayBin == "" {
		return cli.Usagef("--compare needs --relay-bin (the baseline)")
	}
	return nil
}

// specs parses the flags whose values are specs or files.
func (o *options) specs(cfg *orchestrate.Config) error {
	rss, err := upstream.ParseSize(o.maxRSS)
	if err != nil {
		return cli.Usagef("--max-relay-rss %q: want a size such as 4GiB", o.maxRSS)
	}
	cfg.MaxRelayRSS = uint64(rss)
	if o.quotasFile != "" {
		if cfg.Quotas, err = upstream.LoadQuotas(o.quotasFile); err != nil {
			return cli.Usagef("--quotas: %w", err)
		}
	}
	for _, q := range o.quotas {
		raw, err := upstream.ParseQuota(q, len(cfg.Quotas))
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
	if o.fault != "" {
		if cfg.Fault, err = orchestrate.ParseFault(o.fault); err != nil {
			return err // a configerr: rendered as --fault
		}
	}
	return nil
}
