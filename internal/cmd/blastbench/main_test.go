package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
)

// The harness runs end to end at a low rate: sink process, blast binary,
// CPU and RSS readings, the table.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries and runs blast")
	}
	blastBin := testutil.Build(t, "github.com/relayload/relayload/cmd/blast")
	benchBin := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/blastbench")
	out, err := exec.Command(benchBin, "-blast", blastBin, "-rates", "300", "-duration", "1s", "-warmup", "200ms",
		"-pool", "200", "-clients", "fasthttp,net/http").Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if strings.Count(s, "  blast ") < 2 || !strings.Contains(s, "CPU/req") || !strings.Contains(s, "targets:") {
		t.Fatalf("unexpected output:\n%s", s)
	}
}

// -replay alternates the generated pool and its dump replayed, and
// compares the two.
func TestReplaySmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries and runs blast four times")
	}
	blastBin := testutil.Build(t, "github.com/relayload/relayload/cmd/blast")
	benchBin := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/blastbench")
	out, err := exec.Command(benchBin, "-blast", blastBin, "-rates", "300", "-duration", "1s", "-warmup", "200ms",
		"-pool", "200", "-replay", "-repeat", "2").Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if strings.Count(s, "  blast fasthttp replay ") != 2 || strings.Count(s, "  blast fasthttp 300/s") != 2 ||
		!regexp.MustCompile(`(?m)^ +300 +fasthttp +2 +[0-9.]+µs +[0-9.]+µs +[0-9.]+ +[0-9.]+µs +[0-9.]+µs +[0-9.]+ +[0-9.]+ *$`).MatchString(s) {
		t.Fatalf("unexpected output:\n%s", s)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "" for none
		check   func(t *testing.T, o options)
	}{
		{"defaults", []string{"-blast", "/b"}, "", func(t *testing.T, o options) {
			if !slices.Equal(o.rates, []float64{10000, 20000}) || !slices.Equal(o.clients, []string{"fasthttp"}) ||
				!slices.Equal(o.vegetaWorkers, []string{"default", "128"}) || o.repeat != 1 ||
				o.duration != 5*time.Second || o.warmup != time.Second || o.poolSize != 20000 || o.encoding != "zstd" {
				t.Errorf("%+v", o)
			}
		}},
		{"lists and repeat below 1", []string{"-blast", "/b", "-rates", "300,1.5", "-clients", "fasthttp,net/http", "-repeat", "0"}, "", func(t *testing.T, o options) {
			if !slices.Equal(o.rates, []float64{300, 1.5}) || !slices.Equal(o.clients, []string{"fasthttp", "net/http"}) || o.repeat != 1 {
				t.Errorf("%+v", o)
			}
		}},
		{"no blast", []string{"-rates", "300"}, "-blast is required", nil},
		{"zero rate", []string{"-blast", "/b", "-rates", "300,0"}, `bad rate "0"`, nil},
		{"not a rate", []string{"-blast", "/b", "-rates", "fast"}, `bad rate "fast"`, nil},
		{"empty entry", []string{"-blast", "/b", "-rates", "300,"}, `bad rate ""`, nil},
		{"unknown flag", []string{"-blast", "/b", "-nope"}, "flag provided but not defined", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("blastbench", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o, err := parseFlags(fs, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

func TestVegetaWindows(t *testing.T) {
	const s = int64(time.Second)
	t0 := int64(1_700_000_000) * s
	// csv lines: timestamp,code,latency,… as `vegeta encode -to csv` writes them.
	lines := func(counts ...int) []byte {
		var b strings.Builder
		for sec, n := range counts {
			for i := range n {
				fmt.Fprintf(&b, "%d,200,1000,0,0,,,0,GET,http://x/\n", t0+int64(sec)*s+int64(i)*s/int64(n))
			}
		}
		return []byte(b.String())
	}
	for _, tc := range []struct {
		name    string
		csv     []byte
		rate    float64
		d       time.Duration
		windows int
		worst   float64
	}{
		{"exact", lines(10, 10, 10, 10), 10, 4 * time.Second, 3, 0},
		{"one short window", lines(10, 10, 8, 10), 10, 4 * time.Second, 3, -0.2},
		{"one long window wins over a shorter deviation", lines(10, 9, 13, 10), 10, 4 * time.Second, 3, 0.3},
		{"first second is warm-up", lines(1, 10, 10), 10, 3 * time.Second, 2, 0},
		{"junk lines skipped", append([]byte("header\nx,y\n\n"), lines(10, 10, 10)...), 10, 3 * time.Second, 2, 0},
		{"no results: every window empty", nil, 10, 3 * time.Second, 2, -1},
		{"shorter than two seconds: no window", lines(10), 10, time.Second, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, worst := vegetaWindows(tc.csv, tc.rate, tc.d)
			if n != tc.windows || math.Abs(worst-tc.worst) > 1e-9 {
				t.Errorf("vegetaWindows = %d, %v; want %d, %v", n, worst, tc.windows, tc.worst)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	good := row{rate: 10000, achieved: 10000, windows: 4, worstWindow: 0.005, cpuPerReq: 20 * time.Microsecond,
		rssMB: 100, poolMB: 50, lagP99: time.Millisecond}
	for _, tc := range []struct {
		name string
		edit func(r *row)
		want string
	}{
		{"all met", func(*row) {}, "achieved>=99.5% yes, windows±1% yes, CPU<=35µs yes, RSS-pool<=64MB yes, lag p99<=2ms yes"},
		{"slow and laggy", func(r *row) { r.achieved, r.lagP99 = 9000, 3*time.Millisecond },
			"achieved>=99.5% NO, windows±1% yes, CPU<=35µs yes, RSS-pool<=64MB yes, lag p99<=2ms NO"},
		{"no windows", func(r *row) { r.windows = 0 }, "achieved>=99.5% yes, windows±1% NO, CPU<=35µs yes, RSS-pool<=64MB yes, lag p99<=2ms yes"},
		{"above 10k: no lag target", func(r *row) { r.rate, r.achieved = 20000, 20000 },
			"achieved>=99.5% yes, windows±1% yes, CPU<=35µs yes, RSS-pool<=64MB yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good
			tc.edit(&r)
			if got := verdict(r); got != tc.want {
				t.Errorf("verdict = %q\nwant      %q", got, tc.want)
			}
		})
	}
}

// TestProcReadings checks the /proc readings the table is made of, on this
// process: the load average in /proc/loadavg's form, the CPU count, usage.
func TestProcReadings(t *testing.T) {
	if la := loadavg(); !regexp.MustCompile(`^\d+\.\d\d \d+\.\d\d \d+\.\d\d$`).MatchString(la) {
		t.Errorf("loadavg() = %q", la)
	}
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip(err)
	}
	if n, want := numCPU(), strings.Count(string(b), "processor\t:"); n != want || n < 1 {
		t.Errorf("numCPU() = %d, /proc/cpuinfo lists %d", n, want)
	}
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	cpu, maxRSS := usage(cmd.ProcessState)
	if cpu <= 0 || maxRSS < 1<<10 {
		t.Errorf("usage = %v, %d bytes", cpu, maxRSS)
	}
}

func TestMain(m *testing.M) { testutil.Main(m) }

func TestPrintReplay(t *testing.T) {
	us := time.Microsecond
	var rows []row
	for i, c := range [][2]time.Duration{{10 * us, 11 * us}, {20 * us, 22 * us}, {30 * us, 27 * us}} {
		rows = append(rows, row{tool: "blast", config: "fasthttp", rate: 20000, cpuPerReq: c[0], sinkCPUPerReq: c[0]},
			row{tool: "blast", config: "fasthttp replay", rate: 20000, cpuPerReq: c[1], sinkCPUPerReq: c[0] * 2})
		if i == 0 {
			rows = append(rows, row{tool: "vegeta", config: "128 workers", rate: 20000, cpuPerReq: time.Second})
		}
	}
	var b strings.Builder
	printReplay(&b, rows)
	want := regexp.MustCompile(`(?m)^ +20000 +fasthttp +3 +20.00µs +20.00µs +1.000 +20.00µs +22.00µs +1.100 +0.550$`)
	if !want.MatchString(b.String()) {
		t.Errorf("table:\n%s", b.String())
	}
}
