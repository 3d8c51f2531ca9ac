// Command fake-upstream plays Sentry for a Relay in managed mode: it answers
// registration, project and global configs, takes the envelopes, metrics and
// outcomes Relay forwards, counts everything and serves the counts at
// GET /stats. See package upstream for the protocol and the routes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/upstream"
)

const usageHead = `fake-upstream plays Sentry for a Relay in managed mode (relay.mode: managed,
relay.upstream pointing here). It registers the relay (signed challenge and
response), serves project configs v3 with the global config, receives the
envelopes, metric batches and outcomes Relay forwards, decodes every body
(identity, gzip, deflate, br, zstd), counts envelopes, items, bytes, outcomes
and PII canaries, and serves the counts.

Routes: POST /api/0/relays/{register/challenge,register/response,projectconfigs,
publickeys,outcomes,metrics}/, GET /api/0/relays/live/, POST /api/<id>/envelope/,
GET /stats (?format=prometheus), POST /stats/reset, GET /projects (?origin=),
GET|POST /control (faults as JSON).

The first line of stdout is the address it listens on (useful with port 0).
It listens on 127.0.0.1 unless told otherwise, and warns (one line on stderr)
when the address is not loopback. /control and /stats/reset answer only
loopback clients unless --control-from names other networks (403 otherwise).

Limits per request: a body's first 16 KiB must arrive within 10 s, before it
takes any ingest slot (a stalled body delays nobody); the rest of a larger one
at 1 MiB/s on average after a 2 s grace (408 otherwise); every answer must be
written within 10 s plus its size at 1 MiB/s, from its first byte; a request
whose client hung up before its body was processed is dropped (client_gone).
/stats http_layer counts what the HTTP server rejected before any handler.

Usage: fake-upstream [flags]

Flags:
`

func main() {
	os.Exit(cli.Exit("fake-upstream", run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr, configFlags))
}

// configFlags name upstream.Config's fields as the flags that set them.
var configFlags = map[string]string{
	"Addr": "--listen", "PendingFor": "--pending-for", "ControlFrom": "--control-from",
	"Faults": "--faults",
}

// run parses the flags, builds the server and serves until SIGINT/SIGTERM.
// Everything wrong before serving starts is a usage error (exit 2).
func run(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := o.flagSet()
	help := usageHead
	if err := cli.Parse(fs, args, stdout, help); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "\nRoute names for --latency/--inject: %s\n", strings.Join(upstream.RouteNames(), ", "))
			fmt.Fprint(stdout, "\nExit status: 0 stopped by SIGINT/SIGTERM, 1 failed while serving, 2 bad usage (a flag, or an address it cannot listen on).\n")
		}
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
