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
	"strings"
	"syscall"
	"time"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/report"
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
	// Before anything else: this may re-execute the program (same PID).
	orchestrate.QuietSysmon()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const exitStatus = `
Exit status: 0 all steps ran, 1 some step failed or a --fail-on threshold was crossed, 2 bad usage, 130 interrupted.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "relay-report" {
		return runRelayReport(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("orchestrate", flag.ContinueOnError)
	var o options
	o.define(fs)
	err := cli.Parse(fs, args, stdout, usage)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, exitStatus)
		return cli.OK
	}
	if err == nil && fs.NArg() > 0 {
		err = cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	var cfg orchestrate.Config
	var g gate
	if err == nil {
		cfg, err = o.config()
	}
	if err == nil {
		g.base, g.thresholds, err = o.gate()
		g.path = o.baseline
	}
	if err == nil && o.out != "" {
		// Before anything runs: a sweep's results are not lost to an
		// --out that cannot be written.
		if cerr := report.CheckDir(o.out); cerr != nil {
			err = cli.Usagef("--out: %w", cerr)
		}
	}
	if err != nil {
		return cli.Exit("orchestrate", err, stderr, flagNames())
	}
	if !o.quiet {
		cfg.Log = stderr
	}
	warnRelayConfig("orchestrate", cfg.RelayConfig, stderr)
	return sweep(cfg, g, o.out, o.quiet, stdout, stderr)
}

// warnRelayConfig warns on stderr of --relay-config's top-level keys that
// are not Relay's config sections: Relay ignores them without a word.
func warnRelayConfig(prog string, c relayconfig.Config, stderr io.Writer) {
	for _, k := range relayconfig.UnknownSections(c) {
		fmt.Fprintf(stderr, "%s: warning: --relay-config: %s\n", prog, relayconfig.UnknownSection(k))
	}
}

// gate is --baseline and --fail-on.
type gate struct {
	base       *orchestrate.Report
	path       string
	thresholds []orchestrate.Threshold
}

// sweep runs the sweep and writes its report; SIGINT/SIGTERM end it with a
// partial report.
func sweep(cfg orchestrate.Config, g gate, out string, quiet bool, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	rep, err := orchestrate.Run(ctx, cfg)
	if rep == nil {
		return cli.Exit("orchestrate", err, stderr, flagNames())
	}
	stop() // a second Ctrl-C now kills at once
	if g.base != nil && !rep.Interrupted {
		res := orchestrate.Gate(rep, g.base, g.path, g.thresholds)
		rep.Gate = &res
	}
	report.Text(stdout, rep)
	if out != "" {
		paths, werr := report.Write(out, rep)
		if werr != nil {
			return cli.Exit("orchestrate", fmt.Errorf("writing the report: %w", werr), stderr, nil)
		}
		fmt.Fprintf(stderr, "wrote %s\n", strings.Join(paths, ", "))
	}
	if !quiet {
		fmt.Fprintf(stderr, "sweep took %s\n", time.Since(start).Round(time.Second))
	}
	switch {
	case rep.Interrupted:
		fmt.Fprintln(stderr, "orchestrate: interrupted; the report above is partial")
		return cli.Interrupted
	case rep.Failed > 0:
		fmt.Fprintf(stderr, "orchestrate: %d step(s) failed\n", rep.Failed)
		return cli.Failed
	case rep.Gate != nil && len(rep.Gate.Breaches) > 0:
		fmt.Fprintf(stderr, "orchestrate: %d threshold(s) crossed against %s\n", len(rep.Gate.Breaches), g.path)
		return cli.Failed
	}
	return cli.OK
}
