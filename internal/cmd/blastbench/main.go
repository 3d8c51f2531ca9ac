// Command blastbench measures blast (and, for comparison, vegeta) from the
// outside: it starts a null sink in a separate process, runs the built blast
// binary against it at fixed rates, and reads each generator's CPU time and
// peak RSS from the kernel (rusage of the child; /proc/PID/stat when sending
// starts, so building the pool is not charged to sending).
//
//	go build -o /tmp/blast ./cmd/blast
//	GOBIN=$(mktemp -d) go install github.com/tsenart/vegeta/v12@latest   # optional
//	go run ./internal/cmd/blastbench -blast /tmp/blast -vegeta $GOBIN/vegeta -rates 10000,20000 -duration 5s
//
// With -replay every blast run is made twice, in alternating order: with
// the generated pool and with a replay of its dump (blast --envelopes), and
// a last table gives blast's CPU per request with each and their ratio:
//
//	go run ./internal/cmd/blastbench -blast /tmp/blast -replay -rates 20000 -repeat 6
//
// Everything runs on loopback with bounded durations. The numbers depend on
// the machine; the load average is printed next to each row because this
// box is shared.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/projects"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sink" {
		sink()
		return
	}
	o, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err == nil {
		err = bench(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "blastbench:", err)
		os.Exit(1)
	}
}

// options are blastbench's flags.
type options struct {
	blastBin, vegeta string
	rates            []float64
	duration, warmup time.Duration
	poolSize         int
	encoding, mix    string
	clients          []string // blast's --client values
	vegetaWorkers    []string // "default" or a worker count
	workDir          string
	repeat           int
	upstream         string // fake-upstream binary, or "" for the null sink
	// replay alternates every blast run between the generated pool and a
	// replay of its dump (blast --envelopes) and compares their CPU per request.
	replay bool
}

// parseFlags parses args into options with fs (flag.CommandLine in main, so
// a bad flag exits 2 with usage).
func parseFlags(fs *flag.FlagSet, args []string) (options, error) {
	var (
		o        options
		ratesS   string
		clientsS string
		vegetaW  string
	)
	fs.StringVar(&o.blastBin, "blast", "", "blast binary (required)")
	fs.StringVar(&o.vegeta, "vegeta", "", "vegeta binary (optional)")
	fs.StringVar(&ratesS, "rates", "10000,20000", "rates to run")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured duration per run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "warm-up before each run")
	fs.IntVar(&o.poolSize, "pool", 20000, "pool size")
	fs.StringVar(&o.encoding, "encoding", "zstd", "pool encoding")
	fs.StringVar(&o.mix, "mix", pool.DefaultMix, "pool mix")
	fs.StringVar(&clientsS, "clients", "fasthttp", "blast clients to measure (fasthttp,net/http)")
	fs.StringVar(&vegetaW, "vegeta-workers", "default,128", "vegeta worker configs: default (unbounded) and/or a number for -workers=-max-workers")
	fs.StringVar(&o.workDir, "dir", "", "work directory (default: a temp dir, removed)")
	fs.IntVar(&o.repeat, "repeat", 1, "runs of each blast configuration (the box is noisy: every run is listed)")
	fs.StringVar(&o.upstream, "upstream", "", "fake-upstream binary: use it (decoding and counting every envelope) as the sink instead of the null sink")
	fs.BoolVar(&o.replay, "replay", false, "run every blast configuration twice per repeat, with the generated pool and with a replay of its dump (--envelopes), in alternating order, and compare their CPU per request")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if o.blastBin == "" {
		return options{}, errors.New("-blast is required")
	}
	for _, s := range strings.Split(ratesS, ",") {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r <= 0 {
			return options{}, fmt.Errorf("bad rate %q", s)
		}
		o.rates = append(o.rates, r)
	}
	o.clients = strings.Split(clientsS, ",")
	o.vegetaWorkers = strings.Split(vegetaW, ",")
	o.repeat = max(o.repeat, 1)
	return o, nil
}

