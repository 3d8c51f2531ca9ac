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
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/progress"
	"github.com/relayload/relayload/internal/relayreport"
	"github.com/relayload/relayload/internal/report"
)

// relayReportHelp is orchestrate relay-report's --help.
var relayReportHelp = cli.Help{
	About: `orchestrate relay-report: one report.md on a Relay build: cost per kind of envelope, capacity with the mixed traffic, the rate sent as fast as possible, where the CPU goes for errors (with --perf) and Relay's own signature timer. With --compare, the same for two builds side by side: each kind's cost compared in slices (the change with its 95% interval), each build's capacity.`,
	Usage: []string{
		"orchestrate relay-report --relay-bin PATH --out DIR [flags]",
		"orchestrate relay-report --relay-bin PATH --compare NAME=BIN[:CONFIG.yml] --out DIR [flags]",
	},
	Examples: []cli.Example{
		{What: "The whole report on your build, into out/relay-report/report.md",
			Command: "orchestrate relay-report --relay-bin ~/relay/target/release/relay --out out/relay-report"},
		{What: "With perf, and Relay configured as in production",
			Command: "orchestrate relay-report --relay-bin ./relay --out out/prod --perf --relay-config prod.yml"},
		{What: "Your branch beside main, each kind compared for up to 5 minutes",
			Command: "orchestrate relay-report --relay-bin ./relay-main --relay-name main --compare pr=./relay-pr \\\n    --budget 5m --out out/pr"},
	},
	Groups: []cli.Group{
		{Title: "Relay", Flags: []string{"relay-bin", "relay-name", "relay-config", "perf"}},
		{Title: "Traffic", Flags: []string{"duration", "kind-rate", "user-agents-file", "envelopes"}},
		{Title: "Comparing builds", Flags: []string{"compare", "slice", "budget", "precision"}},
		{Title: "Output", Flags: []string{"out", "quiet"}},
	},
	After: "Exit status: 0 the report was written (a section that failed says so in it), 1 failed, 2 bad usage, 130 interrupted.",
}

// rrFlags are relay-report's flags as given.
type rrFlags struct {
	relayBin, relayName, out, conf, compare, precision, envelopes *string
	agents                                                        *string // --user-agents-file
	duration, slice, budget                                       *time.Duration
	kindRate                                                      *float64
	perf, quiet                                                   *bool
}

// defineRelayReport defines relay-report's flags on fs.
func defineRelayReport(fs *flag.FlagSet) rrFlags {
	return rrFlags{
		relayBin:  fs.String("relay-bin", "", "the Relay binary to measure, at `PATH` (required)"),
		relayName: fs.String("relay-name", "relay", "`NAME` of --relay-bin in the report"),
		out:       fs.String("out", "", "`DIR` for report.md and each section's full report (required)"),
		duration:  fs.Duration("duration", 30*time.Second, "measured window of each step"),
		kindRate:  fs.Float64("kind-rate", 300, "`RATE` of the cost-per-kind steps, envelopes per second"),
		envelopes: fs.String("envelopes", "", "replay the recorded *.envelope files in `DIR` (a fake-upstream --capture or a blast --dump) in every section instead of generated envelopes: each kind found is costed on its own"),
		perf:      fs.Bool("perf", false, "record the errors step with perf and break its CPU down (the baseline only, with --compare)"),
		quiet:     fs.Bool("quiet", false, "no progress lines and no status line on stderr"),
		conf:      fs.String("relay-config", "", "YAML `FILE` merged into every step's generated config.yml (null removes a key)"),
		compare:   fs.String("compare", "", "a second build, `NAME=BIN[:CONFIG.yml]` (CONFIG.yml merged into its Relay's config; a relayload: section sets inbound_filters for its fake upstream), reported side by side with --relay-bin"),
		slice:     fs.Duration("slice", orchestrate.DefaultSlice, "with --compare: how long each build takes a kind's traffic in turn"),
		budget:    fs.Duration("budget", relayreport.DefaultCompareBudget, "with --compare: the longest each kind's comparison may take"),
		precision: fs.String("precision", "", "with --compare: end a kind's comparison once the 95% interval of the change in CPU per envelope is within ±this `PERCENT`, e.g. 3%"),
		agents:    fs.String("user-agents-file", "", userAgentsFileUsage),
	}
}

