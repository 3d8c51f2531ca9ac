package main

import (
	"flag"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/useragent"
)

// options are blast's flags as given, and the values parsed from them.
type options struct {
	target, rate, mix, projectsFrom, encoding, out, dump, shardSpec, client, sdkClient, cpuProfile string
	agentsFile, envelopes                                                                          string

	duration, warmup, timeout, grace   time.Duration
	count                              int64
	seed                               uint64
	projects, userAgents, poolSize     int
	concurrency, maxInflight, maxConns int
	zipfS                              float64
	uniqueUA, progress                 bool

	// set are the flags given on the command line.
	set map[string]bool

	// Parsed by check.
	rateV         float64
	shard, shards int
	mixV          pool.Mix
	encV          compression.Encoding
	agents        []useragent.Weighted
}

// define binds the flags to o.
func (o *options) define(fs *flag.FlagSet) {
	fs.StringVar(&o.target, "target", "", "base `URL` of the Relay or fake-upstream, e.g. http://127.0.0.1:3000")
	fs.StringVar(&o.rate, "rate", "1000", "`RATE` in requests per second over all shards, 0.001 to 10000000 (at least one request per shard in --duration), or max (closed loop with --concurrency)")
	fs.DurationVar(&o.duration, "duration", 0, "measured duration; 0: 10s, or until --count")
	fs.Int64Var(&o.count, "count", 0, "measured requests of the shared schedule (all shards); ends the run first if reached; 0: no limit")
	fs.DurationVar(&o.warmup, "warmup", 0, "discarded warm-up sent before the measured schedule; 0: none")
	fs.StringVar(&o.mix, "mix", pool.DefaultMix, "envelope kinds and `WEIGHTS`, e.g. errors=1 or errors=3,transactions=1")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of projects and pool")
	fs.IntVar(&o.projects, "projects", 100, "number of projects derived from --seed (as fake-upstream --projects)")
	fs.StringVar(&o.projectsFrom, "projects-from", "", "fetch the projects from a fake-upstream's /projects `URL` instead (e.g. http://127.0.0.1:8000/projects)")
	fs.Float64Var(&o.zipfS, "zipf-s", pool.DefaultZipfS, "Zipf exponent (> 1) for projects and user agents")
	fs.IntVar(&o.userAgents, "user-agents", pool.DefaultUserAgents, "distinct user agents")
	fs.BoolVar(&o.uniqueUA, "unique-user-agents", false, "give every envelope its own user agent (of --user-agents-file: each in turn)")
	fs.StringVar(&o.agentsFile, "user-agents-file", "", "real user agents instead, one per line of `FILE`: AGENT, or AGENT<TAB>WEIGHT to draw by weight, not by line order with Zipf")
	fs.IntVar(&o.poolSize, "pool", 20000, "envelopes in the pool (sent cyclically)")
	fs.StringVar(&o.encoding, "encoding", "zstd", "Content-Encoding `NAME` of the bodies: identity, gzip, deflate, br, zstd")
	fs.StringVar(&o.out, "out", "", "write the result as JSON to `FILE` (blast merge reads it)")
	fs.StringVar(&o.envelopes, "envelopes", "", "build the pool from the recorded *.envelope files in `DIR` (a fake-upstream --capture or a blast --dump) instead of generating it: each re-targeted to the projects, with new ids and current timestamps")
	fs.StringVar(&o.dump, "dump", "", "write the pool to `DIR` (envelopes + manifest.json) and exit")
	fs.IntVar(&o.concurrency, "concurrency", blast.DefaultConcurrency, "closed-loop workers with --rate max, 1 to 10000")
	fs.IntVar(&o.maxInflight, "max-inflight", blast.DefaultMaxInflight, "requests in flight at most; slots beyond are dropped")
	fs.IntVar(&o.maxConns, "max-conns", blast.DefaultMaxConns, "connections to the target at most; requests beyond wait for one (counted in latency)")
	fs.StringVar(&o.shardSpec, "shard", "0/1", "send shard `i/N` of the shared schedule (slots k with k mod N = i)")
	fs.BoolVar(&o.progress, "progress", false, "print a progress line every second on stderr (default: when stderr is a terminal)")
	fs.DurationVar(&o.timeout, "timeout", blast.DefaultTimeout, "per-request timeout")
	fs.DurationVar(&o.grace, "grace", 0, "on SIGINT, wait this long for requests in flight; 0: --timeout")
	fs.StringVar(&o.client, "client", blast.ClientFastHTTP, "HTTP `CLIENT`: fasthttp or net/http")
	fs.StringVar(&o.sdkClient, "sdk-client", blast.DefaultSDKClient, "sentry_client `NAME` in X-Sentry-Auth")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the sending phase to `FILE`")
}