// bench runs every configuration against one sink and prints the table.
func bench(o options) error {
	dir := o.workDir
	if dir == "" {
		d, err := os.MkdirTemp("", "blastbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	s, err := startSink(o.upstream)
	if err != nil {
		return err
	}
	defer s.stop()
	fmt.Fprintf(os.Stderr, "sink pid %d at %s\n", s.pid(), s.target)
	rows, err := runAll(o, dir, s)
	if err != nil {
		return err
	}
	fmt.Printf("\n%d-envelope %s pool, mix %s, %s measured after %s warm-up; %s in its own process; loopback; %d CPUs\n",
		o.poolSize, o.encoding, o.mix, o.duration, o.warmup, s.name, numCPU())
	printRows(os.Stdout, rows)
	if o.replay {
		printReplay(os.Stdout, rows)
	}
	return nil
}

// replaySuffix marks the rows of runs that replayed the dump.
const replaySuffix = " replay"

// printReplay compares, per rate and client, blast's CPU per request with
// the replayed pool against the generated one: the mean of each over the
// repeats, and their ratio.
func printReplay(w io.Writer, rows []row) {
	type key struct {
		rate   float64
		client string
	}
	type sums struct{ gen, rep, genSink, repSink []time.Duration }
	var order []key
	by := map[key]*sums{}
	for _, r := range rows {
		if r.tool != "blast" {
			continue
		}
		client, replayed := strings.CutSuffix(r.config, replaySuffix)
		k := key{r.rate, client}
		if by[k] == nil {
			by[k] = &sums{}
			order = append(order, k)
		}
		if replayed {
			by[k].rep, by[k].repSink = append(by[k].rep, r.cpuPerReq), append(by[k].repSink, r.sinkCPUPerReq)
		} else {
			by[k].gen, by[k].genSink = append(by[k].gen, r.cpuPerReq), append(by[k].genSink, r.sinkCPUPerReq)
		}
	}
	fmt.Fprintln(w, "\nblast CPU per request, replayed pool (--envelopes of its dump) against the generated pool, runs alternating;")
	fmt.Fprintln(w, "pair i is the i-th run of each: the median of the pairs' ratios is the least swayed by a disturbed run;")
	fmt.Fprintln(w, "per sink CPU: the same with each run's CPU per request divided by the sink's, which a busy machine slows alike")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target/s\tclient\tpairs\tgenerated mean\treplayed mean\tratio of means\tgenerated median\treplayed median\tmedian pair ratio\tper sink CPU\t")
	for _, k := range order {
		s := by[k]
		g, r := s.gen, s.rep
		n := min(len(g), len(r))
		var ratios, perSink []float64
		for i := range n {
			if g[i] > 0 {
				ratios = append(ratios, float64(r[i])/float64(g[i]))
			}
			if g[i] > 0 && s.genSink[i] > 0 && s.repSink[i] > 0 {
				perSink = append(perSink, ratio(float64(r[i])/float64(s.repSink[i]), float64(g[i])/float64(s.genSink[i])))
			}
		}
		fmt.Fprintf(tw, "%.0f\t%s\t%d\t%.2fµs\t%.2fµs\t%.3f\t%.2fµs\t%.2fµs\t%.3f\t%.3f\t\n", k.rate, k.client, n,
			us(mean(g)), us(mean(r)), ratio(mean(r), mean(g)), us(median(g)), us(median(r)), medianF(ratios), medianF(perSink))
	}
	tw.Flush()
}

func us(d float64) float64 { return d / 1e3 }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func mean(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	var sum float64
	for _, d := range ds {
		sum += float64(d)
	}
	return sum / float64(len(ds))
}

func median(ds []time.Duration) float64 {
	fs := make([]float64, len(ds))
	for i, d := range ds {
		fs[i] = float64(d)
	}
	return medianF(fs)
}

func medianF(fs []float64) float64 {
	if len(fs) == 0 {
		return 0
	}
	fs = slices.Clone(fs)
	slices.Sort(fs)
	if n := len(fs); n%2 == 1 {
		return fs[n/2]
	}
	return (fs[len(fs)/2-1] + fs[len(fs)/2]) / 2
}

// sinkProc is the sink process the generators send to.
type sinkProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	target string // http://ADDR
	name   string // for the table's heading
}

// startSink starts this binary in sink mode, or upBin (fake-upstream) if
// set, and reads the address it prints.
func startSink(upBin string) (*sinkProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s := &sinkProc{cmd: exec.Command(self, "sink"), name: "null fasthttp sink"}
	if upBin != "" {
		// blast's default --seed and --projects: the same projects.
		s.cmd = exec.Command(upBin, "--listen", "127.0.0.1:0", "--seed", "1", "--projects", "100")
		s.name = "fake-upstream"
	}
	s.stdin, _ = s.cmd.StdinPipe()
	out, _ := s.cmd.StdoutPipe()
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("sink: %w", err)
	}
	s.target = "http://" + strings.TrimSpace(addr)
	return s, nil
}

