package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRelayReportCompareBadInput: a bad --compare (or a setting of the
// comparison) is one line and exit 2, and nothing runs: no report
// directory is made.
func TestRelayReportCompareBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--compare", "x"}, `--compare "x": want NAME=BIN[:CONFIG.yml]`},
		{[]string{"--compare", "=/bin/true"}, `--compare "=/bin/true": want NAME=BIN[:CONFIG.yml]`},
		{[]string{"--compare", "relay=/bin/true"}, "--compare: the build's name is --relay-name's; give it another"},
		{[]string{"--relay-name", "main", "--compare", "main=/bin/true"}, "--compare: the build's name is --relay-name's"},
		{[]string{"--compare", "my branch=/bin/true"}, `build name "my branch": letters, digits`},
		{[]string{"--compare", "b=/nonexistent/relay"}, "--relay-bin or --compare: build b: /nonexistent/relay is not an executable file"},
		{[]string{"--compare", "b=/bin/true:/nonexistent.yml"}, `--compare "b=/bin/true:/nonexistent.yml"`},
		{[]string{"--compare", "b=/bin/true:" + badSection(t)}, "the relayload section takes inbound_filters: true|false"},
		{[]string{"--compare", "b=/bin/true", "--precision", "soon"}, `--precision "soon": want a percentage such as 3%`},
		{[]string{"--compare", "b=/bin/true", "--slice", "10ms"}, "--slice: 10ms: want 1s..10m"},
		{[]string{"--compare", "b=/bin/true", "--budget", "5s"}, "--budget: 5s: want at least two slices"},
		{[]string{"--budget", "5m"}, "--slice, --budget and --precision need --compare"},
		{[]string{"--precision", "3%"}, "--slice, --budget and --precision need --compare"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"relay-report", "--relay-bin", "/bin/true", "--out", out}, tc.args...), &stdout, &stderr)
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || !strings.HasPrefix(lines[0], "orchestrate relay-report: ") ||
			!strings.HasSuffix(lines[0], " (see --help)") {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and one line with %q", tc.args, code, stderr.String(), tc.want)
		}
		if _, err := os.Stat(out); stdout.Len() != 0 || err == nil {
			t.Errorf("%v: stdout %q, out made: %v", tc.args, stdout.String(), err == nil)
		}
	}
}

// TestRelayReportCompareOptions: the flags become the Options of
// package relayreport; without --compare nothing of a comparison is set.
func TestRelayReportCompareOptions(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "filters.yml")
	if err := os.WriteFile(conf, []byte("limits:\n  max_thread_count: 2\nrelayload:\n  inbound_filters: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, quiet, err := relayReportOptions([]string{"--relay-bin", "/r/main", "--relay-name", "main", "--out", "o", "--quiet",
		"--compare", "filters=/r/main:" + conf, "--slice", "3s", "--budget", "90s", "--precision", "3%"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b := o.Compare
	if !quiet || o.RelayBin != "/r/main" || o.BaselineName != "main" || b == nil || b.Name != "filters" || b.Bin != "/r/main" ||
		b.InboundFilters == nil || !*b.InboundFilters || b.RelayConfig["limits"] == nil || b.RelayConfig["relayload"] != nil ||
		o.Slice != 3*time.Second || o.CompareBudget != 90*time.Second || o.Precision != 0.03 {
		t.Errorf("options %+v, compared %+v", o, b)
	}
	o, _, err = relayReportOptions([]string{"--relay-bin", "/r/main", "--out", "o"}, io.Discard)
	if err != nil || o.Compare != nil || o.BaselineName != "relay" || o.Slice != 0 || o.CompareBudget != 0 || o.Precision != 0 {
		t.Errorf("without --compare: %+v, %v", o, err)
	}
}

// --user-agents-file reaches orchestrate's Config and relay-report's
// Options as the list and its file's name.
func TestUserAgentsFileOptions(t *testing.T) {
	path := agentsFile(t, "# two\ncurl/8.5.0\t3\nWget/1.21.4\t1\n")
	fs := flag.NewFlagSet("orchestrate", flag.ContinueOnError)
	var opts options
	opts.define(fs)
	if err := fs.Parse([]string{"--rates", "100", "--user-agents-file", path, "--unique-user-agents"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := opts.config()
	if err != nil || len(cfg.Agents) != 2 || cfg.Agents[0].UA != "curl/8.5.0" || cfg.Agents[0].Weight != 3 || cfg.AgentsFrom != path ||
		!cfg.UniqueUserAgents {
		t.Errorf("orchestrate: agents %+v from %q, unique %v, %v", cfg.Agents, cfg.AgentsFrom, cfg.UniqueUserAgents, err)
	}
	o, _, err := relayReportOptions([]string{"--relay-bin", "/r/main", "--out", "o", "--user-agents-file", path}, io.Discard)
	if err != nil || len(o.Agents) != 2 || o.Agents[1].UA != "Wget/1.21.4" || o.AgentsFrom != path {
		t.Errorf("relay-report: agents %+v from %q, %v", o.Agents, o.AgentsFrom, err)
	}
	o, _, err = relayReportOptions([]string{"--relay-bin", "/r/main", "--out", "o"}, io.Discard)
	if err != nil || o.Agents != nil || o.AgentsFrom != "" {
		t.Errorf("relay-report without a file: agents %+v from %q, %v", o.Agents, o.AgentsFrom, err)
	}
}

// --envelopes reaches relay-report's options as a loaded corpus.
func TestRelayReportEnvelopes(t *testing.T) {
	o, _, err := relayReportOptions([]string{"--relay-bin", "/bin/true", "--out", t.TempDir(), "--envelopes", corpus}, io.Discard)
	if err != nil || o.Corpus == nil || o.Corpus.Len() != 9 {
		t.Fatalf("options %+v, %v", o, err)
	}
}
