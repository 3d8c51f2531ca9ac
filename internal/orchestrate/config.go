// Package orchestrate measures what a Relay costs per envelope and where it
// stops keeping up. For every rate (and round, and build) it starts a fresh
// in-process fake upstream and a fresh Relay process, warms Relay up,
// measures its idle CPU, runs blast at the rate, samples Relay's CPU and
// memory from procfs, drains, stops Relay and judges the step. Without a
// Relay binary it measures the harness itself: blast straight into the fake
// upstream.
//
// Run returns a Report (plain structs that marshal to JSON); package report
// renders it as tables, CSV, Markdown and charts.
package orchestrate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/replay"
	"github.com/relayload/relayload/internal/useragent"
)

// Defaults for zero Config fields.
const (
	DefaultDuration = 30 * time.Second
	DefaultWarmup   = 2 * time.Second
	// DefaultIdle is long enough to see Relay's idle CPU in /proc's 10 ms
	// ticks and short enough that, with the other fixed phases, a step at
	// the default duration spends under a quarter of its time outside the
	// measured window (Step.OutsideWindow reports that share).
	DefaultIdle            = 3 * time.Second
	DefaultReadyTimeout    = 30 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	DefaultWarmupTimeout   = 20 * time.Second
	DefaultDrainTimeout    = 20 * time.Second
	DefaultProjects        = 100
	DefaultPoolSize        = 5000
	DefaultMaxP99          = time.Second
	DefaultFindMaxProbes   = 7
	// DefaultSlice, DefaultBlock and DefaultBudget shape a comparison in
	// slices.
	DefaultSlice          = 3 * time.Second
	DefaultBlock          = time.Minute
	DefaultBudget         = 10 * time.Minute
	DefaultSampleInterval = 100 * time.Millisecond
	// DefaultMaxCatchUp bounds the time from blast's end until the last
	// envelope is forwarded for a step that kept up.
	DefaultMaxCatchUp = 3 * time.Second
	// DefaultConcurrency is the closed-loop senders of a RateMax step.
	DefaultConcurrency = 64
	// DefaultMaxRelayRSS stops blast when Relay's RSS passes it, so that a
	// Relay that buffers everything cannot take the machine down.
	DefaultMaxRelayRSS = 4 << 30
	// ReadyPoll is how often readiness is polled.
	ReadyPoll = 50 * time.Millisecond
)

// ErrConfig is matched (errors.Is) by every error caused by a bad Config.
var ErrConfig = configerr.ErrConfig

// ConfigError is a bad Config: the field (and any other field involved)
// and why. Programs render it with their own names for the fields.
type ConfigError = configerr.Error

// RateMax in Config.Rates is a closed-loop step: Concurrency senders
// sending back to back, as fast as Relay answers.
const RateMax = 0

// Build is one Relay binary under test. An empty Bin means no Relay: blast
// sends straight to the fake upstream (the harness measuring itself).
type Build struct {
	Name string `json:"name"`
	Bin  string `json:"bin,omitempty"`
	// Version is the first line the binary prints for --version (empty if
	// it prints nothing in time); Run fills it in.
	Version string `json:"version,omitempty"`
	// RelayConfig is merged over Config.RelayConfig for this build alone,
	// and InboundFilters, when set, replaces Config.InboundFilters for its
	// fake upstream: the same binary with other settings is a build too.
	RelayConfig    relayconfig.Config `json:"relay_config,omitempty"`
	InboundFilters *bool              `json:"inbound_filters,omitempty"`
}

