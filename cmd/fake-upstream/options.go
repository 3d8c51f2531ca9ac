package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"github.com/relayload/relayload/internal/capture"
	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/cli/upstreamflag"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
	"github.com/relayload/relayload/upstream"
)

// options are fake-upstream's flags.
type options struct {
	listen         string
	nProjects      int
	seed           uint64
	verify         bool
	sigMaxAge      time.Duration
	regMaxAge      time.Duration
	denyRelays     bool
	pendingFor     time.Duration
	quotasFile     string
	inboundFilters bool
	globalPending  bool
	relayStop      bool
	fault          string
	faultsFile     string
	shutdown       time.Duration
	maxWire        int64
	maxDecoded     int64
	credFiles      cli.Repeated
	quotaSpecs     cli.Repeated
	latencies      cli.Repeated
	injects        cli.Repeated
	controlFrom    cli.Repeated
	timed          *upstreamflag.FaultSpec // --fault, parsed
	captureDir     string
	captureMax     string
	captureEvery   int
}

// flagSet defines every flag on a new flag set that fills o.
func (o *options) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("fake-upstream", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8000", "address to listen on; port 0 picks a free port (printed as the first stdout line); an address that is not loopback gets a warning on stderr")
	fs.IntVar(&o.nProjects, "projects", 100, "number of projects to serve (1..100000); same --projects and --seed as blast give the same projects")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for the projects and for fault-injection randomness")
	fs.BoolVar(&o.verify, "verify-signatures", true, "verify X-Sentry-Relay-Signature on every relay request (false: accept any, like mini_sentry)")
	fs.DurationVar(&o.sigMaxAge, "signature-max-age", upstream.DefaultMaxSignatureAge, "maximum age of relay request signatures after registration")
	fs.DurationVar(&o.regMaxAge, "registration-max-age", upstream.DefaultRegistrationMaxAge, "maximum age of signatures and tokens during registration")
	fs.BoolVar(&o.denyRelays, "deny-relays", false, "answer every registration with 403 {\"relay\":\"stop\"} (Relay stops for good)")
	fs.DurationVar(&o.pendingFor, "pending-for", 0, "answer each project key as pending until this long after its first request (< 25s)")
	fs.StringVar(&o.quotasFile, "quotas", "", "JSON file with a list of quota objects added to every project config")
	fs.BoolVar(&o.inboundFilters, "inbound-filters", false, "turn on the webCrawlers, legacyBrowsers, localhost and browserExtensions inbound filters")
	fs.BoolVar(&o.globalPending, "global-pending", false, "fault: answer global config requests with globalStatus pending")
	fs.BoolVar(&o.relayStop, "relay-stop", false, "fault: answer every relay request with 403 {\"relay\":\"stop\"}")
	fs.StringVar(&o.fault, "fault", "", "fault for a while, as orchestrate's --fault: outage=10s[:refuse|hang|unavailable], 429-storm[=10s], errors=10s[:STATUS[:SHARE]], latency=10s:DELAY; @START after it starts listening")
	fs.StringVar(&o.faultsFile, "faults", "", "JSON file with faults (the POST /control body); flags add to it")
	fs.DurationVar(&o.shutdown, "shutdown-timeout", 5*time.Second, "grace period for in-flight requests on SIGINT/SIGTERM")
	o.maxWire, o.maxDecoded = upstream.DefaultMaxWireBytes, upstream.DefaultMaxDecodedBytes
	fs.Var(&o.credFiles, "relay-credentials", "credentials.json of a relay allowed to register (repeatable); with any, only listed relays may register")
	fs.Var(&o.quotaSpecs, "quota", "quota CATEGORIES[:LIMIT[:REASON]] added to every project (repeatable), e.g. 'error;transaction:0' (quote it: ';' ends a shell command); CATEGORIES are Relay's data categories or all")
	fs.Var(&o.latencies, "latency", "fault: ROUTE=SPEC added latency (repeatable); SPEC 50ms | 10ms-90ms | exp:20ms | terms joined by +; ROUTE a route name or *")
	fs.Var(&o.injects, "inject", "fault: ROUTE=STATUS[:RETRY_AFTER]@P or ROUTE=reset@P (repeatable), e.g. envelope=429:30@0.1, envelope=reset@0.01")
	fs.Var(&o.controlFrom, "control-from", "networks whose clients may use /control and /stats/reset, as CIDRs (repeatable or comma-separated, e.g. 10.0.0.0/8,127.0.0.1/32); default loopback only (127.0.0.0/8, ::1); others get 403")
	fs.Var(sizeFlag{&o.maxWire}, "max-wire-bytes", "cap on request bodies as received (accepts 16MiB, 20MB, 1048576)")
	fs.Var(sizeFlag{&o.maxDecoded}, "max-decoded-bytes", "cap on request bodies after Content-Encoding; larger bodies get 413")
	fs.StringVar(&o.captureDir, "capture", "", "keep every envelope accepted in directory `DIR`, decoded, one .envelope file each, listed in DIR/manifest.jsonl (DIR is created if missing and must not hold a capture already)")
	fs.StringVar(&o.captureMax, "capture-max", "", "bound the capture to `N[,SIZE]`: N envelopes, SIZE decoded bytes, e.g. 10000 or 10000,1GiB or ,512MiB; the first envelope beyond either ends it (default 100000,1GiB)")
	fs.IntVar(&o.captureEvery, "capture-every", 1, "keep one envelope of every N accepted; 1 keeps all")
	return fs
}

