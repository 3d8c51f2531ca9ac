// Command standin-relay is a test fixture that stands in for Sentry's Relay
// in relayload's tests; it is not Relay. It is invoked like Relay:
//
//	standin-relay -c DIR run        (or --config DIR)
//	standin-relay --version
//
// DIR holds config.yml (Relay's keys, managed mode only) and credentials.json.
// As Relay 26.4.0 does, SIGTERM stops it after limits.shutdown_timeout, and
// SIGINT, or a second SIGTERM, exits at once (status 0 in every case).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/relayload/relayload/internal/standinrelay"
	"github.com/relayload/relayload/relayauth"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("standin-relay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dir string
	fs.StringVar(&dir, "c", ".relay", "config directory (config.yml, credentials.json)")
	fs.StringVar(&dir, "config", ".relay", "config directory (same as -c)")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: standin-relay [-c DIR] run | standin-relay --version")
		fmt.Fprintln(stderr, "A stand-in for Sentry's Relay used by relayload's tests (test fixture, not Relay).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *version {
		fmt.Printf("standin-relay %s (test fixture, not Relay)\n", standinrelay.Version)
		return 0
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] != "run" {
		fmt.Fprintln(stderr, "standin-relay: want the subcommand \"run\" (usage: standin-relay -c DIR run)")
		return 2
	}
	runFS := flag.NewFlagSet("run", flag.ContinueOnError)
	runFS.SetOutput(stderr)
	runFS.StringVar(&dir, "c", dir, "config directory")
	runFS.StringVar(&dir, "config", dir, "config directory")
	if err := runFS.Parse(rest[1:]); err != nil {
		return 2
	}
	if runFS.NArg() > 0 {
		fmt.Fprintf(stderr, "standin-relay: unexpected argument %q\n", runFS.Arg(0))
		return 2
	}

	cfg, err := standinrelay.LoadConfig(dir)
	if err != nil {
		fmt.Fprintln(stderr, "standin-relay:", err)
		return 2
	}
	creds, err := relayauth.LoadCredentials(filepath.Join(dir, "credentials.json"))
	if err != nil {
		fmt.Fprintln(stderr, "standin-relay: managed mode needs credentials:", err)
		return 2
	}
	logger := log.New(stderr, "standin-relay: ", log.LstdFlags|log.Lmicroseconds|log.LUTC)
	relay, err := standinrelay.New(cfg, creds, logger)
	if err != nil {
		fmt.Fprintln(stderr, "standin-relay:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGINT || ctx.Err() != nil {
				logger.Printf("%v received, exiting", sig)
				os.Exit(0)
			}
			logger.Printf("%v received", sig)
			cancel()
		}
	}()
	if err := relay.Run(ctx); err != nil {
		fmt.Fprintln(stderr, "standin-relay:", err)
		return 1
	}
	return 0
}