// Config describes a sweep.
type Config struct {
	// Builds are the Relays to measure; the first is the baseline the others
	// are compared with. One build with an empty Bin measures the harness.
	Builds []Build
	// Rates are the target envelopes per second (RateMax: as fast as
	// possible). With FindMax, the lowest and highest are the bounds of the
	// search.
	Rates []float64
	// Concurrency is the closed-loop senders of a RateMax step (default 64).
	Concurrency int
	// MaxRelayRSS stops blast early when Relay's RSS passes it (default
	// 4 GiB); the step says so.
	MaxRelayRSS uint64
	// Rounds repeats the whole sweep, interleaved: every rate (and build)
	// once, then again (default 1).
	Rounds int
	// Slices compares the two Builds in alternating slices of Slice on one
	// long-lived Relay each, per rate, instead of in steps (slices.go): pairs
	// are added until the change in CPU per envelope is known to within
	// Precision (a fraction; 0: never), or Budget is spent (split evenly
	// over the rates; default 10 min). Slice defaults to DefaultSlice.
	Slices    bool
	Slice     time.Duration
	Precision float64
	// Block is how long each build's Relay (and fake upstream) lives in a
	// comparison in slices before both are started afresh: each block's
	// processes are a new draw of what two processes of one binary differ
	// by, so more blocks shrink that part of the interval (default
	// DefaultBlock; a Block of at least Budget keeps one process per build).
	Block time.Duration
	// Prior is the spread between two processes of one binary in CPU per
	// envelope that a comparison in slices expects before its own blocks
	// weigh in (compare.Estimate); nil means compare.DefaultPrior.
	Prior  *compare.Prior
	Budget time.Duration
	// FindMax bisects between the bounds for the highest rate kept up with.
	FindMax bool
	// FindMaxProbes bounds the steps of the search (default 7).
	FindMaxProbes int

	Duration, Warmup, Idle        time.Duration
	ReadyTimeout, ShutdownTimeout time.Duration
	WarmupTimeout, DrainTimeout   time.Duration
	SampleInterval                time.Duration
	MaxP99                        time.Duration // verdict: latency p99 above it = fell behind
	// MaxCatchUp is the verdict's bound on forwarding after blast ended
	// (default 3 s).
	MaxCatchUp time.Duration

	// Traffic.
	Seed             uint64
	Projects         int
	PoolSize         int
	Mix              pool.Mix
	UserAgents       int
	UniqueUserAgents bool
	Encoding         compression.Encoding
	// Agents, when given, replace the generated agents (see
	// pool.Options.Agents); AgentsFrom names where they came from.
	Agents     []useragent.Weighted
	AgentsFrom string
	// Corpus, when set, is where the pool's envelopes come from instead of
	// the generators: recorded envelopes (package replay), re-targeted to
	// the projects and made fresh, PoolSize of them, built once per run as
	// a generated pool is. Mix and the user-agent options do not apply.
	Corpus *replay.Corpus
	// MaxInflight and Timeout are passed to blast (0 = blast's defaults).
	MaxInflight int
	Timeout     time.Duration

	// RelayCPUs pins Relay with taskset (a cpu list such as "1" or "0-1");
	// limits.max_thread_count is set to the number of CPUs in it.
	RelayCPUs string
	// HarnessCPUs pins orchestrate itself (blast, fake upstream) to a CPU
	// list. Empty: when RelayCPUs is set, the CPUs left over; "none": never.
	HarnessCPUs string
	// RelayConfig overrides are merged into the generated config.yml.
	RelayConfig relayconfig.Config
	// RelayLogLevel is Relay's logging.level (default info).
	RelayLogLevel string
	// Host is the address the fake upstream and Relay listen on:
	// "127.0.0.1" (the default), "::1" or another local IPv4 or IPv6
	// address. A relay.host in RelayConfig moves Relay alone.
	Host string

	// Perf records Relay with perf over each measured window into this file
	// (a suffix per step is added when there are several steps).
	Perf      string
	CallGraph string // perf --call-graph mode (dwarf, lbr, fp); default dwarf
	// PerfHarness also records orchestrate itself (blast, the fake upstream)
	// with perf over each measured window, next to Relay's recording
	// ("-harness" before the extension), and splits the harness's cores by
	// what its samples were doing (CPU.HarnessSplit).
	PerfHarness bool

	// StatsD sends Relay's metrics to an external server; StatsDListen runs
	// the built-in receiver there instead; StatsDMetrics are timer names
	// whose p50/p99 are reported.
	StatsD        string
	StatsDListen  string
	StatsDMetrics []string

	// Fault is injected into the fake upstream during the measured window.
	Fault *Fault
	// Quotas are added to every project config of the step's fake upstream
	// (upstream.ParseQuota's JSON); InboundFilters turns its inbound
	// filters on.
	Quotas         []json.RawMessage
	InboundFilters bool

	// Keep leaves the work directory (configs, logs) in place.
	Keep bool
	// WorkDir is where the run's temporary directory is made (os.TempDir if empty).
	WorkDir string
	// Log receives progress lines (nil: discarded).
	Log io.Writer
	// Progress, if set, is called with where the run stands as each step,
	// phase or pair of slices begins and about once a second between (for
	// a status line: package progress). Its calls never overlap, and none
	// comes after Run returns; it must return quickly.
	Progress func(Progress)

	// settle overrides how long forwarding and outcomes must stand still
	// for the drain to end (tests shorten it).
	settle time.Duration
	// onStep, if set, is called as each step begins (done false) and when
	// it has ended (done true); tests measure between steps with it.
	onStep func(st *Step, done bool)
}

