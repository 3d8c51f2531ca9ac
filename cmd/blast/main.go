// Command blast replays a deterministic pool of Sentry envelopes at an exact
// rate against a Relay (or fake-upstream) and reports latency without
// coordinated omission. See package blast for the model.
//
//	blast --target http://127.0.0.1:3000 --rate 1000 --duration 30s --mix errors=1
//	blast --target ... --rate 20000 --shard 0/2 --out a.json   (and 1/2 elsewhere)
//	blast merge a.json b.json
//	blast --dump DIR --pool 1000 --encoding zstd
//	blast --target ... --envelopes DIR   (a capture or a dump, replayed)
package main

import (
	"context"
	"errors"
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

	"github.com/prometheus/procfs"
	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/replay"
	"github.com/relayload/relayload/projects"
)

// cgroupMount is where cgroup v2 is mounted, for the memory check's
// memory.max.
const cgroupMount = "/sys/fs/cgroup"

// sendingMemoryBudget is what blast may use beyond the pool's bodies while
// sending; internal/cmd/blastbench reports the peak RSS beyond the pool.
const sendingMemoryBudget = 64 << 20

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errInterrupted ends a run stopped by SIGINT or SIGTERM (its partial
// result printed and written): exit status 130, as orchestrate's.
var errInterrupted = errors.New("interrupted; the result above is partial")

func run(args []string, stdout, stderr io.Writer) int {
	var err error
	if len(args) > 0 && args[0] == "merge" {
		err = merge(args[1:], stdout)
	} else {
		err = blastCmd(args, stdout, stderr)
	}
	if errors.Is(err, errInterrupted) {
		fmt.Fprintf(stderr, "blast: %v\n", err)
		return cli.Interrupted
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
	var o options
	o.define(fs)
	if err := cli.ParseHelp(fs, args, stdout, help); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	// Validate everything before building or sending anything.
	if err := o.check(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := o.buildPool(ctx, stdout, stderr)
	if err != nil || p == nil {
		return err
	}
	return o.send(ctx, p, stdout, stderr)
}

// buildPool builds the pool (and with --dump writes it and returns nil),
// keeping only what sending needs.
func (o *options) buildPool(ctx context.Context, stdout, stderr io.Writer) (*pool.Pool, error) {
	var ps []projects.Project
	var err error
	if o.projectsFrom != "" {
		if ps, err = blast.FetchProjects(ctx, o.projectsFrom); err != nil {
			return nil, err
		}
	} else if ps, err = projects.Generate(o.seed, o.projects); err != nil {
		return nil, &cli.UsageError{Err: err}
	}
	t0 := time.Now()
	opts := pool.Options{
		Seed: o.seed, Size: o.poolSize, Mix: o.mixV, Projects: ps, ZipfS: o.zipfS,
		UserAgents: o.userAgents, UniqueUserAgents: o.uniqueUA, Agents: o.agents, AgentsFrom: o.agentsFile,
		Encoding: o.encV, Now: time.Now(),
	}
	if note := opts.AgentsNote(); note != "" {
		fmt.Fprintln(stderr, "blast: "+note)
	}
	var corpus *replay.Corpus
	if o.envelopes != "" {
		if corpus, err = replay.Load(o.envelopes, 0); err != nil {
			return nil, cli.Usagef("--envelopes: %w", err)
		}
		fmt.Fprintln(stderr, "corpus: "+corpusLine(corpus.Summary()))
		opts.Mix, opts.ZipfS, opts.UserAgents = nil, 0, 0
	}
	// Before building: the pool is allocated whole, unless a generated
	// one is dumped (it is written a batch at a time).
	use := blast.Send
	switch {
	case o.dump != "" && corpus == nil:
		use = blast.StreamedDump
	case o.dump != "":
		use = blast.Dump
	}
	lim := blast.ReadLimits(procfs.DefaultMountPoint, cgroupMount)
	var mem blast.PoolMemory
	if corpus != nil {
		var est pool.Estimate
		if est, err = replay.Estimate(ctx, corpus, opts); err == nil {
			mem, err = blast.CheckMemory(est, use, lim)
		}
	} else {
		mem, err = blast.CheckPoolMemory(ctx, opts, use, lim)
	}
	if err == nil && os.Getenv("GOMEMLIMIT") == "" && mem.Limit != "" {
		// The build's garbage is collected before the heap outgrows the
		// machine (by default the heap may grow to twice what is live).
		debug.SetMemoryLimit(mem.Available)
	}
	var p *pool.Pool
	switch {
	case err != nil:
	case use == blast.StreamedDump:
		// The options were checked by the estimate: what fails here is
		// writing, or an interrupt.
		n, err := pool.DumpStream(ctx, opts, o.dump)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "wrote %d envelopes to %s\n", n, o.dump)
		return nil, nil
	case corpus != nil:
		p, err = replay.Build(ctx, corpus, opts)
	default:
		p, err = pool.Build(ctx, opts)
	}
	if err != nil {
		if errors.Is(err, blast.ErrConfig) {
			return nil, err // too large for the memory there is
		}
		if ctx.Err() != nil {
			return nil, err // interrupted while building
		}
		return nil, &cli.UsageError{Err: err}
	}
	if o.dump != "" {
		if err := p.Dump(o.dump); err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "wrote %d envelopes to %s\n", len(p.Entries), o.dump)
		return nil, nil
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
		len(p.Entries), o.encV, float64(bodies)/(1<<20), built.Round(time.Millisecond))
	// The pool's bodies are live for the whole run, so with the default GOGC
	// the heap may grow by as much garbage as the pool is large before a
	// collection. A soft limit of the bodies plus the sending budget keeps
	// RSS bounded for any duration (GOMEMLIMIT, if set, wins).
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(bodies + sendingMemoryBudget)
	}
	return p, nil
}

