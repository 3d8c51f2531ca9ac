// Command fake-upstream plays Sentry for a Relay in managed mode: it answers
// registration, project and global configs, takes the envelopes, metrics and
// outcomes Relay forwards, counts everything and serves the counts at
// GET /stats. See package upstream for the protocol and the routes.
package main

import (
	"io"
	"os"
	"strings"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/upstream"
)

// help is fake-upstream's --help.
func help() cli.Help {
	return cli.Help{
		About: "fake-upstream plays Sentry for a Relay in managed mode (relay.mode: managed, relay.upstream pointing here): " +
			"it registers the relay (signed challenge and response), serves project configs v3 with the global config, " +
			"checks, decodes and counts every envelope, metric batch and outcome Relay forwards, then answers, and serves the counts at GET /stats. " +
			"The first line of stdout is the address it listens on (useful with port 0); it listens on 127.0.0.1 unless told otherwise " +
			"and warns when the address is not loopback. Routes, limits, /stats fields and the /control format: upstream/README.md.",
		Usage: []string{"fake-upstream [flags]"},
		Examples: []cli.Example{
			{What: "Play Sentry on port 8000 for any Relay that registers",
				Command: "fake-upstream --listen 127.0.0.1:8000"},
			{What: "Only the relay whose credentials.json is given may register; 500 projects",
				Command: "fake-upstream --relay-credentials relay-conf/credentials.json --projects 500"},
			{What: "An outage of 10 s, 5 s after it starts listening",
				Command: "fake-upstream --listen 127.0.0.1:0 --fault outage=10s@5s"},
			{What: "Keep one envelope in 10, up to 10000 or 512 MiB, in captured/ to replay later",
				Command: "fake-upstream --capture captured --capture-max 10000,512MiB --capture-every 10"},
		},
		Groups: []cli.Group{
			{Title: "Listening", Flags: []string{"listen", "control-from", "shutdown-timeout", "max-wire-bytes", "max-decoded-bytes"}},
			{Title: "Projects and relays", Flags: []string{"projects", "seed", "relay-credentials", "deny-relays", "verify-signatures",
				"signature-max-age", "registration-max-age", "pending-for", "inbound-filters", "quota", "quotas"}},
			{Title: "Faults", Flags: []string{"fault", "faults", "latency", "inject", "global-pending", "relay-stop"}},
			{Title: "Capture (envelopes kept to replay later)", Flags: []string{"capture", "capture-max", "capture-every"}},
		},
		After: "Route names for --latency and --inject: " + strings.Join(upstream.RouteNames(), ", ") + ", or * for all.\n\n" +
			"Exit status: 0 stopped by SIGINT/SIGTERM, 1 failed while serving, 2 bad usage (a flag, or an address it cannot listen on).",
	}
}

func main() {
	os.Exit(cli.Exit("fake-upstream", run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr, configFlags))
}

// configFlags name upstream.Config's fields as the flags that set them.
var configFlags = map[string]string{
	"Addr": "--listen", "PendingFor": "--pending-for", "ControlFrom": "--control-from",
	"Faults": "--faults", "Dir": "--capture", "MaxCount": "--capture-max", "MaxBytes": "--capture-max",
	"Every": "--capture-every",
}

// run parses the flags, builds the server and serves until SIGINT/SIGTERM.
// Everything wrong before serving starts is a usage error (exit 2).
func run(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := o.flagSet()
	if err := cli.ParseHelp(fs, args, stdout, help()); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := o.config()
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	return serve(cfg, o.shutdown, o.timed, stdout, stderr)
}
