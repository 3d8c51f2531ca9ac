package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/relayreport"
	"github.com/relayload/relayload/internal/report"
)

const relayReportUsage = `orchestrate relay-report: cost per kind, mixed capacity, max rate, perf of errors and
Relay's signature timer, into one report.md.

Usage:
  orchestrate relay-report --relay-bin PATH --out DIR [--duration 30s] [--perf] [--relay-config FILE]

Options:
`

// runRelayReport is ` + "`orchestrate relay-report`" + `: the sections of package
// relayreport into one report.md.
func runRelayReport(args []string, stdout, stderr io.Writer) int {
	const prog = "orchestrate relay-report"
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	var (
		relayBin = fs.String("relay-bin", "", "Relay binary to measure (required)")
		out      = fs.String("out", "", "directory for report.md and each section's full report (required)")
		duration = fs.Duration("duration", 30*time.Second, "measured window of each step")
		kindRate = fs.Float64("kind-rate", 300, "rate of the cost-per-kind steps")
		perf     = fs.Bool("perf", false, "record the errors step with perf and break its CPU down")
		quiet    = fs.Bool("quiet", false, "no progress lines on stderr")
		conf     = fs.String("relay-config", "", "YAML file merged into every step's generated config.yml (null removes a key)")
	)
	err := cli.Parse(fs, args, stdout, relayReportUsage)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return cli.OK
	case err != nil:
	case fs.NArg() > 0:
		err = cli.Usagef("unexpected argument %q", fs.Arg(0))
	case *relayBin == "" || *out == "":
		err = cli.Usagef("--relay-bin and --out are required")
	case !(*kindRate > 0):
		err = cli.Usagef("--kind-rate %v: want a rate above 0", *kindRate)
	default:
		err = cli.Positive("--duration", *duration)
	}
	if err == nil {
		if cerr := report.CheckDir(*out); cerr != nil {
			err = cli.Usagef("--out: %w", cerr)
		}
	}
	var overrides relayconfig.Config
	if err == nil && *conf != "" {
		if overrides, err = relayconfig.LoadOverrides(*conf); err != nil {
			err = cli.Usagef("--relay-config: %w", err)
		}
	}
	if err != nil {
		return cli.Exit(prog, err, stderr, nil)
	}
	warnRelayConfig(prog, overrides, stderr)
	o := relayreport.Options{RelayBin: *relayBin, Out: *out, Duration: *duration, KindRate: *kindRate, Perf: *perf, Log: stderr, RelayConfig: overrides}
	if *quiet {
		o.Log = io.Discard
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	card, err := relayreport.Run(ctx, o)
	if card == nil {
		return cli.Exit(prog, err, stderr, flagNames())
	}
	if err := writeCard(card, *out, stdout); err != nil {
		return cli.Exit(prog, err, stderr, nil)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, prog+": interrupted; the report above is partial")
		return cli.Interrupted
	}
	return cli.OK
}

// writeCard writes report.md into dir (whole or not at all) and to stdout.
func writeCard(card *relayreport.Card, dir string, stdout io.Writer) error {
	card.Markdown(stdout)
	return report.WriteFile(filepath.Join(dir, "report.md"), func(w io.Writer) error {
		card.Markdown(w)
		return nil
	})
}
