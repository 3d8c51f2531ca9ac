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
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relayload/relayload/blast"
	"github.com/relayload/relayload/pool"
	"github.com/relayload/relayload/projects"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sink" {
		sink()
		return
	}
	if err := bench(); err != nil {
		fmt.Fprintln(os.Stderr, "blastbench:", err)
		os.Exit(1)
	}
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

func bench() error {
	var (
		blastBin = flag.String("blast", "", "blast binary (required)")
		vegeta   = flag.String("vegeta", "", "vegeta binary (optional)")
		ratesS   = flag.String("rates", "10000,20000", "rates to run")
		duration = flag.Duration("duration", 5*time.Second, "measured duration per run")
		warmup   = flag.Duration("warmup", time.Second, "warm-up before each run")
		poolSize = flag.Int("pool", 20000, "pool size")
		encoding = flag.String("encoding", "zstd", "pool encoding")
		mix      = flag.String("mix", pool.DefaultMix, "pool mix")
		clientsS = flag.String("clients", "fasthttp", "blast clients to measure (fasthttp,net/http)")
		vegetaW  = flag.String("vegeta-workers", "default,128", "vegeta worker configs: default (unbounded) and/or a number for -workers=-max-workers")
		workDir  = flag.String("dir", "", "work directory (default: a temp dir, removed)")
		repeat   = flag.Int("repeat", 1, "runs of each blast configuration (the box is noisy: every run is listed)")
		upBin    = flag.String("upstream", "", "fake-upstream binary: use it (decoding and counting every envelope) as the sink instead of the null sink")
	)
	flag.Parse()
	if *blastBin == "" {
		return errors.New("-blast is required")
	}
	dir := *workDir
	if dir == "" {
		d, err := os.MkdirTemp("", "blastbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var rates []float64
	for _, s := range strings.Split(*ratesS, ",") {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r <= 0 {
			return fmt.Errorf("bad rate %q", s)
		}
		rates = append(rates, r)
	}

	// The sink: this binary in sink mode (or fake-upstream), a separate process.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sinkCmd := exec.Command(self, "sink")
	sinkName := "null fasthttp sink"
	if *upBin != "" {
		// blast's default --seed and --projects: the same projects.
		sinkCmd = exec.Command(*upBin, "--listen", "127.0.0.1:0", "--seed", "1", "--projects", "100")
		sinkName = "fake-upstream"
	}
	sinkIn, _ := sinkCmd.StdinPipe()
	sinkOut, _ := sinkCmd.StdoutPipe()
	sinkCmd.Stderr = os.Stderr
	if err := sinkCmd.Start(); err != nil {
		return err
	}
	defer func() {
		sinkIn.Close()
		_ = sinkCmd.Process.Signal(os.Interrupt)
		_ = sinkCmd.Wait()
	}()
	addr, err := bufio.NewReader(sinkOut).ReadString('\n')
	if err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	target := "http://" + strings.TrimSpace(addr)
	fmt.Fprintf(os.Stderr, "sink pid %d at %s\n", sinkCmd.Process.Pid, target)

	var rows []row
	for _, rate := range rates {
		for _, client := range strings.Split(*clientsS, ",") {
			for range max(*repeat, 1) {
				r, err := runBlast(*blastBin, dir, target, sinkCmd.Process.Pid, rate, client, *duration, *warmup, *poolSize, *encoding, *mix)
				if err != nil {
					return err
				}
				rows = append(rows, r)
				printRows(os.Stderr, rows[len(rows)-1:])
			}
		}
	}
	if *vegeta != "" {
		targets := filepath.Join(dir, "targets.json")
		if err := vegetaTargets(*blastBin, dir, target, targets, *poolSize, *encoding, *mix); err != nil {
			return err
		}
		for _, rate := range rates {
			for _, w := range strings.Split(*vegetaW, ",") {
				r, err := runVegeta(*vegeta, dir, targets, sinkCmd.Process.Pid, rate, w, *duration+*warmup)
				if err != nil {
					return err
				}
				rows = append(rows, r)
				printRows(os.Stderr, rows[len(rows)-1:])
			}
		}
	}
	fmt.Printf("\n%d-envelope %s pool, mix %s, %s measured after %s warm-up; %s in its own process; loopback; %d CPUs\n",
		*poolSize, *encoding, *mix, *duration, *warmup, sinkName, numCPU())
	printRows(os.Stdout, rows)
	return nil
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

// runBlast runs the blast binary once and measures it.
func runBlast(bin, dir, target string, sinkPID int, rate float64, client string, d, warmup time.Duration, size int, enc, mix string) (row, error) {
	out := filepath.Join(dir, fmt.Sprintf("blast-%s-%.0f.json", strings.ReplaceAll(client, "/", ""), rate))
	cmd := exec.Command(bin, "--target", target, "--rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--duration", d.String(), "--warmup", warmup.String(), "--pool", strconv.Itoa(size), "--encoding", enc,
		"--mix", mix, "--client", client, "--out", out)
	stderr, _ := cmd.StderrPipe()
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		return row{}, err
	}
	// Sending starts right after blast reports the pool built.
	var cpu0, sink0 time.Duration
	var poolHWM int64
	var sendHWM atomic.Int64
	hwmDone := make(chan struct{})
	var started time.Time
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "pool: ") {
			cpu0, _ = procCPU(cmd.Process.Pid)
			sink0, _ = procCPU(sinkPID)
			poolHWM, _ = procStatus(cmd.Process.Pid, "VmRSS:")
			// Reset the high-water mark: building the pool peaks far above
			// what sending needs, and that peak is pool's, not blast's.
			_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", cmd.Process.Pid), []byte("5"), 0)
			started = time.Now()
			go pollHWM(cmd.Process.Pid, &sendHWM, hwmDone)
			go io.Copy(io.Discard, stderr)
			break
		}
		fmt.Fprintln(os.Stderr, "blast:", line)
	}
	err := cmd.Wait()
	close(hwmDone)
	sink1, _ := procCPU(sinkPID)
	wall := time.Since(started)
	if err != nil {
		return row{}, fmt.Errorf("blast: %w\n%s", err, stdout.String())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu1 := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	res, err := blast.ReadFile(out)
	if err != nil {
		return row{}, err
	}
	fmt.Fprint(os.Stderr, stdout.String())
	n := res.Sent + res.WarmupSent
	r := row{
		tool: "blast", config: client, rate: rate, achieved: res.AchievedRate(),
		lagP99: res.Lag.Quantile(0.99), lagP999: res.Lag.Quantile(0.999),
		latP50: res.Latency.Quantile(0.5), latP99: res.Latency.Quantile(0.99),
		requests: n, rssMB: float64(sendHWM.Load()) / (1 << 20), poolMB: float64(res.PoolBytes) / (1 << 20),
		dropped: res.Dropped, load: loadavg(),
	}
	for _, e := range res.Errors {
		r.errors += e
	}
	if n > 0 {
		r.cpuPerReq = (cpu1 - cpu0) / time.Duration(n)
		r.sinkCPUPerReq = (sink1 - sink0) / time.Duration(n)
	}
	devs := res.WindowDeviations()
	r.windows = len(devs)
	for _, dv := range devs {
		if abs(dv) > abs(r.worstWindow) {
			r.worstWindow = dv
		}
	}
	r.note = fmt.Sprintf("RSS when sending starts %.1f MB (build peak %.0f MB); sending wall %.1fs; targets: %s",
		float64(poolHWM)/(1<<20), float64(ru.Maxrss)/1024, wall.Seconds(), verdict(r))
	if res.Invalid {
		r.note += "; INVALID: " + strings.Join(res.InvalidReasons, "; ")
	}
	return r, nil
}

func abs(f float64) float64 { return max(f, -f) }

// verdict checks a blast row against issue 4's targets.
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

// vegetaTargets writes vegeta JSON targets (one per line, body base64) from
// a `blast --dump` of the same pool.
func vegetaTargets(bin, dir, target, path string, size int, enc, mix string) error {
	dump := filepath.Join(dir, "dump")
	if out, err := exec.Command(bin, "--dump", dump, "--pool", strconv.Itoa(size), "--encoding", enc, "--mix", mix).CombinedOutput(); err != nil {
		return fmt.Errorf("blast --dump: %w: %s", err, out)
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
	sink0, _ := procCPU(sinkPID)
	if err := cmd.Run(); err != nil {
		return row{}, fmt.Errorf("vegeta attack: %w: %s", err, stderr.String())
	}
	sink1, _ := procCPU(sinkPID)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
		requests: vr.Requests, rssMB: float64(ru.Maxrss) / 1024, load: loadavg()}
	if vr.Requests > 0 {
		r.cpuPerReq = cpu / time.Duration(vr.Requests)
		r.sinkCPUPerReq = (sink1 - sink0) / time.Duration(vr.Requests)
		r.errors = vr.Requests - int64(vr.Codes["200"])
	}
	// Per-second windows from the results' timestamps (first second = warm-up, skipped).
	enc := exec.Command(bin, "encode", "-to", "csv", results)
	csv, err := enc.Output()
	if err == nil {
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
			r.windows++
			if abs(dv) > abs(r.worstWindow) {
				r.worstWindow = dv
			}
		}
	}
	r.note = "latency from vegeta's own send time (not intended time)"
	return r, nil
}

// procCPU is utime+stime of pid from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+2:]))
	// fields after ")": state(0) ... utime(11) stime(12), in clock ticks
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100), nil // CLK_TCK = 100
}

// pollHWM keeps the latest VmHWM of pid (monotonic after clear_refs) until done.
func pollHWM(pid int, hwm *atomic.Int64, done chan struct{}) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if v, err := procStatus(pid, "VmHWM:"); err == nil && v > hwm.Load() {
			hwm.Store(v)
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// procStatus is a kB field of /proc/PID/status in bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, nil
		}
	}
	return 0, errors.New("no " + field)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return bytes.Count(b, []byte("processor\t:"))
}