func (s *sinkProc) pid() int { return s.cmd.Process.Pid }

// stop closes the sink's stdin (the null sink exits), interrupts it
// (fake-upstream exits) and reaps it.
func (s *sinkProc) stop() {
	s.stdin.Close()
	_ = s.cmd.Process.Signal(os.Interrupt)
	_ = s.cmd.Wait()
}

// runAll measures blast for every rate, client and repeat, then vegeta for
// every rate and worker config, printing each row to stderr as it comes.
func runAll(o options, dir string, s *sinkProc) ([]row, error) {
	var rows []row
	add := func(r row) {
		rows = append(rows, r)
		printRows(os.Stderr, rows[len(rows)-1:])
	}
	corpus := ""
	if o.replay {
		corpus = filepath.Join(dir, "corpus")
		if err := dumpPool(o.blastBin, corpus, o.poolSize, o.encoding, o.mix); err != nil {
			return nil, err
		}
	}
	for _, rate := range o.rates {
		for _, client := range o.clients {
			for i := range o.repeat {
				// With -replay, ABBA: the order alternates so that drift of the
				// machine weighs on both pools alike.
				sources := []string{""}
				if o.replay {
					sources = []string{"", corpus}
					if i%2 == 1 {
						sources = []string{corpus, ""}
					}
				}
				for _, src := range sources {
					r, err := runBlast(o, dir, s.target, s.pid(), rate, client, src)
					if err != nil {
						return nil, err
					}
					add(r)
				}
			}
		}
	}
	if o.vegeta == "" {
		return rows, nil
	}
	targets := filepath.Join(dir, "targets.json")
	if err := vegetaTargets(o.blastBin, dir, s.target, targets, o.poolSize, o.encoding, o.mix); err != nil {
		return nil, err
	}
	for _, rate := range o.rates {
		for _, w := range o.vegetaWorkers {
			r, err := runVegeta(o.vegeta, dir, targets, s.pid(), rate, w, o.duration+o.warmup)
			if err != nil {
				return nil, err
			}
			add(r)
		}
	}
	return rows, nil
}

// sink is the null sink: a fasthttp server that reads each body and answers
// 200 with a small JSON body, like Relay's envelope endpoint. It prints its
// address and serves until stdin closes.
func sink() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	resp := []byte(`{"id":"00000000000000000000000000000000"}`)
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			_ = ctx.PostBody()
			ctx.SetContentType("application/json")
			ctx.SetBody(resp)
		},
		MaxRequestBodySize: 32 << 20,
		Concurrency:        1 << 16,
	}
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type row struct {
	tool, config    string
	rate            float64
	achieved        float64
	worstWindow     float64 // relative deviation of the worst full 1 s window
	windows         int
	lagP99, lagP999 time.Duration
	latP50, latP99  time.Duration
	cpuPerReq       time.Duration
	requests        int64
	sinkCPUPerReq   time.Duration
	rssMB, poolMB   float64
	errors, dropped int64
	load            string
	note            string
}

func printRows(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tool\tconfig\ttarget/s\tachieved/s\tworst 1s window\tlag p99\tlag p99.9\tlatency p50\tlatency p99\tCPU/req\tsink CPU/req\tpeak RSS sending\tpool bodies\terrors\tdropped\tloadavg\t")
	for _, r := range rows {
		lag, lag9 := fmtD(r.lagP99), fmtD(r.lagP999)
		if r.tool != "blast" {
			lag, lag9 = "n/a", "n/a"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%+.2f%% (%d)\t%s\t%s\t%s\t%s\t%.1fµs\t%.1fµs\t%.1f MB\t%.1f MB\t%d\t%d\t%s\t\n",
			r.tool, r.config, r.rate, r.achieved, 100*r.worstWindow, r.windows, lag, lag9, fmtD(r.latP50), fmtD(r.latP99),
			float64(r.cpuPerReq)/1e3, float64(r.sinkCPUPerReq)/1e3, r.rssMB, r.poolMB, r.errors, r.dropped, r.load)
	}
	tw.Flush()
	for _, r := range rows {
		fmt.Fprintf(w, "  %s %s %.0f/s: %s\n", r.tool, r.config, r.rate, r.note)
	}
}

