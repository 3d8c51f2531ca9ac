// Command orchestrate measures what Relay costs per envelope and where it
// stops keeping up: for every rate it starts a fresh fake upstream and a
// fresh Relay, warms up, measures idle CPU, runs blast, samples Relay's CPU
// and memory, and reports. Without --relay-bin it measures the harness.
//
//	orchestrate --relay-bin ~/relay/target/release/relay --rates 200,500,1000 --out results/
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/internal/relayreport"
	"github.com/relayload/relayload/orchestrate"
	"github.com/relayload/relayload/orchestrate/relayconfig"
	"github.com/relayload/relayload/pool"
	"github.com/relayload/relayload/report"
	"github.com/relayload/relayload/upstream"
)

const usage = `orchestrate: a fresh fake upstream and Relay per rate, Relay's cost measured and reported.

Usage:
  orchestrate --relay-bin PATH --rates 200,500,1000 [options]
  orchestrate --rates 1000,5000              (no Relay: measures the harness itself)
  orchestrate relay-report --relay-bin PATH --out DIR [--duration 30s] [--perf]
                                             (cost per kind, mixed capacity, max rate,
                                              perf of errors, signature timer: one report)

Options:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// repeatedFlag collects repeated values as they are (a quota's categories
// are ';'-separated, so commas are not split).
type repeatedFlag []string

func (l *repeatedFlag) String() string { return strings.Join(*l, " ") }
func (l *repeatedFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// listFlag collects comma-separated or repeated values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "relay-report" {
		return runRelayReport(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("orchestrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		relayBin   = fs.String("relay-bin", "", "Relay binary to measure (none: measure the harness, blast → fake upstream)")
		relayName  = fs.String("relay-name", "baseline", "name of --relay-bin in the report")
		rates      = fs.String("rates", "", "target envelopes per second, comma-separated; max: as fast as Relay answers, --concurrency senders (with --find-max: the two bounds)")
		concur     = fs.Int("concurrency", orchestrate.DefaultConcurrency, "closed-loop senders of a --rates max step")
		maxRSS     = fs.String("max-relay-rss", "4GiB", "stop blast when Relay's RSS passes this (e.g. 4GiB, 800MiB), and say so")
		maxCatchUp = fs.Duration("max-catch-up", orchestrate.DefaultMaxCatchUp, "a step kept up only if the last envelope reached the upstream within this after blast ended")
		quotasFile = fs.String("quotas", "", "JSON file with a list of quota objects for every project of the fake upstream")
		verifyN    = fs.Int("verify-envelope-every", orchestrate.DefaultVerifyEnvelopeEvery, "fully verify the signature of every Nth envelope Relay forwards, form and age on the rest (1: all)")
		inbound    = fs.Bool("inbound-filters", false, "turn on the fake upstream's inbound filters (web crawlers, legacy browsers, localhost, browser extensions)")
		duration   = fs.Duration("duration", orchestrate.DefaultDuration, "measured window per step")
		warmup     = fs.Duration("warmup", orchestrate.DefaultWarmup, "blast warm-up before the measured window (discarded)")
		idle       = fs.Duration("idle", orchestrate.DefaultIdle, "idle CPU measurement before blast (0: skip)")
		readyTO    = fs.Duration("ready-timeout", orchestrate.DefaultReadyTimeout, "how long Relay may take to become ready")
		shutTO     = fs.Duration("shutdown-timeout", orchestrate.DefaultShutdownTimeout, "SIGKILL Relay this long after SIGTERM")
		warmTO     = fs.Duration("warmup-timeout", orchestrate.DefaultWarmupTimeout, "bound on waiting for project configs and first forwards")
		drainTO    = fs.Duration("drain-timeout", orchestrate.DefaultDrainTimeout, "bound on waiting for forwarding and outcomes to settle")
		rounds     = fs.Int("rounds", 1, "repeat the sweep, interleaved (every rate once, then again); medians and spread reported")
		findMax    = fs.Bool("find-max", false, "bisect between the two --rates for the highest rate Relay keeps up with")
		fault      = fs.String("fault", "", "upstream fault in the measured window: outage=10s[:refuse|hang|unavailable], 429-storm[=10s], errors=10s[:STATUS[:SHARE]], latency=10s:DELAY; @START to place it")
		keep       = fs.Bool("keep", false, "keep the work directory (configs, Relay logs)")
		relayConf  = fs.String("relay-config", "", "YAML file merged into the generated config.yml (null removes a key)")
		relayCPUs  = fs.String("relay-cpus", "", "pin Relay with taskset -c CPUS; sets limits.max_thread_count to match")
		harnCPUs   = fs.String("harness-cpus", "", "pin blast and the fake upstream to CPUS (default with --relay-cpus: the other CPUs; \"none\": never)")
		logLevel   = fs.String("relay-log-level", "info", "Relay's logging.level")
		perfFile   = fs.String("perf", "", "record Relay with perf over each measured window into FILE")
		callGraph  = fs.String("call-graph", "dwarf", "perf --call-graph mode: dwarf, lbr or fp")
		statsdAddr = fs.String("statsd", "", "send Relay's StatsD metrics to ADDR (host:port)")
		statsdLsn  = fs.String("statsd-listen", "", "run the built-in StatsD receiver on ADDR (e.g. 127.0.0.1:0) and point Relay at it")
		mixFlag    = fs.String("mix", "", "envelope kinds and weights, e.g. errors=3,transactions=2,sessions=1,checkins=1,logs=1")
		userAgents = fs.Int("user-agents", 0, "distinct user agents, drawn with Zipf (0: pool's default)")
		uniqueUA   = fs.Bool("unique-user-agents", false, "every envelope gets a user agent no other has")
		poolSize   = fs.Int("pool", orchestrate.DefaultPoolSize, "envelopes in the pool (replayed in a loop)")
		encoding   = fs.String("encoding", "identity", "Content-Encoding of blast's bodies: identity, gzip, deflate, br, zstd")
		seed       = fs.Uint64("seed", 1, "seed for projects and pool")
		nProjects  = fs.Int("projects", orchestrate.DefaultProjects, "projects (Zipf-weighted)")
		maxP99     = fs.Duration("max-p99", orchestrate.DefaultMaxP99, "latency p99 above this counts as falling behind")
		maxInfl    = fs.Int("max-inflight", 0, "blast's in-flight cap (0: blast's default)")
		timeout    = fs.Duration("timeout", 0, "blast's per-request timeout (0: blast's default)")
		out        = fs.String("out", "", "write results.json, results.csv, report.md and SVG charts into DIR")
		quiet      = fs.Bool("quiet", false, "no progress lines on stderr")
		compare    listFlag
		metrics    listFlag
	)
	fs.Var(&compare, "compare", "other builds, NAME=BIN,…: run alternately with --relay-bin in every round, change in % reported")
	fs.Var(&metrics, "statsd-metric", "timer or counter to report from --statsd-listen (repeatable or comma-separated)")
	var quotas repeatedFlag
	fs.Var(&quotas, "quota", "quota 'CATEGORIES[:LIMIT[:REASON]]' for every project of the fake upstream (repeatable; quote it: ';' separates categories), e.g. 'transaction:0'")

	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "orchestrate: "+format+"\n", a...)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fmt.Fprintln(stdout, "\nExit status: 0 all steps ran, 1 some step failed, 2 bad usage, 130 interrupted.")
			return 0
		}
		return bad("%v", err)
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	cfg := orchestrate.Config{
		Rounds: *rounds, FindMax: *findMax, Duration: *duration, Warmup: *warmup, Idle: *idle,
		ReadyTimeout: *readyTO, ShutdownTimeout: *shutTO, WarmupTimeout: *warmTO, DrainTimeout: *drainTO,
		Seed: *seed, Projects: *nProjects, PoolSize: *poolSize, UserAgents: *userAgents, UniqueUserAgents: *uniqueUA,
		RelayCPUs: *relayCPUs, HarnessCPUs: *harnCPUs, RelayLogLevel: *logLevel, StatsD: *statsdAddr, StatsDListen: *statsdLsn,
		StatsDMetrics: metrics, Keep: *keep, MaxP99: *maxP99, MaxInflight: *maxInfl, Timeout: *timeout,
		Concurrency: *concur, MaxCatchUp: *maxCatchUp, InboundFilters: *inbound, VerifyEnvelopeEvery: *verifyN,
	}
	if *verifyN < 1 {
		return bad("--verify-envelope-every: %d: want 1 (every envelope) or more", *verifyN)
	}
	rss, err := upstream.ParseSize(*maxRSS)
	if err != nil || rss <= 0 {
		return bad("--max-relay-rss: %q is not a size such as 4GiB", *maxRSS)
	}
	cfg.MaxRelayRSS = uint64(rss)
	if *quotasFile != "" {
		qs, err := upstream.LoadQuotas(*quotasFile)
		if err != nil {
			return bad("--quotas: %v", err)
		}
		cfg.Quotas = qs
	}
	for _, q := range quotas {
		raw, err := upstream.ParseQuota(q, len(cfg.Quotas))
		if err != nil {
			return bad("--quota: %v", err)
		}
		cfg.Quotas = append(cfg.Quotas, raw)
	}
	if !*quiet {
		cfg.Log = stderr
	}
	if *rates == "" {
		return bad("--rates is required (e.g. --rates 200,500,1000)")
	}
	for r := range strings.SplitSeq(*rates, ",") {
		if strings.TrimSpace(r) == "max" {
			cfg.Rates = append(cfg.Rates, orchestrate.RateMax)
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || !(v > 0) {
			return bad("--rates: %q is not a positive number or max", r)
		}
		cfg.Rates = append(cfg.Rates, v)
	}
	if *relayBin != "" {
		cfg.Builds = append(cfg.Builds, orchestrate.Build{Name: *relayName, Bin: *relayBin})
	}
	for _, c := range compare {
		name, bin, ok := strings.Cut(c, "=")
		if !ok || name == "" || bin == "" {
			return bad("--compare: %q: want NAME=BIN", c)
		}
		cfg.Builds = append(cfg.Builds, orchestrate.Build{Name: name, Bin: bin})
	}
	if len(compare) > 0 && *relayBin == "" {
		return bad("--compare needs --relay-bin (the baseline)")
	}
	if *mixFlag != "" {
		m, err := pool.ParseMix(*mixFlag)
		if err != nil {
			return bad("--mix: %v", err)
		}
		cfg.Mix = m
	}
	enc, err := compression.ParseEncoding(*encoding)
	if err != nil {
		return bad("--encoding: %v", err)
	}
	cfg.Encoding = enc
	if *relayConf != "" {
		o, err := relayconfig.LoadOverrides(*relayConf)
		if err != nil {
			return bad("--relay-config: %v", err)
		}
		cfg.RelayConfig = o
	}
	if *perfFile != "" {
		cfg.Perf, cfg.CallGraph = *perfFile, *callGraph
	}
	if *fault != "" {
		f, err := orchestrate.ParseFault(*fault)
		if err != nil {
			return bad("--fault: %v", strings.TrimPrefix(err.Error(), orchestrate.ErrConfig.Error()+": "))
		}
		cfg.Fault = f
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	rep, err := orchestrate.Run(ctx, cfg)
	if errors.Is(err, orchestrate.ErrConfig) {
		return bad("%v", strings.TrimPrefix(err.Error(), orchestrate.ErrConfig.Error()+": "))
	}
	if rep == nil {
		fmt.Fprintf(stderr, "orchestrate: %v\n", err)
		return 1
	}
	stop() // a second Ctrl-C now kills at once
	report.Text(stdout, rep)
	if *out != "" {
		paths, werr := report.Write(*out, rep)
		if werr != nil {
			fmt.Fprintf(stderr, "orchestrate: writing the report: %v\n", werr)
			return 1
		}
		fmt.Fprintf(stderr, "wrote %s\n", strings.Join(paths, ", "))
	}
	if !*quiet {
		fmt.Fprintf(stderr, "sweep took %s\n", time.Since(start).Round(time.Second))
	}
	switch {
	case rep.Interrupted:
		fmt.Fprintln(stderr, "orchestrate: interrupted; the report above is partial")
		return 130
	case rep.Failed > 0:
		fmt.Fprintf(stderr, "orchestrate: %d step(s) failed\n", rep.Failed)
		return 1
	}
	return 0
}

// runRelayReport is `orchestrate relay-report`: the sections of package
// relayreport into one report.md.
func runRelayReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orchestrate relay-report", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		relayBin = fs.String("relay-bin", "", "Relay binary to measure (required)")
		out      = fs.String("out", "", "directory for report.md and each section's full report (required)")
		duration = fs.Duration("duration", 30*time.Second, "measured window of each step")
		kindRate = fs.Float64("kind-rate", 300, "rate of the cost-per-kind steps")
		perf     = fs.Bool("perf", false, "record the errors step with perf and break its CPU down")
		quiet    = fs.Bool("quiet", false, "no progress lines on stderr")
	)
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "orchestrate relay-report: "+format+"\n", a...)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, "orchestrate relay-report: cost per kind, mixed capacity, max rate, perf of errors and Relay's signature timer, into one report.md.\n\nOptions:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		return bad("%v (see --help)", err)
	}
	if *relayBin == "" || *out == "" {
		return bad("--relay-bin and --out are required")
	}
	if !(*duration > 0) || !(*kindRate > 0) {
		return bad("--duration and --kind-rate must be above 0")
	}
	o := relayreport.Options{RelayBin: *relayBin, Out: *out, Duration: *duration, KindRate: *kindRate, Perf: *perf, Log: stderr}
	if *quiet {
		o.Log = io.Discard
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	card, err := relayreport.Run(ctx, o)
	if card == nil {
		fmt.Fprintf(stderr, "orchestrate relay-report: %v\n", err)
		return 1
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "orchestrate relay-report: %v\n", err)
		return 1
	}
	f, ferr := os.Create(filepath.Join(*out, "report.md"))
	if ferr != nil {
		fmt.Fprintf(stderr, "orchestrate relay-report: %v\n", ferr)
		return 1
	}
	card.Markdown(io.MultiWriter(f, stdout))
	if cerr := f.Close(); cerr != nil {
		fmt.Fprintf(stderr, "orchestrate relay-report: %v\n", cerr)
		return 1
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "orchestrate relay-report: interrupted; the report above is partial")
		return 130
	}
	return 0
}
