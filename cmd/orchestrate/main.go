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
	"strings"
	"syscall"
	"time"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/progress"
	"github.com/relayload/relayload/internal/report"
)

func main() {
	// Before anything else: this may re-execute the program (same PID).
	orchestrate.QuietSysmon()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "relay-report" {
		return runRelayReport(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("orchestrate", flag.ContinueOnError)
	var o options
	o.define(fs)
	err := cli.ParseHelp(fs, args, stdout, help)
	if errors.Is(err, flag.ErrHelp) {
		return cli.OK
	}
	if err == nil && fs.NArg() > 0 {
		err = cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	var cfg orchestrate.Config
	var g gate
	if err == nil {
		cfg, err = o.config()
	}
	if err == nil {
		g, err = o.gate(cfg)
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
	warnRelayConfig("orchestrate", cfg.RelayConfig, stderr)
	var status *progress.Line
	if !o.quiet {
		status = progress.New(stderr, progress.Detect(stderr))
		cfg.Log = cli.WrapLines(status.Writer(), cli.Width)
		cfg.Progress = func(p orchestrate.Progress) { status.Update(progress.Describe("", p)) }
	}
	return sweep(cfg, g, o.out, o.quiet, status, stdout, stderr)
}

// names are the files' base names, comma-separated.
func names(paths []string) string {
	var n []string
	for _, p := range paths {
		n = append(n, filepath.Base(p))
	}
	return strings.Join(n, ", ")
}

// warnRelayConfig warns on stderr of --relay-config's top-level keys that
// are not Relay's config sections: Relay ignores them without a word.
func warnRelayConfig(prog string, c relayconfig.Config, stderr io.Writer) {
	for _, k := range relayconfig.UnknownSections(c) {
		fmt.Fprintln(stderr, cli.Wrap(prog+": warning: --relay-config: "+relayconfig.UnknownSection(k), cli.Width, "    "))
	}
}

// gate is --baseline and --fail-on: its changes (thresholds) and its
// absolute limits.
type gate struct {
	base       *orchestrate.Report
	path       string
	thresholds []orchestrate.Threshold
	limits     []orchestrate.Threshold
}

// sweep runs the sweep and writes its report; SIGINT/SIGTERM end it with a
// partial report. The status line (nil with --quiet) is closed when the
// sweep ends, before anything else is printed.
func sweep(cfg orchestrate.Config, g gate, out string, quiet bool, status *progress.Line, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	rep, err := orchestrate.Run(ctx, cfg)
	status.Close()
	if rep == nil {
		return cli.Exit("orchestrate", err, stderr, flagNames())
	}
	stop() // a second Ctrl-C now kills at once
	switch {
	case rep.Interrupted || g.thresholds == nil:
	case g.base != nil:
		res := orchestrate.Gate(rep, g.base, g.path, g.thresholds)
		rep.Gate = &res
	default:
		res, err := orchestrate.IntervalGate(rep, g.thresholds)
		if err != nil {
			return cli.Exit("orchestrate", err, stderr, flagNames())
		}
		rep.Gate = &res
	}
	if g.limits != nil && !rep.Interrupted {
		res := orchestrate.AbsoluteGate(rep, g.limits)
		if rep.Gate != nil {
			res = rep.Gate.Join(res)
		}
		rep.Gate = &res
	}
	reportMD := ""
	if out != "" {
		paths, werr := report.Write(out, rep)
		if werr != nil {
			report.Text(stdout, rep, "")
			return cli.Exit("orchestrate", fmt.Errorf("writing the report: %w", werr), stderr, nil)
		}
		reportMD = filepath.Join(out, report.MarkdownFile)
		fmt.Fprintln(stderr, cli.Wrap(fmt.Sprintf("wrote %d files into %s: %s", len(paths), out, names(paths)), cli.Width, ""))
	}
	report.Text(stdout, rep, reportMD)
	if !quiet {
		fmt.Fprintf(stderr, "sweep took %s\n", time.Since(start).Round(time.Second))
	}
	switch {
	case rep.Interrupted:
		fmt.Fprintln(stderr, "orchestrate: interrupted; the report above is partial")
		return cli.Interrupted
	case rep.Failed > 0:
		fmt.Fprintf(stderr, "orchestrate: %d step(s) or comparison(s) failed\n", rep.Failed)
		return cli.Failed
	case rep.Gate != nil && len(rep.Gate.Failed) > 0:
		fmt.Fprintf(stderr, "orchestrate: the gate failed: %s\n", strings.Join(rep.Gate.Failed, "; "))
		return cli.Failed
	case rep.Gate != nil && len(rep.Gate.AbsoluteBreaches()) > 0:
		limits := rep.Gate.AbsoluteBreaches()
		for _, b := range limits {
			fmt.Fprintf(stderr, "orchestrate: limit crossed: %s\n", b)
		}
		if n := len(rep.Gate.Breaches) - len(limits); n > 0 {
			fmt.Fprintf(stderr, "orchestrate: and %d change(s) beyond their threshold (see the report)\n", n)
		}
		return cli.Failed
	case rep.Gate != nil && len(rep.Gate.Breaches) > 0:
		against := g.path
		if against == "" {
			against = "the baseline build (the whole interval beyond it)"
		}
		fmt.Fprintf(stderr, "orchestrate: %d threshold(s) crossed against %s\n", len(rep.Gate.Breaches), against)
		return cli.Failed
	case orchestrate.NeverKeptUp(rep) != nil:
		line := "orchestrate: Relay kept up with no rate tried"
		if len(rep.Setup.Builds) > 1 {
			line += ": " + strings.Join(orchestrate.NeverKeptUp(rep), ", ")
		}
		fmt.Fprintln(stderr, line)
		return cli.Failed
	case rep.Gate != nil && len(rep.Gate.Unmeasured) > 0:
		for _, u := range rep.Gate.Unmeasured {
			fmt.Fprintf(stderr, "orchestrate: inconclusive: %s\n", u)
		}
		fmt.Fprintln(stderr, "orchestrate: a --fail-on limit had no figure to hold (exit 3)")
		return cli.Inconclusive
	case rep.Gate != nil && len(rep.Gate.Inconclusive) > 0:
		for _, b := range rep.Gate.Inconclusive {
			fmt.Fprintf(stderr, "orchestrate: inconclusive: %s\n", b)
		}
		fmt.Fprintln(stderr, "orchestrate: the gate could not tell: rerun with a larger --budget (exit 3)")
		return cli.Inconclusive
	}
	return cli.OK
}
