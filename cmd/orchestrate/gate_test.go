package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayload/relayload/internal/testutil"
)

// TestGateNeverPassesUnmeasured: a comparison whose build never starts
// fails the gate (exit 1); one that ends with fewer pairs than a verdict
// needs, or a threshold on a metric it could not measure, is inconclusive
// (exit 3) with one line saying which; never "no threshold crossed".
func TestGateNeverPassesUnmeasured(t *testing.T) {
	relay := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	dir := t.TempDir()
	conf := filepath.Join(dir, "relay.yml")
	if err := os.WriteFile(conf, []byte("limits:\n  shutdown_timeout: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copyBin := filepath.Join(dir, "standin-copy")
	b, err := os.ReadFile(relay)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyBin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	common := []string{"--relay-bin", relay, "--relay-name", "main", "--relay-config", conf, "--rates", "100",
		"--slice", "1s", "--block", "10s", "--idle", "500ms", "--projects", "5", "--pool", "100", "--quiet"}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"a build that never starts", []string{"--compare", "broken=/bin/false", "--budget", "20s", "--fail-on", "cpu_ms_per_envelope>+5%"},
			1, []string{"failed"}},
		{"too few pairs, no counters", []string{"--compare", "copy=" + copyBin, "--budget", "20s",
			"--fail-on", "cpu_ms_per_envelope>+5%,instructions_per_envelope>+5%"},
			3, []string{"fewer than the 10 a verdict needs", "instructions_per_envelope", "the gate could not tell"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			var stdout, stderr bytes.Buffer
			code := run(append(append(append([]string{}, common...), tc.args...), "--out", out), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
			if strings.Contains(stdout.String(), "No threshold crossed") {
				t.Errorf("stdout says no threshold crossed:\n%s", stdout.String())
			}
			// results.json carries the same truth.
			raw, err := os.ReadFile(filepath.Join(out, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			var rep struct {
				Gate struct {
					Breaches     []any    `json:"breaches"`
					Inconclusive []any    `json:"inconclusive"`
					Failed       []string `json:"failed"`
				} `json:"gate"`
			}
			if err := json.Unmarshal(raw, &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Gate.Breaches) != 0 || (tc.code == 1) != (len(rep.Gate.Failed) > 0) || (tc.code == 3) != (len(rep.Gate.Inconclusive) > 0) {
				t.Errorf("results.json gate %+v", rep.Gate)
			}
		})
	}
}