// Harness reports whether the config measures the harness (no Relay).
func (c *Config) Harness() bool {
	return len(c.Builds) == 1 && c.Builds[0].Bin == ""
}

var buildName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$`)

// withDefaults validates c and fills defaults. Errors are *ConfigError
// (they wrap ErrConfig) naming the Config field.
func (c Config) withDefaults() (Config, error) {
	for _, check := range []func(*Config) error{
		(*Config).checkBuilds, (*Config).checkRates, (*Config).checkDurations,
		(*Config).checkTraffic, (*Config).checkRelayOptions,
	} {
		if err := check(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *Config) checkBuilds() error {
	if len(c.Builds) == 0 {
		c.Builds = []Build{{Name: "harness"}}
	}
	c.Builds = slices.Clone(c.Builds)
	seen := map[string]bool{}
	for i, b := range c.Builds {
		if b.Bin == "" && len(c.Builds) > 1 {
			return configerr.Errorf("Builds", "build %q has no binary (only a lone harness build may)", b.Name)
		}
		if b.Name == "" {
			if b.Bin == "" {
				b.Name = "harness"
			} else {
				b.Name = filepath.Base(b.Bin)
			}
			c.Builds[i] = b
		}
		if !buildName.MatchString(b.Name) {
			return configerr.Errorf("Builds", "build name %q: letters, digits, '.', '_', '-' only", b.Name)
		}
		if seen[b.Name] {
			return configerr.Errorf("Builds", "build name %q used twice", b.Name)
		}
		seen[b.Name] = true
	}
	return nil
}

func (c *Config) checkRates() error {
	if len(c.Rates) == 0 {
		return configerr.New("Rates", "no rates")
	}
	for _, r := range c.Rates {
		if r == RateMax {
			continue
		}
		if err := blast.CheckRate(r); err != nil {
			return configerr.Errorf("Rates", "%v, or max", err)
		}
	}
	switch {
	case c.FindMax && slices.Contains(c.Rates, RateMax):
		return configerr.New("FindMax", "bisects between two rates; max is not one")
	case c.FindMax && len(c.Rates) != 2:
		return configerr.New("FindMax", "wants two %s, the bounds (e.g. 100,5000)", "Rates")
	case c.FindMax && c.Rates[0] == c.Rates[1]:
		return configerr.New("FindMax", "the two bounds are equal")
	}
	if c.Rounds == 0 {
		c.Rounds = 1
	}
	if c.Rounds < 0 || c.Rounds > 100 {
		return configerr.Errorf("Rounds", "%d: want 1..100", c.Rounds)
	}
	if c.FindMaxProbes == 0 {
		c.FindMaxProbes = DefaultFindMaxProbes
	}
	return c.checkSlices()
}

// prior is the Prior a comparison in slices starts from.
func (c *Config) prior() compare.Prior {
	if c.Prior == nil {
		return compare.DefaultPrior()
	}
	return *c.Prior
}

// checkSlices checks the settings of a comparison in slices.
func (c *Config) checkSlices() error {
	if !c.Slices {
		return nil
	}
	if c.Slice == 0 {
		c.Slice = DefaultSlice
	}
	if c.Block == 0 {
		c.Block = DefaultBlock
	}
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	switch {
	case len(c.Builds) != 2:
		return configerr.New("Slices", "compares two builds (the first is the baseline)")
	case c.FindMax || c.Rounds > 1 || c.Fault != nil:
		return configerr.New("Slices", "does not go with FindMax, Rounds or Fault")
	case slices.Contains(c.Rates, RateMax):
		return configerr.New("Slices", "needs rates to send at; max is not one")
	case c.Slice < time.Second || c.Slice > 10*time.Minute:
		return configerr.Errorf("Slice", "%s: want 1s..10m", c.Slice)
	case c.Block < 10*c.Slice:
		return configerr.Errorf("Block", "%s: want at least ten slices (%s)", c.Block, 10*c.Slice)
	case c.Prior != nil && (!(c.Prior.Spread >= 0 && c.Prior.Spread < 1) || !(c.Prior.DF >= 0)):
		return configerr.Errorf("Prior", "spread %g on %g df: want a spread in [0, 1), e.g. 0.015, and df ≥ 0", c.Prior.Spread, c.Prior.DF)
	case c.Precision < 0 || c.Precision >= 1:
		return configerr.Errorf("Precision", "%g: want a fraction in [0, 1), e.g. 0.03", c.Precision)
	case c.Budget < 2*c.Slice || c.Budget > 24*time.Hour:
		return configerr.Errorf("Budget", "%s: want at least two slices and at most 24h", c.Budget)
	}
	return nil
}

func (c *Config) checkDurations() error {
	for _, x := range []struct {
		d     *time.Duration
		v     time.Duration
		field string
	}{
		{&c.Duration, DefaultDuration, "Duration"},
		{&c.ReadyTimeout, DefaultReadyTimeout, "ReadyTimeout"},
		{&c.ShutdownTimeout, DefaultShutdownTimeout, "ShutdownTimeout"},
		{&c.WarmupTimeout, DefaultWarmupTimeout, "WarmupTimeout"},
		{&c.DrainTimeout, DefaultDrainTimeout, "DrainTimeout"},
		{&c.SampleInterval, DefaultSampleInterval, "SampleInterval"},
		{&c.MaxP99, DefaultMaxP99, "MaxP99"},
		{&c.MaxCatchUp, DefaultMaxCatchUp, "MaxCatchUp"},
	} {
		if *x.d < 0 {
			return configerr.Errorf(x.field, "%s: must not be negative", *x.d)
		}
		if *x.d == 0 {
			*x.d = x.v
		}
	}
	if c.Warmup < 0 {
		return configerr.Errorf("Warmup", "%s: must not be negative", c.Warmup)
	}
	if c.Idle < 0 {
		return configerr.Errorf("Idle", "%s: must not be negative", c.Idle)
	}
	// Every step's blast must hold at least one request in Duration (a
	// rate of 0.01/s over 30 s would send nothing, or time one request).
	for _, r := range c.Rates {
		if r == RateMax {
			continue
		}
		if least := time.Duration(math.Ceil(1e9 / r)); c.Duration < least {
			return configerr.New("Duration", fmt.Sprintf("%v at rate %v/s holds less than one request: want at least %v, or higher %%s", c.Duration, r, least), "Rates")
		}
		bc := blast.Config{Rate: r, Duration: c.Duration, Warmup: c.Warmup}
		if err := bc.CheckSchedule(); err != nil {
			return err // Duration and Warmup, named as orchestrate's
		}
	}
	if c.Fault != nil {
		return validateFault(c.Fault, c.Duration)
	}
	return nil
}

func (c *Config) checkTraffic() error {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Concurrency < 1 || c.Concurrency > 10000 {
		return configerr.Errorf("Concurrency", "%d: want 1..10000", c.Concurrency)
	}
	if c.Projects == 0 {
		c.Projects = DefaultProjects
	}
	if c.Projects < 1 || c.Projects > 100000 {
		return configerr.Errorf("Projects", "%d: want 1..100000", c.Projects)
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	if c.PoolSize < 1 {
		return configerr.Errorf("PoolSize", "%d: want 1 or more", c.PoolSize)
	}
	if c.Mix != nil {
		if err := c.Mix.Validate(); err != nil {
			return configerr.Wrap("Mix", err)
		}
	}
	if err := pool.CheckAgents(c.Agents); err != nil {
		return configerr.Wrap("Agents", err)
	}
	if c.Corpus != nil {
		for _, x := range []struct {
			field string
			set   bool
		}{{"Mix", c.Mix != nil}, {"UserAgents", c.UserAgents != 0}, {"UniqueUserAgents", c.UniqueUserAgents}} {
			if x.set {
				return configerr.New(x.field, "does not apply to recorded envelopes (%s)", "Corpus")
			}
		}
	}
	return nil
}

func (c *Config) checkRelayOptions() error {
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if ip := net.ParseIP(c.Host); ip == nil || ip.IsUnspecified() {
		return configerr.Errorf("Host", "%q: want an IPv4 or IPv6 address to listen on, such as 127.0.0.1 or ::1", c.Host)
	}
	if c.MaxRelayRSS == 0 {
		c.MaxRelayRSS = DefaultMaxRelayRSS
	}
	if c.RelayCPUs != "" {
		if _, err := CountCPUs(c.RelayCPUs); err != nil {
			return configerr.Wrap("RelayCPUs", err)
		}
	}
	if c.HarnessCPUs != "" && c.HarnessCPUs != "none" {
		if _, err := CountCPUs(c.HarnessCPUs); err != nil {
			return configerr.Wrap("HarnessCPUs", err)
		}
	}
	if c.StatsD != "" && c.StatsDListen != "" {
		return configerr.New("StatsDListen", "cannot be used with %s", "StatsD")
	}
	if len(c.StatsDMetrics) > 0 && c.StatsDListen == "" {
		return configerr.New("StatsDMetrics", "needs %s (the built-in receiver)", "StatsDListen")
	}
	if c.Harness() {
		for _, x := range []struct {
			field string
			set   bool
		}{{"Perf", c.Perf != ""}, {"RelayCPUs", c.RelayCPUs != ""}, {"StatsD", c.StatsD != ""},
			{"StatsDListen", c.StatsDListen != ""}, {"RelayConfig", c.RelayConfig != nil}} {
			if x.set {
				return configerr.New(x.field, "needs a Relay to measure (%s)", "Builds")
			}
		}
	}
	if c.PerfHarness && c.Perf == "" {
		return configerr.New("PerfHarness", "needs %s (the harness's recording goes next to Relay's)", "Perf")
	}
	if c.Perf != "" && c.CallGraph == "" {
		c.CallGraph = "dwarf"
	}
	switch c.CallGraph {
	case "", "dwarf", "lbr", "fp":
	default:
		return configerr.Errorf("CallGraph", "%q: want dwarf, lbr or fp", c.CallGraph)
	}
	return nil
}

// CountCPUs counts the CPUs in a taskset list such as "0", "0-3" or "0,2-3".
func CountCPUs(list string) (int, error) {
	cpus, err := relayproc.ParseCPUList(list)
	return len(cpus), err
}