// config builds the server's configuration from the flags; every error is
// the command line's.
func (o *options) config() (upstream.Config, error) {
	ps, err := projects.Generate(o.seed, o.nProjects)
	if err != nil {
		return upstream.Config{}, err
	}
	cfg := upstream.Config{
		Projects:           ps,
		VerifySignatures:   o.verify,
		MaxSignatureAge:    o.sigMaxAge,
		RegistrationMaxAge: o.regMaxAge,
		DenyRelays:         o.denyRelays,
		PendingFor:         o.pendingFor,
		InboundFilters:     o.inboundFilters,
		MaxWireBytes:       o.maxWire,
		MaxDecodedBytes:    o.maxDecoded,
		Seed:               o.seed,
		Addr:               o.listen,
	}
	if o.nProjects < 1 {
		return cfg, fmt.Errorf("--projects %d: want 1..100000", o.nProjects)
	}
	if o.shutdown < 0 || o.sigMaxAge < 0 || o.regMaxAge < 0 {
		return cfg, fmt.Errorf("--shutdown-timeout, --signature-max-age and --registration-max-age must not be negative")
	}
	if o.pendingFor < 0 || o.pendingFor >= upstream.MaxPendingFor {
		return cfg, fmt.Errorf("--pending-for %s: want ≥ 0 and under %s (Relay abandons keys pending for 30 s)", o.pendingFor, upstream.MaxPendingFor)
	}
	for _, list := range o.controlFrom {
		nets, err := upstreamflag.ParseCIDRList(list)
		if err != nil {
			return cfg, fmt.Errorf("--control-from: %w", err)
		}
		cfg.ControlFrom = append(cfg.ControlFrom, nets...)
	}
	if cfg.Relays, err = o.relays(); err != nil {
		return cfg, err
	}
	cfg.AllowList = cfg.Relays != nil
	if cfg.Quotas, err = o.quotas(); err != nil {
		return cfg, err
	}
	if cfg.Faults, err = o.faults(); err != nil {
		return cfg, err
	}
	cfg.Capture, err = o.capture()
	return cfg, err
}

// capture checks the capture flags and makes the capture writer (nil
// without --capture); it is last, as it creates the directory.
func (o *options) capture() (*capture.Writer, error) {
	if o.captureEvery < 1 {
		return nil, fmt.Errorf("--capture-every %d: want 1 or more", o.captureEvery)
	}
	if o.captureDir == "" {
		if o.captureMax != "" || o.captureEvery != 1 {
			return nil, fmt.Errorf("--capture-max and --capture-every need --capture DIR")
		}
		return nil, nil
	}
	cc := capture.Config{Dir: o.captureDir, Every: o.captureEvery}
	if o.captureMax != "" {
		var err error
		if cc.MaxCount, cc.MaxBytes, err = upstreamflag.ParseCaptureMax(o.captureMax); err != nil {
			return nil, fmt.Errorf("--capture-max: %w", err)
		}
	}
	return capture.New(cc)
}

// relays reads the --relay-credentials files (nil without any).
func (o *options) relays() (map[string]relayauth.PublicKey, error) {
	if len(o.credFiles) == 0 {
		return nil, nil
	}
	relays := map[string]relayauth.PublicKey{}
	for _, path := range o.credFiles {
		c, err := relayauth.LoadCredentials(path)
		if err != nil {
			return nil, err
		}
		_, pub, err := c.Keys()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		relays[c.ID] = pub
	}
	return relays, nil
}

// quotas are the --quotas file's quotas, then one per --quota.
func (o *options) quotas() ([]json.RawMessage, error) {
	var qs []json.RawMessage
	if o.quotasFile != "" {
		var err error
		if qs, err = upstreamflag.LoadQuotas(o.quotasFile); err != nil {
			return nil, err
		}
	}
	for _, spec := range o.quotaSpecs {
		q, err := upstreamflag.ParseQuota(spec, len(qs))
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}

// faults are the --faults file's faults with the fault flags added.
func (o *options) faults() (upstream.Faults, error) {
	var f upstream.Faults
	if o.faultsFile != "" {
		var err error
		if f, err = upstreamflag.LoadFaults(o.faultsFile); err != nil {
			return f, err
		}
	}
	for _, spec := range o.latencies {
		route, l, err := upstreamflag.ParseRouteLatency(spec)
		if err != nil {
			return f, err
		}
		if f.Latency == nil {
			f.Latency = map[string]upstream.Latency{}
		}
		f.Latency[route] = l
	}
	for _, spec := range o.injects {
		in, err := upstreamflag.ParseInjection(spec)
		if err != nil {
			return f, err
		}
		f.Inject = append(f.Inject, in)
	}
	if o.fault != "" {
		var err error
		if o.timed, err = upstreamflag.ParseFaultSpec(o.fault); err != nil {
			return f, fmt.Errorf("--fault: %w", err)
		}
	}
	f.GlobalPending = f.GlobalPending || o.globalPending
	f.RelayStop = f.RelayStop || o.relayStop
	return f, nil
}

// sizeFlag is a byte size flag (16MiB, 20MB, 1048576).
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
	n, err := upstreamflag.ParseSize(v)
	if err != nil {
		return err
	}
	*s.n = n
	return nil
}
