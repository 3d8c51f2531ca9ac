// Command fake-upstream plays Sentry for a Relay in managed mode: it answers
// registration, project and global configs, takes the envelopes, metrics and
// outcomes Relay forwards, counts everything and serves the counts at
// GET /stats. See package upstream for the protocol and the routes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
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

// repeated collects a repeatable string flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

type sizeFlag struct{ n *int64 }

func (s sizeFlag) String() string {
	switch {
	case s.n == nil:
		return ""
	case *s.n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", *s.n>>20)
	}
	return fmt.Sprint(*s.n)
}

func (s sizeFlag) Set(v string) error {
	n, err := upstream.ParseSize(v)
	if err != nil {
		return err
	}
	*s.n = n
	return nil
}

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

type usageError struct{ error }

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fake-upstream", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		listen         = fs.String("listen", "127.0.0.1:8000", "address to listen on; port 0 picks a free port (printed as the first stdout line)")
		nProjects      = fs.Int("projects", 100, "number of projects to serve (1..100000); same --projects and --seed as blast give the same projects")
		seed           = fs.Uint64("seed", 1, "seed for the projects and for fault-injection randomness")
		verify         = fs.Bool("verify-signatures", true, "verify X-Sentry-Relay-Signature on every relay request (false: accept any, like mini_sentry)")
		sigMaxAge      = fs.Duration("signature-max-age", upstream.DefaultMaxSignatureAge, "maximum age of relay request signatures after registration")
		regMaxAge      = fs.Duration("registration-max-age", upstream.DefaultRegistrationMaxAge, "maximum age of signatures and tokens during registration")
		verifyEvery    = fs.Int("verify-envelope-every", 1, "fully verify only every Nth uncached envelope signature; the rest are checked for form and age only (Ed25519 verify costs ~36 µs)")
		denyRelays     = fs.Bool("deny-relays", false, "answer every registration with 403 {\"relay\":\"stop\"} (Relay stops for good)")
		pendingFor     = fs.Duration("pending-for", 0, "answer each project key as pending until this long after its first request (< 25s)")
		quotasFile     = fs.String("quotas", "", "JSON file with a list of quota objects added to every project config")
		inboundFilters = fs.Bool("inbound-filters", false, "turn on the webCrawlers, legacyBrowsers, localhost and browserExtensions inbound filters")
		globalPending  = fs.Bool("global-pending", false, "fault: answer global config requests with globalStatus pending")
		relayStop      = fs.Bool("relay-stop", false, "fault: answer every relay request with 403 {\"relay\":\"stop\"}")
		outage         = fs.String("outage", "", "fault: MODE:DURATION outage from start, MODE refuse|hang|unavailable (e.g. hang:30s)")
		faultsFile     = fs.String("faults", "", "JSON file with faults (the POST /control body); flags add to it")
		shutdown       = fs.Duration("shutdown-timeout", 5*time.Second, "grace period for in-flight requests on SIGINT/SIGTERM")
		maxWire        = int64(upstream.DefaultMaxWireBytes)
		maxDecoded     = int64(upstream.DefaultMaxDecodedBytes)
		credFiles      repeated
		quotaSpecs     repeated
		latencies      repeated
		injects        repeated
	)
	fs.Var(&credFiles, "relay-credentials", "credentials.json of a relay allowed to register (repeatable); with any, only listed relays may register")
	fs.Var(&quotaSpecs, "quota", "quota CATEGORIES[:LIMIT[:REASON]] added to every project (repeatable), e.g. error;transaction:0; CATEGORIES may be all")
	fs.Var(&latencies, "latency", "fault: ROUTE=SPEC added latency (repeatable); SPEC 50ms | 10ms-90ms | exp:20ms | terms joined by +; ROUTE a route name or *")
	fs.Var(&injects, "inject", "fault: ROUTE=STATUS[:RETRY_AFTER]@P or ROUTE=reset@P (repeatable), e.g. envelope=429:30@0.1, envelope=reset@0.01")
	fs.Var(sizeFlag{&maxWire}, "max-wire-bytes", "cap on request bodies as received (accepts 16MiB, 20MB, 1048576)")
	fs.Var(sizeFlag{&maxDecoded}, "max-decoded-bytes", "cap on request bodies after Content-Encoding; larger bodies get 413")
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
	ps, err := projects.Generate(*seed, *nProjects)
	if err != nil {
		return usageError{err}
	}
	cfg := upstream.Config{
		Projects:            ps,
		VerifySignatures:    *verify,
		MaxSignatureAge:     *sigMaxAge,
		RegistrationMaxAge:  *regMaxAge,
		VerifyEnvelopeEvery: *verifyEvery,
		DenyRelays:          *denyRelays,
		PendingFor:          *pendingFor,
		InboundFilters:      *inboundFilters,
		MaxWireBytes:        maxWire,
		MaxDecodedBytes:     maxDecoded,
		Seed:                *seed,
	}
	if *verifyEvery < 1 {
		return usageError{fmt.Errorf("--verify-envelope-every %d: want ≥ 1", *verifyEvery)}
	}
	if *pendingFor < 0 || *pendingFor >= upstream.MaxPendingFor {
		return usageError{fmt.Errorf("--pending-for %s: want ≥ 0 and under %s (Relay abandons keys pending for 30 s)", *pendingFor, upstream.MaxPendingFor)}
	}
	if len(credFiles) > 0 {
		cfg.AllowList = true
		cfg.Relays = map[string]relayauth.PublicKey{}
		for _, path := range credFiles {
			c, err := relayauth.LoadCredentials(path)
			if err != nil {
				return usageError{err}
			}
			_, pub, err := c.Keys()
			if err != nil {
				return usageError{fmt.Errorf("%s: %w", path, err)}
			}
			cfg.Relays[c.ID] = pub
		}
	}
	if *quotasFile != "" {
		qs, err := upstream.LoadQuotas(*quotasFile)
		if err != nil {
			return usageError{err}
		}
		cfg.Quotas = append(cfg.Quotas, qs...)
	}
	for _, spec := range quotaSpecs {
		q, err := upstream.ParseQuota(spec, len(cfg.Quotas))
		if err != nil {
			return usageError{err}
		}
		cfg.Quotas = append(cfg.Quotas, q)
	}
	if *faultsFile != "" {
		if cfg.Faults, err = upstream.LoadFaults(*faultsFile); err != nil {
			return usageError{err}
		}
	}
	for _, spec := range latencies {
		route, l, err := upstream.ParseRouteLatency(spec)
		if err != nil {
			return usageError{err}
		}
		if cfg.Faults.Latency == nil {
			cfg.Faults.Latency = map[string]upstream.Latency{}
		}
		cfg.Faults.Latency[route] = l
	}
	for _, spec := range injects {
		in, err := upstream.ParseInjection(spec)
		if err != nil {
			return usageError{err}
		}
		cfg.Faults.Inject = append(cfg.Faults.Inject, in)
	}
	if *outage != "" {
		if cfg.Faults.Outage, err = upstream.ParseOutage(*outage); err != nil {
			return usageError{err}
		}
	}
	cfg.Faults.GlobalPending = cfg.Faults.GlobalPending || *globalPending
	cfg.Faults.RelayStop = cfg.Faults.RelayStop || *relayStop

	srv, err := upstream.New(cfg)
	if err != nil {
		return usageError{err}
	}
	// Signals are caught before the address is announced: whoever reads the
	// first line may stop the server at once and still get a clean exit.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintln(stdout, ln.Addr().String())
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second, // a body slot is held while reading
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	final, _ := json.Marshal(srv.Stats())
	fmt.Fprintf(stderr, "fake-upstream: shut down; final stats: %s\n", final)
	return nil
}