// help is blast's --help.
var help = cli.Help{
	About: `blast replays a deterministic pool of Sentry envelopes at an exact rate against a Relay (or a fake-upstream) and reports latency without coordinated omission: every request is timed from when the schedule said to send it.`,
	Usage: []string{
		"blast --target URL [flags]",
		"blast merge [--out FILE] A.json B.json ...   one result from shards run apart",
		"blast --dump DIR [flags]                     write the pool and exit",
	},
	Examples: []cli.Example{
		{What: "1,000 envelopes per second for 30 s at a Relay, errors only",
			Command: "blast --target http://127.0.0.1:3000 --rate 1000 --duration 30s --mix errors=1"},
		{What: "A Relay run by hand against a fake-upstream: its projects, so that Relay knows the keys, and envelopes it captured earlier (fake-upstream --capture), made fresh",
			Command: "blast --target http://127.0.0.1:3000 --projects-from http://127.0.0.1:8000/projects \\\n    --envelopes captured/ --rate 500"},
		{What: "20,000/s from two machines (or processes), then one result",
			Command: "blast --target http://127.0.0.1:3000 --rate 20000 --shard 0/2 --out a.json\n" +
				"blast --target http://127.0.0.1:3000 --rate 20000 --shard 1/2 --out b.json\n" +
				"blast merge a.json b.json"},
	},
	Groups: []cli.Group{
		{Title: "Target", Flags: []string{"target", "client", "sdk-client", "max-conns", "max-inflight", "timeout"}},
		{Title: "Traffic", Flags: []string{"rate", "duration", "count", "warmup", "concurrency", "shard", "grace"}},
		{Title: "Pool", Flags: []string{"mix", "encoding", "pool", "seed", "projects", "projects-from", "zipf-s",
			"user-agents", "user-agents-file", "unique-user-agents", "envelopes", "dump"}},
		{Title: "Output", Flags: []string{"out", "progress", "cpuprofile"}},
	},
	After: exitStatus,
}

// mergeHelp is blast merge's --help.
var mergeHelp = cli.Help{
	About: `blast merge adds up the results of shards of one schedule (blast --shard i/N --out FILE) into one result, as if one blast had sent them all.`,
	Usage: []string{"blast merge [--out FILE] A.json B.json ..."},
	Examples: []cli.Example{
		{What: "Two shards into one summary", Command: "blast merge a.json b.json"},
		{What: "Four shards, the merged result kept", Command: "blast merge --out all.json s0.json s1.json s2.json s3.json"},
		{What: "Every shard in a directory", Command: "blast merge --out all.json results/shard-*.json"},
	},
	Groups: []cli.Group{{Title: "Output", Flags: []string{"out"}}},
	After:  exitStatus,
}

// exitStatus ends --help.
const exitStatus = `Exit status: 0 the run (or merged result) is valid; 1 it is INVALID (no request succeeded, more than 1% of requests unanswered (refused, reset, timed out), more than 0.1% of slots dropped, schedule lag p99 over 5ms, or requests abandoned: the reasons are printed, the result still written) or blast failed; 2 bad usage (a flag, or result files that merge refuses: one given twice, overlapping shards, different schedules, a damaged file whose counters do not add up); 130 interrupted (the partial result is printed and written).`

// check parses and validates the flags.
func (o *options) check() error {
	var err error
	if o.rateV, err = blast.ParseRate(o.rate); err != nil {
		return err
	}
	if o.shard, o.shards, err = blast.ParseShard(o.shardSpec); err != nil {
		return err
	}
	if o.envelopes != "" {
		for _, f := range []string{"mix", "user-agents", "user-agents-file", "unique-user-agents", "zipf-s"} {
			if o.set[f] {
				return cli.Usagef("--envelopes replays recorded envelopes: --%s does not apply", f)
			}
		}
	}
	if o.mixV, err = pool.ParseMix(o.mix); err != nil {
		return cli.Usagef("--mix: %w", err)
	}
	if o.encV, err = compression.ParseEncoding(o.encoding); err != nil || o.encoding == "" {
		return cli.Usagef("--encoding %q: want identity, gzip, deflate, br or zstd", o.encoding)
	}
	if o.agentsFile != "" {
		if o.agents, err = useragent.ReadFile(o.agentsFile); err != nil {
			return cli.Usagef("--user-agents-file: %w", err)
		}
	}
	if o.dump == "" {
		if _, err := blast.ParseTarget(o.target); err != nil {
			return err
		}
	}
	switch {
	case o.duration < 0 || o.count < 0 || o.warmup < 0 || o.timeout < 0 || o.grace < 0:
		return cli.Usagef("durations and --count must not be negative")
	case o.poolSize < 1 || o.poolSize > pool.MaxSize:
		return cli.Usagef("--pool %d: want 1..%d", o.poolSize, pool.MaxSize)
	case o.zipfS <= 1:
		return cli.Usagef("--zipf-s %v: want > 1", o.zipfS)
	case o.userAgents < 1:
		return cli.Usagef("--user-agents %d: want >= 1", o.userAgents)
	case o.concurrency < 1 || o.maxInflight < 1 || o.maxConns < 1:
		return cli.Usagef("--concurrency, --max-inflight and --max-conns must be >= 1")
	case o.client != blast.ClientFastHTTP && o.client != blast.ClientNetHTTP:
		return cli.Usagef("--client %q: want fasthttp or net/http", o.client)
	}
	if o.dump == "" {
		// Before the pool is built: a schedule blast cannot run (a rate
		// beyond what it can pace, less than one request in --duration)
		// is bad usage, with the limit named.
		s := blast.Config{Rate: o.rateV, Concurrency: o.concurrency, Duration: o.duration, Count: o.count, Warmup: o.warmup, Shard: o.shard, Shards: o.shards}
		if err := s.CheckSchedule(); err != nil {
			return err
		}
	}
	return nil
}
