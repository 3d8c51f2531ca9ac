package main

import (
	"encoding/json"
	"flag"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/relayload/relayload/internal/testutil"
)

// TestSinkloadSmoke runs the measurement the upstream README quotes, briefly:
// sinkload spawns a real fake-upstream, posts zstd envelopes at a low rate
// and must find the server's count exact and its CPU time measured. It checks
// that the harness works, not the figures (those are for a quiet machine).
func TestSinkloadSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two binaries")
	}
	sinkload := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/sinkload")
	fakeUpstream := testutil.Build(t, "github.com/relayload/relayload/cmd/fake-upstream")
	for _, sign := range []string{"none", "fresh"} {
		out, err := exec.Command(sinkload, "--spawn", fakeUpstream,
			"--rate", "300", "--duration", "1s", "--warmup", "0s", "--bodies", "synthetic", "--n", "40",
			"--projects", "10", "--connections", "8", "--sign", sign).Output()
		if err != nil {
			t.Fatalf("sign=%s: sinkload: %v\n%s", sign, err, out)
		}
		var r Result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("sign=%s: output is not a Result: %v\n%s", sign, err, out)
		}
		if r.OK < 200 || r.Failed != 0 || !r.ExactCount || r.ServerCounted != r.OK || r.ServerCPUSeconds <= 0 || r.CPUMicrosPerEnv <= 0 {
			t.Errorf("sign=%s: %+v", sign, r)
		}
		if len(strings.Fields(r.LoadAverage)) != 3 {
			t.Errorf("sign=%s: load average %q, want /proc/loadavg's three figures", sign, r.LoadAverage)
		}
		if r.MeanDecodedBytes < 9000 || r.MeanWireBytes <= 0 || r.MeanWireBytes >= r.MeanDecodedBytes {
			t.Errorf("sign=%s: bodies %v wire, %v decoded; want ~10 KB zstd-compressed events", sign, r.MeanWireBytes, r.MeanDecodedBytes)
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "" for none
	}{
		{"spawn", []string{"--spawn", "/bin/fake-upstream"}, ""},
		{"target and pid", []string{"--target", "http://127.0.0.1:1", "--pid", "1"}, ""},
		{"synthetic size range", []string{"--pid", "1", "--bodies", "synthetic", "--decoded-size", "200", "--decoded-max", "16777216"}, ""},
		{"no pid without spawn", []string{"--target", "http://127.0.0.1:1"}, "--pid is required without --spawn"},
		{"negative pid", []string{"--spawn", "/x", "--pid", "-3"}, "--pid is required without --spawn"},
		{"zero duration", []string{"--pid", "1", "--duration", "0s"}, "--duration/--warmup must be in (0, 1m0s]"},
		{"long duration", []string{"--pid", "1", "--duration", "61s"}, "--duration/--warmup must be in"},
		{"negative warm-up", []string{"--pid", "1", "--warmup", "-1s"}, "--duration/--warmup must be in"},
		{"zero rate", []string{"--pid", "1", "--rate", "0"}, "--rate × time must be positive and ≤ 5000000 requests"},
		{"too many requests", []string{"--pid", "1", "--rate", "100000", "--duration", "50s", "--warmup", "1s"}, "--rate × time"},
		{"small decoded size", []string{"--pid", "1", "--decoded-size", "199"}, "--decoded-size/--decoded-max"},
		{"max below size", []string{"--pid", "1", "--decoded-size", "1000", "--decoded-max", "999"}, "--decoded-size/--decoded-max"},
		{"max above 16 MiB", []string{"--pid", "1", "--decoded-max", "16777217"}, "--decoded-size/--decoded-max"},
		{"unknown flag", []string{"--pid", "1", "--nope"}, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("sinkload", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			_, err := parseFlags(fs, tc.args)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestLoopbackHost(t *testing.T) {
	for _, tc := range []struct {
		target, host, wantErr string
	}{
		{"http://127.0.0.1:8000", "127.0.0.1:8000", ""},
		{"http://localhost:8000/", "localhost:8000", ""},
		{"http://[::1]:8000", "[::1]:8000", ""},
		{"http://127.1.2.3:9", "127.1.2.3:9", ""},
		{"http://10.0.0.1:8000", "", "loopback only"},
		{"http://example.com:8000", "", "loopback only"},
		{"https://127.0.0.1:8000", "", "want http://127.0.0.1:PORT"},
		{"127.0.0.1:8000", "", "want http://127.0.0.1:PORT"},
		{"", "", "want http://127.0.0.1:PORT"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			host, err := loopbackHost(tc.target)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if host != tc.host {
				t.Errorf("host = %q, want %q", host, tc.host)
			}
		})
	}
}

func TestDescribeBodies(t *testing.T) {
	mk := func(wire, decoded int) body { return body{wire: make([]byte, wire), decoded: decoded} }
	for _, tc := range []struct {
		name                 string
		bs                   []body
		min, max             int
		meanWire, meanDecode float64
	}{
		{"one", []body{mk(10, 100)}, 10, 10, 10, 100},
		{"several", []body{mk(30, 300), mk(10, 100), mk(20, 200)}, 10, 30, 20, 200},
		{"empty wire", []body{mk(0, 50), mk(4, 50)}, 0, 4, 2, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			describeBodies(&r, tc.bs)
			if r.MinWireBytes != tc.min || r.MaxWireBytes != tc.max || r.MeanWireBytes != tc.meanWire || r.MeanDecodedBytes != tc.meanDecode {
				t.Errorf("got min %d max %d mean wire %v decoded %v", r.MinWireBytes, r.MaxWireBytes, r.MeanWireBytes, r.MeanDecodedBytes)
			}
		})
	}
}

func TestMain(m *testing.M) { testutil.Main(m) }