func fmtD(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	}
	return fmt.Sprintf("%.2fms", float64(d)/1e6)
}

// runBlast runs the blast binary once and measures it: with the generated
// pool, or with corpus (a dump of it) replayed when corpus is set.
func runBlast(o options, dir, target string, sinkPID int, rate float64, client, corpus string) (row, error) {
	out := filepath.Join(dir, fmt.Sprintf("blast-%s-%.0f.json", strings.ReplaceAll(client, "/", ""), rate))
	args := []string{"--target", target, "--rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--duration", o.duration.String(), "--warmup", o.warmup.String(), "--pool", strconv.Itoa(o.poolSize),
		"--encoding", o.encoding, "--client", client, "--out", out}
	if corpus != "" {
		args = append(args, "--envelopes", corpus)
	} else {
		args = append(args, "--mix", o.mix)
	}
	cmd := exec.Command(o.blastBin, args...)
	stderr, _ := cmd.StderrPipe()
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		return row{}, err
	}
	var sendHWM atomic.Int64
	hwmDone := make(chan struct{})
	m := waitSending(cmd.Process.Pid, sinkPID, stderr, &sendHWM, hwmDone)
	err := cmd.Wait()
	close(hwmDone)
	m.sinkCPU1, _ = relayproc.CPUTime(sinkPID)
	m.wall = time.Since(m.started)
	// Exit status 1 with a result written is an INVALID run (e.g. lag on
	// a busy box): still a row, marked INVALID in its note.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return row{}, fmt.Errorf("blast: %w\n%s", err, stdout.String())
	}
	m.cpu1, m.buildPeak = usage(cmd.ProcessState)
	m.sendHWM = sendHWM.Load()
	res, rerr := blast.ReadFile(out)
	switch {
	case err != nil && (rerr != nil || !res.Invalid):
		return row{}, fmt.Errorf("blast: %w\n%s", err, stdout.String())
	case rerr != nil:
		return row{}, rerr
	}
	fmt.Fprint(os.Stderr, stdout.String())
	config := client
	if corpus != "" {
		config += replaySuffix
	}
	return blastRow(res, rate, config, m), nil
}

// blastRun is what runBlast measured around one blast run, from the kernel.
type blastRun struct {
	started            time.Time     // when sending started
	wall               time.Duration // from then to blast's exit
	cpu0, cpu1         time.Duration // blast's CPU time then and at exit
	sinkCPU0, sinkCPU1 time.Duration // the sink's
	poolRSS            int64         // blast's RSS when sending started (the pool built)
	sendHWM            int64         // peak RSS while sending
	buildPeak          int64         // getrusage's peak RSS (the build's), bytes
}

// waitSending echoes blast's stderr until it reports the pool built, then
// takes the readings at the start of sending, resets blast's peak RSS and
// starts pollHWM (stopped by closing done). If the line never comes, it
// returns when stderr ends, with only started unset.
func waitSending(pid, sinkPID int, stderr io.Reader, hwm *atomic.Int64, done chan struct{}) blastRun {
	var m blastRun
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "pool: ") {
			m.cpu0, _ = relayproc.CPUTime(pid)
			m.sinkCPU0, _ = relayproc.CPUTime(sinkPID)
			if mem, err := relayproc.ProcessMemory(pid); err == nil {
				m.poolRSS = int64(mem.RSS)
			}
			// Reset the high-water mark: building the pool peaks far above
			// what sending needs, and that peak is pool's, not blast's.
			_ = relayproc.ResetPeakRSS(pid)
			m.started = time.Now()
			go pollHWM(pid, hwm, done)
			go io.Copy(io.Discard, stderr)
			break
		}
		fmt.Fprintln(os.Stderr, "blast:", line)
	}
	return m
}

// usage is a finished child's CPU time (user+system) and peak RSS in bytes
// from getrusage.
func usage(ps *os.ProcessState) (cpu time.Duration, maxRSS int64) {
	cpu = ps.UserTime() + ps.SystemTime()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		maxRSS = ru.Maxrss << 10 // Linux reports KiB
	}
	return cpu, maxRSS
}

