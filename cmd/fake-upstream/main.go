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

Usage: fake-upstream [flags]

Flags:
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "fake-upstream:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "fake-upstream:", err)
		os.Exit(1)
	}
}

// usageError is a bad command line (exit status 2).
type usageError struct{ error }

// run parses the flags, builds the server and serves until SIGINT/SIGTERM.
func run(args []string, stdout, stderr io.Writer) error {
	var o options
	fs := o.flagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageHead)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fmt.Fprintf(stdout, "\nRoute names for --latency/--inject: %s\n", strings.Join(upstream.RouteNames(), ", "))
			return nil
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	cfg, err := o.config()
	if err != nil {
		return usageError{err}
	}
	srv, err := upstream.New(cfg)
	if err != nil {
		return usageError{err}
	}
	return serve(srv, o.listen, o.shutdown, stdout, stderr)
}
