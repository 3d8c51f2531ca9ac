package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/upstream"
)

// A bad --user-agents-file is one line naming the file and the line, exit
// 2, nothing sent.
func TestUserAgentsFileRefused(t *testing.T) {
	srv, n := sink(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		content, want string
	}{
		{"", "a.txt: no agents"},
		{"# only a comment\n\n", "a.txt: no agents"},
		{"curl/8.5.0\nWget/1.21.4\tmany\n", `a.txt:2: weight "many": want a positive number`},
		{"curl/8.5.0\nWget/1.21.4\ncurl/8.5.0\n", "a.txt:3: the agent of line 1 again"},
		{"curl/8.5.0\t2\nWget/1.21.4\n", "a.txt:2: no weight, but line 1 has one"},
		{"curl/8.5.0\x00\n", "a.txt:1: agent has control character U+0000"},
	} {
		path := filepath.Join(dir, "a.txt")
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := runBlast(t, "--target", srv.URL, "--count", "5", "--pool", "10", "--user-agents-file", path)
		want := "blast: --user-agents-file: " + filepath.Join(dir, tc.want)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) || !strings.HasSuffix(stderr, " (see --help)\n") {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and one line starting %q", tc.content, code, stderr, want)
		}
	}
	if _, stderr, code := runBlast(t, "--target", srv.URL, "--user-agents-file", filepath.Join(dir, "missing.txt")); code != 2 ||
		!strings.Contains(stderr, "missing.txt: no such file") {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr)
	}
	if n.Load() != 0 {
		t.Fatalf("bad files sent %d requests", n.Load())
	}
}

// --user-agents-file with a file of N distinct agents shows N distinct
// agents at the upstream: drawn (Zipf), in turn with
// --unique-user-agents when the pool is larger than the file, and the
// first --pool of them when it is not.
func TestUserAgentsFileAtUpstream(t *testing.T) {
	const file = "testdata/agents.txt" // 7 agents
	ps, err := projects.Generate(3, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		distinct   int64
		wantStderr string
	}{
		{"drawn", []string{"--pool", "300", "--count", "600"}, 7, ""},
		{"unique, cycled", []string{"--pool", "40", "--count", "80", "--unique-user-agents"}, 7,
			"blast: 7 user agents in testdata/agents.txt for a pool of 40 envelopes: each agent serves about 6 envelopes, in turn\n"},
		{"unique, fewer envelopes than agents", []string{"--pool", "5", "--count", "20", "--unique-user-agents"}, 5,
			"blast: 7 user agents in testdata/agents.txt for a pool of 5 envelopes: every envelope has its own (the first 5)\n"},
	} {
		srv, err := upstream.Start(upstream.Config{Projects: ps})
		if err != nil {
			t.Fatal(err)
		}
		args := append([]string{"--target", srv.URL, "--projects-from", srv.URL + "/projects", "--user-agents-file", file,
			"--rate", "2000", "--timeout", "30s"}, tc.args...)
		stdout, stderr, code := runBlast(t, args...)
		wantMeasured(t, code, stdout, stderr)
		st := srv.Stats()
		srv.Close()
		if st.UserAgents != tc.distinct || st.Envelopes == 0 || st.Envelopes != st.EnvelopesBySender["sdk"] {
			t.Errorf("%s: upstream saw %d distinct agents in %d envelopes (errors %v), want %d", tc.name, st.UserAgents, st.Envelopes,
				st.Errors, tc.distinct)
		}
		if tc.wantStderr != "" && !strings.HasPrefix(stderr, tc.wantStderr) {
			t.Errorf("%s: stderr %q, want it to start %q", tc.name, stderr, tc.wantStderr)
		}
		if tc.wantStderr == "" && strings.Contains(stderr, "user agents in") {
			t.Errorf("%s: stderr %q speaks of unique agents", tc.name, stderr)
		}
	}
}
