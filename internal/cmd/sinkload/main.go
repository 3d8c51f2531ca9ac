// Command sinkload measures fake-upstream's envelope sink from a separate
// process: it posts pre-built zstd envelopes over loopback at a fixed rate for
// a bounded time and reads the server's CPU time from /proc/<pid>/stat (with
// procfs, through relayproc) before and after, giving CPU µs per envelope
// including HTTP. It checks that the server counted exactly the envelopes
// that were answered 200.
//
//	sinkload --spawn bin/fake-upstream --rate 20000 --duration 10s
//	sinkload --target http://127.0.0.1:8000 --pid 1234 --rate 5000
//
// Loopback only; at most 60 s and 5 million requests per run.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
)

const (
	maxDuration = 60 * time.Second
	maxRequests = 5_000_000
)

type body struct {
	path, auth string
	wire       []byte
	decoded    int
}

// Result is what one run measured.
type Result struct {
	Rate             float64 `json:"target_rate"`
	Duration         float64 `json:"duration_seconds"`
	Sent             int64   `json:"sent"`
	OK               int64   `json:"ok"`
	Failed           int64   `json:"failed"`
	Dropped          int64   `json:"dropped"`
	Achieved         float64 `json:"achieved_rate"`
	ServerCounted    int64   `json:"server_counted"`
	ExactCount       bool    `json:"exact_count"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	CPUMicrosPerEnv  float64 `json:"server_cpu_us_per_envelope"`
	ServerCores      float64 `json:"server_cores"`
	ClientCPUMicros  float64 `json:"client_cpu_us_per_request"`
	LoadAverage      string  `json:"load_average"` // /proc/loadavg at the end: how shared the machine was
	MeanWireBytes    float64 `json:"mean_wire_bytes"`
	MeanDecodedBytes float64 `json:"mean_decoded_bytes"`
	Signing          string  `json:"signing"`
	Bodies           string  `json:"bodies"`
	MinWireBytes     int     `json:"min_wire_bytes"`
	MaxWireBytes     int     `json:"max_wire_bytes"`
	FirstError       string  `json:"first_error,omitempty"`
}

func main() {
	o, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sinkload:", err)
		os.Exit(2)
	}
}

// options are sinkload's flags.
type options struct {
	target, spawn, spawnArgs string
	pid                      int
	rate                     float64
	duration, warmup         time.Duration
	conns                    int
	bodies                   string
	decodedSize, decodedMax  int
	nBodies                  int
	signing                  string
	nProjects                int
	seed                     uint64
}

// parseFlags parses and checks args with fs (flag.CommandLine in main, so
// a bad flag exits 2 with usage).
func parseFlags(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	fs.StringVar(&o.target, "target", "", "fake-upstream origin (http://127.0.0.1:PORT); or use --spawn")
	fs.StringVar(&o.spawn, "spawn", "", "path of a fake-upstream binary to start on 127.0.0.1:0 (its PID is measured)")
	fs.StringVar(&o.spawnArgs, "spawn-args", "", "extra flags for the spawned fake-upstream (space-separated)")
	fs.IntVar(&o.pid, "pid", 0, "server PID to read CPU from (default: the spawned child)")
	fs.Float64Var(&o.rate, "rate", 10000, "requests per second (open loop)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured duration (≤ 60s)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up at the same rate")
	fs.IntVar(&o.conns, "connections", 64, "keep-alive connections / in-flight limit")
	fs.StringVar(&o.bodies, "bodies", "pool", "pool: realistic mix from pool/ (zstd); synthetic: error events of --decoded-size")
	fs.IntVar(&o.decodedSize, "decoded-size", 10<<10, "decoded envelope size for --bodies synthetic")
	fs.IntVar(&o.decodedMax, "decoded-max", 0, "with --bodies synthetic: spread decoded sizes evenly over [--decoded-size, --decoded-max]")
	fs.IntVar(&o.nBodies, "n", 2000, "distinct bodies to cycle through")
	fs.StringVar(&o.signing, "sign", "none", "none: SDK-style; fresh: sign every request like Relay (a new timestamp each); reuse: one signature value per second")
	fs.IntVar(&o.nProjects, "projects", 100, "projects (must match the server's --projects and --seed)")
	fs.Uint64Var(&o.seed, "seed", 1, "project seed (must match the server's)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if o.duration <= 0 || o.duration > maxDuration || o.warmup < 0 || o.warmup > maxDuration {
		return options{}, fmt.Errorf("--duration/--warmup must be in (0, %s]", maxDuration)
	}
	if o.rate <= 0 || o.rate*(o.duration+o.warmup).Seconds() > maxRequests {
		return options{}, fmt.Errorf("--rate × time must be positive and ≤ %d requests", maxRequests)
	}
	if o.pid < 0 || o.pid == 0 && o.spawn == "" {
		return options{}, errors.New("--pid is required without --spawn")
	}
	if o.decodedMax != 0 && o.decodedMax < o.decodedSize || o.decodedSize < 200 || o.decodedMax > 16<<20 {
		return options{}, fmt.Errorf("--decoded-size/--decoded-max: want 200 ≤ size ≤ max ≤ 16MiB")
	}
	return o, nil
}

// run spawns the server if asked, builds the bodies, measures and prints
// the Result as JSON.
func run(o options) error {
	if o.spawn != "" {
		stop, err := spawnServer(&o)
		if err != nil {
			return err
		}
		defer stop()
	}
	host, err := loopbackHost(o.target)
	if err != nil {
		return err
	}
	ps, err := projects.Generate(o.seed, o.nProjects)
	if err != nil {
		return err
	}
	bs, err := buildBodies(context.Background(), o.bodies, ps, o.nBodies, o.decodedSize, max(o.decodedMax, o.decodedSize), o.seed)
	if err != nil {
		return err
	}
	client := &fasthttp.HostClient{Addr: host, MaxConns: o.conns, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	signer, err := newSigner(client, o.signing)
	if err != nil {
		return err
	}
	res, err := measure(client, bs, signer, o)
	if err != nil {
		return err
	}
	describeBodies(&res, bs)
	res.Signing, res.Bodies = o.signing, o.bodies
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// spawnServer starts the fake-upstream at o.spawn on a free loopback port,
// sets o.target to its address and, unless --pid was given, o.pid to its
// PID. stop interrupts and reaps it.
func spawnServer(o *options) (stop func(), err error) {
	args := []string{"--listen", "127.0.0.1:0", "--projects", strconv.Itoa(o.nProjects), "--seed", strconv.FormatUint(o.seed, 10)}
	if o.spawnArgs != "" {
		args = append(args, strings.Fields(o.spawnArgs)...)
	}
	cmd := exec.Command(o.spawn, args...)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("reading the spawned server's address: %w", err)
	}
	o.target = "http://" + strings.TrimSpace(line)
	if o.pid == 0 {
		o.pid = cmd.Process.Pid
	}
	return stop, nil
}

// loopbackHost returns the host:port of target, an http:// URL on a
// loopback address or localhost.
func loopbackHost(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("--target %q: want http://127.0.0.1:PORT", target)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("--target %q: loopback only", target)
	}
	return u.Host, nil
}

// measure warms up, then sends for o.duration and reads around it the
// server's envelope count (GET /stats), the server's CPU time (procfs) and
// this process's, and the load average.
func measure(c *fasthttp.HostClient, bs []body, s *signer, o options) (Result, error) {
	if o.warmup > 0 {
		blast(c, bs, s, o.rate, o.warmup, o.conns)
	}
	before, err := serverEnvelopes(c)
	if err != nil {
		return Result{}, err
	}
	cpu0, err := relayproc.CPUTime(o.pid)
	if err != nil {
		return Result{}, fmt.Errorf("server CPU time: %w", err)
	}
	self0 := selfCPU()
	start := time.Now()
	res := blast(c, bs, s, o.rate, o.duration, o.conns)
	elapsed := time.Since(start)
	selfUsed := selfCPU() - self0
	cpu1, err := relayproc.CPUTime(o.pid)
	if err != nil {
		return Result{}, fmt.Errorf("server CPU time: %w", err)
	}
	after, err := serverEnvelopes(c)
	if err != nil {
		return Result{}, err
	}
	res.Rate, res.Duration = o.rate, elapsed.Seconds()
	res.Achieved = float64(res.OK) / elapsed.Seconds()
	res.ServerCounted = after - before
	res.ExactCount = res.ServerCounted == res.OK
	res.ServerCPUSeconds = (cpu1 - cpu0).Seconds()
	if res.OK > 0 {
		res.CPUMicrosPerEnv = res.ServerCPUSeconds / float64(res.OK) * 1e6
	}
	res.ServerCores = res.ServerCPUSeconds / elapsed.Seconds()
	if res.Sent > 0 {
		res.ClientCPUMicros = selfUsed.Seconds() / float64(res.Sent) * 1e6
	}
	if la, err := relayproc.SystemLoadAvg(); err == nil {
		res.LoadAverage = la.String()
	}
	return res, nil
}

// describeBodies fills in the sizes of the bodies sent (bs is not empty).
func describeBodies(res *Result, bs []body) {
	var w, d float64
	res.MinWireBytes = len(bs[0].wire)
	for _, b := range bs {
		w += float64(len(b.wire))
		d += float64(b.decoded)
		res.MinWireBytes = min(res.MinWireBytes, len(b.wire))
		res.MaxWireBytes = max(res.MaxWireBytes, len(b.wire))
	}
	res.MeanWireBytes, res.MeanDecodedBytes = w/float64(len(bs)), d/float64(len(bs))
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func buildBodies(ctx context.Context, kind string, ps []projects.Project, n, size, maxSize int, seed uint64) ([]body, error) {
	var out []body
	switch kind {
	case "pool":
		p, err := pool.Build(ctx, pool.Options{Seed: seed, Size: n, Projects: ps, Encoding: compression.Zstd, Now: time.Now()})
		if err != nil {
			return nil, err
		}
		for _, e := range p.Entries {
			pr := ps[e.Project]
			out = append(out, body{path: pr.EnvelopePath(), auth: pr.AuthHeader("sinkload/1.0"), wire: e.Body, decoded: e.RawSize})
		}
	case "synthetic":
		enc := compression.NewEncoder()
		for i := 0; i < n; i++ {
			pr := ps[i%len(ps)]
			sz := size
			if n > 1 {
				sz += (maxSize - size) * i / (n - 1)
			}
			raw := syntheticEnvelope(pr, sz, i)
			w, err := enc.Encode(compression.Zstd, raw, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, body{path: pr.EnvelopePath(), auth: pr.AuthHeader("sinkload/1.0"), wire: w, decoded: len(raw)})
		}
	default:
		return nil, fmt.Errorf("--bodies %q: want pool or synthetic", kind)
	}
	return out, nil
}

// syntheticEnvelope is an error-event envelope of about size bytes.
func syntheticEnvelope(p projects.Project, size, i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	var b strings.Builder
	fmt.Fprintf(&b, `{"event_id":"%016x%016x","dsn":"http://%s@127.0.0.1/%d","sent_at":"2026-01-01T00:00:00Z"}`+"\n", r.Uint64(), r.Uint64(), p.PublicKey, p.ID)
	var ev strings.Builder
	ev.WriteString(`{"platform":"python","level":"error","exception":{"values":[{"type":"ValueError","value":"bad amount","stacktrace":{"frames":[`)
	for j := 0; ev.Len() < size-300; j++ {
		if j > 0 {
			ev.WriteByte(',')
		}
		fmt.Fprintf(&ev, `{"filename":"shop/views_%d.py","function":"handle_%d","lineno":%d,"vars":{"order":"o-%d","n":%d}}`, r.IntN(40), r.IntN(500), r.IntN(900), r.IntN(1e6), r.IntN(100))
	}
	ev.WriteString(`]}}]}}`)
	fmt.Fprintf(&b, `{"type":"event","length":%d}`+"\n%s\n", ev.Len(), ev.String())
	return []byte(b.String())
}

// signer adds relay headers per --sign.
type signer struct {
	mode string
	id   string
	sk   relayauth.SecretKey
	mu   sync.Mutex
	sig  string
	at   time.Time
}

func newSigner(c *fasthttp.HostClient, mode string) (*signer, error) {
	s := &signer{mode: mode}
	switch mode {
	case "none":
		return s, nil
	case "fresh", "reuse":
	default:
		return nil, fmt.Errorf("--sign %q: want none, fresh or reuse", mode)
	}
	creds, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		return nil, err
	}
	sk, pub, err := creds.Keys()
	if err != nil {
		return nil, err
	}
	s.id, s.sk = creds.ID, sk
	ch := `{"relay_id":"` + s.id + `","public_key":"` + pub.String() + `","version":"26.6.0"}`
	var tok struct {
		Token string `json:"token"`
	}
	if err := s.post(c, "/api/0/relays/register/challenge/", ch, &tok); err != nil {
		return nil, err
	}
	resp := `{"relay_id":"` + s.id + `","token":"` + tok.Token + `","version":"26.6.0"}`
	if err := s.post(c, "/api/0/relays/register/response/", resp, nil); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *signer) post(c *fasthttp.HostClient, path, body string, out any) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + c.Addr + path)
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.Header.Set("X-Sentry-Relay-Id", s.id)
	req.Header.Set("X-Sentry-Relay-Signature", s.sk.Sign([]byte(body), time.Now()))
	req.SetBodyString(body)
	if err := c.Do(req, resp); err != nil {
		return fmt.Errorf("registering: %w", err)
	}
	if resp.StatusCode() != 200 {
		return fmt.Errorf("registering: %s: %d %s", path, resp.StatusCode(), resp.Body())
	}
	if out != nil {
		return json.Unmarshal(resp.Body(), out)
	}
	return nil
}

func (s *signer) apply(req *fasthttp.Request) {
	switch s.mode {
	case "fresh":
		req.Header.Set("X-Sentry-Relay-Id", s.id)
		req.Header.Set("X-Sentry-Relay-Signature", s.sk.Sign(nil, time.Now()))
	case "reuse":
		s.mu.Lock()
		if now := time.Now(); now.Sub(s.at) > time.Second {
			s.sig, s.at = s.sk.Sign(nil, now), now
		}
		sig := s.sig
		s.mu.Unlock()
		req.Header.Set("X-Sentry-Relay-Id", s.id)
		req.Header.Set("X-Sentry-Relay-Signature", sig)
	}
}

func serverEnvelopes(c *fasthttp.HostClient) (int64, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + c.Addr + "/stats")
	if err := c.Do(req, resp); err != nil {
		return 0, fmt.Errorf("GET /stats: %w", err)
	}
	var st struct {
		Envelopes int64 `json:"envelopes"`
	}
	if err := json.Unmarshal(resp.Body(), &st); err != nil {
		return 0, fmt.Errorf("GET /stats: %w", err)
	}
	return st.Envelopes, nil
}

// blast sends at rate for d: a 1 ms pacer releases due requests to
// `workers` goroutines; a request that finds no free worker is dropped.
func blast(c *fasthttp.HostClient, bs []body, s *signer, rate float64, d time.Duration, workers int) Result {
	var res Result
	var sent, ok, failed, dropped atomic.Int64
	var firstErr atomic.Value
	jobs := make(chan int, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for i := range jobs {
				b := &bs[i%len(bs)]
				req.Reset()
				req.SetRequestURI("http://" + c.Addr + b.path)
				req.Header.SetMethod("POST")
				req.Header.SetContentType("application/x-sentry-envelope")
				req.Header.Set("Content-Encoding", "zstd")
				req.Header.Set("X-Sentry-Auth", b.auth)
				s.apply(req)
				req.SetBodyRaw(b.wire)
				err := c.Do(req, resp)
				switch {
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				case resp.StatusCode() != 200:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d: %.200s", resp.StatusCode(), resp.Body()))
				default:
					ok.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	total := int64(rate * d.Seconds())
	next := int64(0)
	tick := time.NewTicker(time.Millisecond)
	for next < total {
		<-tick.C
		due := min(int64(rate*time.Since(start).Seconds()), total)
		for ; next < due; next++ {
			select {
			case jobs <- int(next):
				sent.Add(1)
			default:
				dropped.Add(1)
			}
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	res.Sent, res.OK, res.Failed, res.Dropped = sent.Load(), ok.Load(), failed.Load(), dropped.Load()
	if v := firstErr.Load(); v != nil {
		res.FirstError = v.(string)
	}
	return res
}