// send runs blast with the pool and writes the result.
func (o *options) send(ctx context.Context, p *pool.Pool, stdout, stderr io.Writer) error {
	cfg := blast.Config{
		Target: o.target, Pool: p, Rate: o.rateV, Concurrency: o.concurrency, Duration: o.duration, Count: o.count,
		Warmup: o.warmup, MaxInflight: o.maxInflight, MaxConns: o.maxConns, Shard: o.shard, Shards: o.shards, Timeout: o.timeout,
		Grace: o.grace, Client: o.client, SDKClient: o.sdkClient,
	}
	if o.progress || isTerminal(os.Stderr) {
		cfg.Progress = stderr
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	res, err := blast.Run(ctx, cfg)
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	if err := res.WriteSummary(stdout); err != nil {
		return err
	}
	if o.out != "" {
		if err := res.WriteFile(o.out); err != nil {
			return err
		}
	}
	if res.Interrupted {
		return errInterrupted
	}
	return res.Check() // INVALID (e.g. no request succeeded): exit status 1
}

func merge(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("blast merge", flag.ContinueOnError)
	out := fs.String("out", "", "write the merged result as JSON to `FILE`")
	if err := cli.ParseHelp(fs, args, stdout, mergeHelp); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return cli.Usagef("merge: no result files given")
	}
	// Files that cannot be read, or would count slots twice or add up
	// different schedules, are bad input.
	m, err := blast.MergeFiles(fs.Args()...)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	if err := m.WriteSummary(stdout); err != nil {
		return err
	}
	if *out != "" {
		if err := m.WriteFile(*out); err != nil {
			return err
		}
	}
	return m.Check()
}

// corpusLine describes a corpus in one line.
func corpusLine(s replay.Summary) string {
	return fmt.Sprintf("%s: %d envelope files (%.1f MiB, %s), items %s", s.Dir, s.Files, float64(s.Bytes)/(1<<20), s.Digest, replay.FormatCounts(s.ItemTypes))
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