// runRelayReport is ` + "`orchestrate relay-report`" + `: the sections of package
// relayreport into one report.md.
func runRelayReport(args []string, stdout, stderr io.Writer) int {
	const prog = "orchestrate relay-report"
	o, quiet, err := relayReportOptions(args, stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return cli.OK
	case err != nil:
		return cli.Exit(prog, err, stderr, relayReportFlags())
	}
	warnRelayConfig(prog, o.RelayConfig, stderr)
	o.Log = io.Discard
	var status *progress.Line
	if !quiet {
		status = progress.New(stderr, progress.Detect(stderr))
		o.Log = status.Writer()
		o.Progress = func(section string, p orchestrate.Progress) { status.Update(progress.Describe(section, p)) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	card, err := relayreport.Run(ctx, o)
	status.Close()
	if card == nil {
		return cli.Exit(prog, err, stderr, relayReportFlags())
	}
	if err := writeCard(card, o.Out, stdout); err != nil {
		return cli.Exit(prog, err, stderr, nil)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, prog+": interrupted; the report above is partial")
		return cli.Interrupted
	}
	return cli.OK
}

// relayReportOptions parses relay-report's flags into relayreport.Options
// (Log unset) and whether --quiet was given.
func relayReportOptions(args []string, stdout io.Writer) (relayreport.Options, bool, error) {
	fs := flag.NewFlagSet("orchestrate relay-report", flag.ContinueOnError)
	f := defineRelayReport(fs)
	relayBin, relayName, out, duration, kindRate, perf, quiet, conf := f.relayBin, f.relayName, f.out, f.duration, f.kindRate, f.perf, f.quiet, f.conf
	compare, slice, budget, precision := f.compare, f.slice, f.budget, f.precision
	var o relayreport.Options
	err := cli.ParseHelp(fs, args, stdout, relayReportHelp)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case err != nil:
		return o, false, err
	case fs.NArg() > 0:
		return o, false, cli.Usagef("unexpected argument %q", fs.Arg(0))
	case *relayBin == "" || *out == "":
		return o, false, cli.Usagef("--relay-bin and --out are required")
	case !(*kindRate > 0):
		return o, false, cli.Usagef("--kind-rate %v: want a rate above 0", *kindRate)
	case *compare == "" && (set["slice"] || set["budget"] || set["precision"]):
		return o, false, cli.Usagef("--slice, --budget and --precision need --compare")
	}
	if err := cli.Positive("--duration", *duration); err != nil {
		return o, false, err
	}

	o = relayreport.Options{RelayBin: *relayBin, BaselineName: *relayName, Out: *out, Duration: *duration, KindRate: *kindRate, Perf: *perf,
		AgentsFrom: *f.agents}
	if o.Agents, err = readAgents(*f.agents); err != nil {
		return o, false, err
	}
	if *f.envelopes != "" {
		if o.Corpus, err = loadCorpus(*f.envelopes, set); err != nil {
			return o, false, err
		}
	}
	if *conf != "" {
		if o.RelayConfig, err = relayconfig.LoadOverrides(*conf); err != nil {
			return o, false, cli.Usagef("--relay-config: %w", err)
		}
	}
	if *compare != "" {
		// orchestrate's own --compare parsing, for the one compared build.
		bo := options{relayBin: *relayBin, relayName: *relayName, compare: cli.List{*compare}, slice: *slice, budget: *budget, precision: *precision}
		var cfg orchestrate.Config
		if err := bo.builds(&cfg); err != nil {
			return o, false, err
		}
		b := cfg.Builds[1]
		o.Compare, o.Slice, o.CompareBudget, o.Precision = &b, cfg.Slice, cfg.Budget, cfg.Precision
	}
	return o, *quiet, nil
}

// relayReportFlags maps relayreport.Options and orchestrate.Config fields
// to relay-report's flags.
func relayReportFlags() map[string]string {
	m := flagNames()
	m["Builds"] = "--relay-bin or --compare"
	m["Budget"], m["CompareBudget"] = "--budget", "--budget"
	m["Compare"], m["BaselineName"] = "--compare", "--relay-name"
	m["Corpus"] = "--envelopes"
	return m
}

// writeCard writes report.md into dir (whole or not at all) and to stdout.
func writeCard(card *relayreport.Card, dir string, stdout io.Writer) error {
	card.Markdown(stdout)
	return report.WriteFile(filepath.Join(dir, "report.md"), func(w io.Writer) error {
		card.Markdown(w)
		return nil
	})
}