// blastRow is the table row of one blast run.
func blastRow(res *blast.Result, rate float64, client string, m blastRun) row {
	n := res.Sent + res.WarmupSent
	r := row{
		tool: "blast", config: client, rate: rate, achieved: res.AchievedRate(),
		lagP99: res.Lag.Quantile(0.99), lagP999: res.Lag.Quantile(0.999),
		latP50: res.Latency.Quantile(0.5), latP99: res.Latency.Quantile(0.99),
		requests: n, rssMB: float64(m.sendHWM) / (1 << 20), poolMB: float64(res.PoolBytes) / (1 << 20),
		dropped: res.Dropped, load: loadavg(),
	}
	for _, e := range res.Errors {
		r.errors += e
	}
	if n > 0 {
		r.cpuPerReq = (m.cpu1 - m.cpu0) / time.Duration(n)
		r.sinkCPUPerReq = (m.sinkCPU1 - m.sinkCPU0) / time.Duration(n)
	}
	devs := res.WindowDeviations()
	r.windows = len(devs)
	for _, dv := range devs {
		if abs(dv) > abs(r.worstWindow) {
			r.worstWindow = dv
		}
	}
	r.note = fmt.Sprintf("RSS when sending starts %.1f MB (build peak %.0f MB); sending wall %.1fs; targets: %s",
		float64(m.poolRSS)/(1<<20), float64(m.buildPeak)/(1<<20), m.wall.Seconds(), verdict(r))
	if res.Invalid {
		r.note += "; INVALID: " + strings.Join(res.InvalidReasons, "; ")
	}
	return r
}

func abs(f float64) float64 { return max(f, -f) }

// verdict checks a blast row against blast's targets: the achieved rate and
// every second within 1% of the schedule, CPU and memory per request, and
// schedule lag at up to 10k/s.
func verdict(r row) string {
	mark := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	v := []string{
		"achieved>=99.5% " + mark(r.achieved >= 0.995*r.rate),
		"windows±1% " + mark(r.windows > 0 && abs(r.worstWindow) <= 0.01),
		"CPU<=35µs " + mark(r.cpuPerReq <= 35*time.Microsecond),
		"RSS-pool<=64MB " + mark(r.rssMB-r.poolMB <= 64),
	}
	if r.rate <= 10000 {
		v = append(v, "lag p99<=2ms "+mark(r.lagP99 <= 2*time.Millisecond))
	}
	return strings.Join(v, ", ")
}

// dumpPool writes the pool blast builds with these options to dir (blast --dump).
func dumpPool(bin, dir string, size int, enc, mix string) error {
	if out, err := exec.Command(bin, "--dump", dir, "--pool", strconv.Itoa(size), "--encoding", enc, "--mix", mix).CombinedOutput(); err != nil {
		return fmt.Errorf("blast --dump: %w: %s", err, out)
	}
	return nil
}

// vegetaTargets writes vegeta JSON targets (one per line, body base64) from
// a `blast --dump` of the same pool.
func vegetaTargets(bin, dir, target, path string, size int, enc, mix string) error {
	dump := filepath.Join(dir, "dump")
	if err := dumpPool(bin, dump, size, enc, mix); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dump, "manifest.json"))
	if err != nil {
		return err
	}
	var m pool.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	enc2 := json.NewEncoder(w)
	for _, e := range m.Entries {
		body, err := os.ReadFile(filepath.Join(dump, e.BodyFile))
		if err != nil {
			return err
		}
		h := map[string][]string{
			"Content-Type":    {"application/x-sentry-envelope"},
			"X-Sentry-Auth":   {projects.Project{PublicKey: e.PublicKey}.AuthHeader(blast.DefaultSDKClient)},
			"User-Agent":      {e.UserAgent},
			"X-Forwarded-For": {e.ForwardedFor},
		}
		if e.Encoding != "" && e.Encoding != "identity" {
			h["Content-Encoding"] = []string{e.Encoding}
		}
		if err := enc2.Encode(map[string]any{
			"method": "POST", "url": target + projects.Project{ID: e.ProjectID}.EnvelopePath(),
			"body": base64.StdEncoding.EncodeToString(body), "header": h,
		}); err != nil {
			return err
		}
	}
	return w.Flush()
}

