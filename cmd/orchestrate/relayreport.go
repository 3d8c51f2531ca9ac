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
	"syscall"
	"time"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/relayreport"
)

// relayReportHelp is orchestrate relay-report's --help.
var relayReportHelp = cli.Help{
	About: `orchestrate relay-report: one report.md on a Relay build: cost per kind of envelope, capacity with the mixed traffic, the rate sent as fast as possible, where the CPU goes for errors (with --perf) and Relay's own signature timer.`,
	Usage: []string{"orchestrate relay-report --relay-bin PATH --out DIR [flags]"},
	Examples: []cli.Example{
		{What: "The whole report on your build, into out/relay-report/report.md",
			Command: "orchestrate relay-report --relay-bin ~/relay/target/release/relay --out out/relay-report"},
		{What: "A quicker look: 10 s steps",
			Command: "orchestrate relay-report --relay-bin ./relay --out out/quick --duration 10s"},
		{What: "With perf, and Relay configured as in production",
			Command: "orchestrate relay-report --relay-bin ./relay --out out/prod --perf --relay-config prod.yml"},
	},
	Groups: []cli.Group{
		{Title: "Relay", Flags: []string{"relay-bin", "relay-config", "perf"}},
		{Title: "Traffic", Flags: []string{"duration", "kind-rate"}},
		{Title: "Output", Flags: []string{"out", "quiet"}},
	},
	After: "Exit status: 0 the report was written (a section that failed says so in it), 1 failed, 2 bad usage, 130 interrupted.",
}

// rrOptions are relay-report's flags.
type rrOptions struct {
	relayBin, out, conf string
	duration            time.Duration
	kindRate            float64
	perf, quiet         bool
}

func (o *rrOptions) define(fs *flag.FlagSet) {
	fs.StringVar(&o.relayBin, "relay-bin", "", "the Relay binary to measure, at `PATH` (required)")
	fs.StringVar(&o.out, "out", "", "`DIR` for report.md and each section's full report (required)")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "measured window of each step")
	fs.Float64Var(&o.kindRate, "kind-rate", 300, "`RATE` of the cost-per-kind steps, envelopes per second")
	fs.BoolVar(&o.perf, "perf", false, "record the errors step with perf and break its CPU down")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	fs.StringVar(&o.conf, "relay-config", "", "YAML `FILE` merged into every step's generated config.yml (null removes a key)")
}

// runRelayReport is ` + "`orchestrate relay-report`" + `: the sections of package
// relayreport into one report.md.
func runRelayReport(args []string, stdout, stderr io.Writer) int {
	const prog = "orchestrate relay-report"
	var o rrOptions
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	o.define(fs)
	err := cli.ParseHelp(fs, args, stdout, relayReportHelp)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return cli.OK
	case err != nil:
	case fs.NArg() > 0:
		err = cli.Usagef("unexpected argument %q", fs.Arg(0))
	case o.relayBin == "" || o.out == "":
		err = cli.Usagef("--relay-bin and --out are required")
	case !(o.kindRate > 0):
		err = cli.Usagef("--kind-rate %v: want a rate above 0", o.kindRate)
	default:
		err = cli.Positive("--duration", o.duration)
	}
	var overrides relayconfig.Config
	if err == nil && o.conf != "" {
		if overrides, err = relayconfig.LoadOverrides(o.conf); err != nil {
			err = cli.Usagef("--relay-config: %w", err)
		}
	}
	if err != nil {
		return cli.Exit(prog, err, stderr, nil)
	}
	ro := relayreport.Options{RelayBin: o.relayBin, Out: o.out, Duration: o.duration, KindRate: o.kindRate, Perf: o.perf, Log: stderr, RelayConfig: overrides}
	if o.quiet {
		ro.Log = io.Discard
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	card, err := relayreport.Run(ctx, ro)
	if card == nil {
		return cli.Exit(prog, err, stderr, flagNames())
	}
	if err := writeCard(card, o.out, stdout); err != nil {
		return cli.Exit(prog, err, stderr, nil)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, prog+": interrupted; the report above is partial")
		return cli.Interrupted
	}
	return cli.OK
}

// writeCard writes report.md into dir and to stdout.
func writeCard(card *relayreport.Card, dir string, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	card.Markdown(io.MultiWriter(f, stdout))
	return f.Close()
}
