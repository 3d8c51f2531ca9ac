package orchestrate

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
)

func skipWithoutIPv6(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ln.Close()
}

// TestStandinIPv6 runs a Relay (the stand-in) listening on ::1, chosen
// with Host or with relay.host in the overrides: it keeps up, every
// request answered. Before, blast dialled IPv4 only, every request failed
// as "other", and the step fell behind with exit status 0.
func TestStandinIPv6(t *testing.T) {
	skipWithoutIPv6(t)
	bin := standin(t)
	for _, tc := range []struct {
		name         string
		host         string
		over         relayconfig.Config
		upstreamIPv6 bool
	}{
		{"Host", "::1", nil, true},
		{"relay.host override", "", relayconfig.Config{"relay": map[string]any{"host": "::1"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := quick(50)
			cfg.Builds = []Build{{Name: "standin", Bin: bin}}
			fastShutdown(&cfg)
			cfg.WorkDir = t.TempDir()
			cfg.Keep = true
			cfg.Host = tc.host
			cfg.RelayConfig = tc.over
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Steps) != 1 || rep.Failed != 0 {
				t.Fatalf("steps %d failed %d: %+v", len(rep.Steps), rep.Failed, rep.Steps)
			}
			st := rep.Steps[0]
			if st.Sent == 0 || st.OK != st.Sent || !okVerdict(st.Verdict) {
				t.Errorf("sent %d ok %d errors %v: %s %v", st.Sent, st.OK, st.Errors, st.Verdict, st.Reasons)
			}
			b, err := os.ReadFile(filepath.Join(st.Dir, "config", "config.yml"))
			if err != nil {
				t.Fatal(err)
			}
			conf, err := relayconfig.ParseOverrides(b)
			if err != nil {
				t.Fatal(err)
			}
			if h, _ := relayconfig.Lookup(conf, "relay", "host"); h != "::1" {
				t.Errorf("relay.host %v, want ::1", h)
			}
			up, _ := relayconfig.Lookup(conf, "relay", "upstream")
			if got := strings.Contains(up.(string), "[::1]"); got != tc.upstreamIPv6 {
				t.Errorf("relay.upstream %v: on ::1 %v, want %v", up, got, tc.upstreamIPv6)
			}
		})
	}
}

// TestUnreachableTargetFailsStep points blast at a port nothing listens
// on: the step fails with the reason instead of Relay "falling behind".
func TestUnreachableTargetFailsStep(t *testing.T) {
	cfg := quick(100)
	cfg.Duration = 500 * time.Millisecond
	r := testRunner(t, cfg)
	st := &Step{Index: 1, Build: "harness", Round: 1, Rate: 100}
	s := newStep(t.Context(), r, st, Build{Name: "harness"})
	defer s.close()
	for _, p := range s.startPhases() {
		if p.name == "warm-up" {
			break
		}
		if err := p.run(); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s.target = "http://127.0.0.1:" + strconv.Itoa(port)
	err = s.measure()
	if err == nil || !strings.Contains(err.Error(), "could not reach "+s.target) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("measure: %v, want an unreachable target named with its reason", err)
	}
}