// runVegeta attacks at rate for d and measures vegeta's CPU and RSS.
func runVegeta(bin, dir, targets string, sinkPID int, rate float64, workers string, d time.Duration) (row, error) {
	results := filepath.Join(dir, "vegeta.bin")
	args := []string{"attack", "-targets", targets, "-format", "json", "-rate", fmt.Sprintf("%.0f/s", rate),
		"-duration", d.String(), "-max-body", "0", "-timeout", "5s", "-output", results}
	cfg := "unbounded workers"
	if workers != "default" {
		args = append(args, "-workers", workers, "-max-workers", workers)
		cfg = workers + " workers"
	}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	sink0, _ := relayproc.CPUTime(sinkPID)
	if err := cmd.Run(); err != nil {
		return row{}, fmt.Errorf("vegeta attack: %w: %s", err, stderr.String())
	}
	sink1, _ := relayproc.CPUTime(sinkPID)
	cpu, maxRSS := usage(cmd.ProcessState)
	rep, err := exec.Command(bin, "report", "-type", "json", results).Output()
	if err != nil {
		return row{}, fmt.Errorf("vegeta report: %w", err)
	}
	var vr struct {
		Latencies struct {
			P50 time.Duration `json:"50th"`
			P99 time.Duration `json:"99th"`
		} `json:"latencies"`
		Requests int64          `json:"requests"`
		Rate     float64        `json:"rate"`
		Success  float64        `json:"success"`
		Errors   []string       `json:"errors"`
		Codes    map[string]int `json:"status_codes"`
	}
	if err := json.Unmarshal(rep, &vr); err != nil {
		return row{}, err
	}
	r := row{tool: "vegeta", config: cfg, rate: rate, achieved: vr.Rate, latP50: vr.Latencies.P50, latP99: vr.Latencies.P99,
		requests: vr.Requests, rssMB: float64(maxRSS) / (1 << 20), load: loadavg()}
	if vr.Requests > 0 {
		r.cpuPerReq = cpu / time.Duration(vr.Requests)
		r.sinkCPUPerReq = (sink1 - sink0) / time.Duration(vr.Requests)
		r.errors = vr.Requests - int64(vr.Codes["200"])
	}
	// Per-second windows from the results' timestamps (first second = warm-up, skipped).
	if csv, err := exec.Command(bin, "encode", "-to", "csv", results).Output(); err == nil {
		r.windows, r.worstWindow = vegetaWindows(csv, rate, d)
	}
	r.note = "latency from vegeta's own send time (not intended time)"
	return r, nil
}

// vegetaWindows counts the requests of `vegeta encode -to csv` output (one
// line per request, the first field its send time in Unix ns) per second from
// the first, and returns the number of full windows after the first (a
// warm-up) before d, and the relative deviation from rate of the worst one.
func vegetaWindows(csv []byte, rate float64, d time.Duration) (windows int, worst float64) {
	var t0 int64 = -1
	perSec := map[int64]int64{}
	for _, line := range strings.Split(string(csv), "\n") {
		ts, _, ok := strings.Cut(line, ",")
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			continue
		}
		if t0 < 0 || ns < t0 {
			t0 = ns
		}
		perSec[ns]++
	}
	win := map[int64]int64{}
	for ns, c := range perSec {
		win[(ns-t0)/1e9] += c
	}
	last := int64(d / time.Second)
	for s := int64(1); s < last; s++ {
		dv := float64(win[s])/rate - 1
		windows++
		if abs(dv) > abs(worst) {
			worst = dv
		}
	}
	return windows, worst
}

// pollHWM keeps the latest VmHWM of pid (monotonic after clear_refs) until done.
func pollHWM(pid int, hwm *atomic.Int64, done chan struct{}) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if m, err := relayproc.ProcessMemory(pid); err == nil && int64(m.Peak) > hwm.Load() {
			hwm.Store(int64(m.Peak))
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// loadavg is the load average as /proc/loadavg shows it ("0.46 1.33 1.57"),
// or "?" if it cannot be read.
func loadavg() string {
	l, err := relayproc.SystemLoadAvg()
	if err != nil {
		return "?"
	}
	return l.String()
}

// numCPU is the number of processors /proc/cpuinfo lists (0 if unreadable).
func numCPU() int {
	n, _ := relayproc.CPUCount()
	return n
}
