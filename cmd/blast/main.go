// Command blast replays a deterministic pool of Sentry envelopes at an exact
// rate against a Relay (or fake-upstream) and reports latency without
// coordinated omission. See package blast for the model.
//
//	blast --target http://127.0.0.1:3000 --rate 1000 --duration 30s --mix errors=1
//	blast --target ... --rate 20000 --shard 0/2 --out a.json   (and 1/2 elsewhere)
//	blast merge a.json b.json
//	blast --dump DIR --pool 1000 --encoding zstd
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/relayload/relayload/blast"
	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/pool"
	"github.com/relayload/relayload/projects"
)

// sendingMemoryBudget is what blast may use beyond the pool's bodies while
// sending (issue 4's target: 64 MB at 20k req/s).
const sendingMemoryBudget = 64 << 20

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var err error
	if len(args) > 0 && args[0] == "merge" {
		err = merge(args[1:], stdout)
	} else {
		err = blastCmd(args, stdout, stderr)
	}
	return cli.Exit("blast", err, stderr, flagNames())
}

// flagNames maps blast.Config fields to the flags that set them.
func flagNames() map[string]string {
	return map[string]string{
		"Target": "--target", "Rate": "--rate", "Concurrency": "--concurrency", "Duration": "--duration", "Count": "--count",
		"Warmup": "--warmup", "MaxInflight": "--max-inflight", "MaxConns": "--max-conns", "Shard": "--shard",
		"Timeout": "--timeout", "Grace": "--grace", "Client": "--client", "SDKClient": "--sdk-client", "Pool": "--pool",
		"Projects": "--projects-from",
	}
}

func blastCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("blast", flag.ContinueOnError)
	var (
		target       = fs.String("target", "", "base URL of the Relay or fake-upstream, e.g. http://127.0.0.1:3000")
		rateS        = fs.String("rate", "1000", "requests per second over all shards, or max (closed loop with --concurrency)")
		duration     = fs.Duration("duration", 0, "measured duration (default 10s unless --count)")
		count        = fs.Int64("count", 0, "measured requests of the shared schedule (all shards); ends the run first if reached")
		warmup       = fs.Duration("warmup", 0, "discarded warm-up sent before the measured schedule")
		mixS         = fs.String("mix", pool.DefaultMix, "kind weights, e.g. errors=3,transactions=2,sessions=2,checkins=1,logs=2")
		seed         = fs.Uint64("seed", 1, "seed of projects and pool")
		nProjects    = fs.Int("projects", 100, "number of projects derived from --seed (as fake-upstream --projects)")
		projectsFrom = fs.String("projects-from", "", "fetch projects from a fake-upstream's URL/projects instead")
		zipfS        = fs.Float64("zipf-s", pool.DefaultZipfS, "Zipf exponent (> 1) for projects and user agents")
		userAgents   = fs.Int("user-agents", pool.DefaultUserAgents, "distinct user agents")
		uniqueUA     = fs.Bool("unique-user-agents", false, "give every envelope its own user agent")
		poolSize     = fs.Int("pool", 20000, "envelopes in the pool (sent cyclically)")
		encodingS    = fs.String("encoding", "zstd", "Content-Encoding of bodies: identity, gzip, deflate, br, zstd")
		out          = fs.String("out", "", "write the result as JSON to this file")
		dump         = fs.String("dump", "", "write the pool to this directory (envelopes + manifest.json) and exit")
		concurrency  = fs.Int("concurrency", blast.DefaultConcurrency, "closed-loop workers with --rate max")
		maxInflight  = fs.Int("max-inflight", blast.DefaultMaxInflight, "requests in flight at most; slots beyond are dropped")
		maxConns     = fs.Int("max-conns", blast.DefaultMaxConns, "connections to the target at most; requests beyond wait for one (counted in latency)")
		shardS       = fs.String("shard", "0/1", "send shard i of N of the shared schedule (slots k with k mod N = i)")
		progress     = fs.Bool("progress", false, "print a progress line every second on stderr (default: when stderr is a terminal)")
		timeout      = fs.Duration("timeout", blast.DefaultTimeout, "per-request timeout")
		grace        = fs.Duration("grace", 0, "on SIGINT, wait this long for requests in flight (default --timeout)")
		client       = fs.String("client", blast.ClientFastHTTP, "HTTP client: fasthttp or net/http")
		sdkClient    = fs.String("sdk-client", blast.DefaultSDKClient, "sentry_client in X-Sentry-Auth")
		cpuProfile   = fs.String("cpuprofile", "", "write a CPU profile of the sending phase to this file")
	)
	if err := cli.Parse(fs, args, stdout, usage); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}

	// Validate everything before building or sending anything.
	rate, err := blast.ParseRate(*rateS)
	if err != nil {
		return err
	}
	shard, shards, err := blast.ParseShard(*shardS)
	if err != nil {
		return err
	}
	mix, err := pool.ParseMix(*mixS)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	enc, err := compression.ParseEncoding(*encodingS)
	if err != nil || *encodingS == "" {
		return cli.Usagef("encoding %q: want identity, gzip, deflate, br or zstd", *encodingS)
	}
	if *dump == "" {
		if _, err := blast.ParseTarget(*target); err != nil {
			return err
		}
	}
	switch {
	case *duration < 0 || *count < 0 || *warmup < 0 || *timeout < 0 || *grace < 0:
		return cli.Usagef("durations and --count must not be negative")
	case *poolSize < 1 || *poolSize > pool.MaxSize:
		return cli.Usagef("--pool %d: want 1..%d", *poolSize, pool.MaxSize)
	case *zipfS <= 1:
		return cli.Usagef("--zipf-s %v: want > 1", *zipfS)
	case *userAgents < 1:
		return cli.Usagef("--user-agents %d: want >= 1", *userAgents)
	case *concurrency < 1 || *maxInflight < 1 || *maxConns < 1:
		return cli.Usagef("--concurrency, --max-inflight and --max-conns must be >= 1")
	case *client != blast.ClientFastHTTP && *client != blast.ClientNetHTTP:
		return cli.Usagef("--client %q: want fasthttp or net/http", *client)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var ps []projects.Project
	if *projectsFrom != "" {
		if ps, err = blast.FetchProjects(ctx, *projectsFrom); err != nil {
			return err
		}
	} else if ps, err = projects.Generate(*seed, *nProjects); err != nil {
		return &cli.UsageError{Err: err}
	}
	t0 := time.Now()
	p, err := pool.Build(ctx, pool.Options{
		Seed: *seed, Size: *poolSize, Mix: mix, Projects: ps, ZipfS: *zipfS,
		UserAgents: *userAgents, UniqueUserAgents: *uniqueUA, Encoding: enc, Now: time.Now(),
	})
	if err != nil {
		if ctx.Err() != nil {
			return err // interrupted while building
		}
		return &cli.UsageError{Err: err}
	}
	if *dump != "" {
		if err := p.Dump(*dump); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %d envelopes to %s\n", len(p.Entries), *dump)
		return nil
	}
	built := time.Since(t0)
	// Keep only the wire bodies and hand the build's garbage back to the OS,
	// so blast's RSS while sending is the pool's bodies plus sending state.
	p = blast.ForSending(p)
	runtime.GC() // twice: sync.Pool caches (encoders) survive one collection
	debug.FreeOSMemory()
	var bodies int64
	for _, e := range p.Entries {
		bodies += int64(len(e.Body))
	}
	fmt.Fprintf(stderr, "pool: %d envelopes (%s, %.1f MiB of bodies) built in %s\n",
		len(p.Entries), enc, float64(bodies)/(1<<20), built.Round(time.Millisecond))
	// The pool's bodies are live for the whole run, so with the default GOGC
	// the heap may grow by as much garbage as the pool is large before a
	// collection. A soft limit of the bodies plus the sending budget keeps
	// RSS bounded for any duration (GOMEMLIMIT, if set, wins).
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(bodies + sendingMemoryBudget)
	}

	cfg := blast.Config{
		Target: *target, Pool: p, Rate: rate, Concurrency: *concurrency, Duration: *duration, Count: *count,
		Warmup: *warmup, MaxInflight: *maxInflight, MaxConns: *maxConns, Shard: shard, Shards: shards, Timeout: *timeout,
		Grace: *grace, Client: *client, SDKClient: *sdkClient,
	}
	if *progress || isTerminal(os.Stderr) {
		cfg.Progress = stderr
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	res, err := blast.Run(ctx, cfg)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	if err := res.WriteSummary(stdout); err != nil {
		return err
	}
	if *out != "" {
		if err := res.WriteFile(*out); err != nil {
			return err
		}
	}
	return nil
}

func merge(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("blast merge", flag.ContinueOnError)
	out := fs.String("out", "", "write the merged result as JSON to this file")
	if err := cli.Parse(fs, args, stdout, usage); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return cli.Usagef("merge: no result files given")
	}
	var rs []*blast.Result
	for _, path := range fs.Args() {
		r, err := blast.ReadFile(path)
		if err != nil {
			return &cli.UsageError{Err: err}
		}
		rs = append(rs, r)
	}
	m, err := blast.Merge(rs...)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	if err := m.WriteSummary(stdout); err != nil {
		return err
	}
	if *out != "" {
		return m.WriteFile(*out)
	}
	return nil
}

// usage heads --help.
const usage = `usage: blast [flags]   (or: blast merge [--out FILE] A.json B.json ...)

Exit status: 0 done, 1 failed, 2 bad usage.

Flags:
`

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
