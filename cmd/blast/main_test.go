package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/testutil"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/upstream"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// binary is the blast program, built once per test binary.
func binary(t testing.TB) string {
	return testutil.Build(t, "github.com/relayload/relayload/cmd/blast")
}

func sink(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n.Add(1)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func runBlast(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// Bad input: one line on stderr, exit status 2, nothing sent.
// corpus is a directory of recorded envelopes (package replay's fixtures).
const corpus = "../../internal/replay/testdata/corpus"

func TestBadInput(t *testing.T) {
	srv, n := sink(t)
	ok := []string{"--target", srv.URL, "--count", "10", "--pool", "20"}
	for _, tc := range [][]string{
		{"--rate", "-5"},
		{"--rate", "0"},
		{"--rate", "fast"},
		{"--target", "not a url"},
		{"--target", "ftp://127.0.0.1:1"},
		{"--target", ""},
		{"--encoding", "lz4"},
		{"--encoding", ""},
		{"--mix", "bogus=1"},
		{"--mix", "errors=x"},
		{"--mix", "errors=-1"},
		{"--shard", "2/2"},
		{"--shard", "1"},
		{"--shard", "-1/3"},
		{"--concurrency", "0"},
		{"--max-inflight", "-1"},
		{"--duration", "-1s"},
		{"--duration", "5"},
		{"--pool", "0"},
		{"--zipf-s", "1"},
		{"--client", "curl"},
		{"--projects-from", "ftp://127.0.0.1:1/projects"},
		{"--user-agents", "0"},
		{"--projects", "0"},
		{"--no-such-flag"},
		{"stray-argument"},
		{"--envelopes", corpus, "--mix", "errors=1"},
		{"--envelopes", corpus, "--zipf-s", "1.5"},
		{"--envelopes", corpus, "--user-agents-file", "agents.txt"},
		{"--envelopes", corpus, "--unique-user-agents"},
		{"--envelopes", t.TempDir()},
		{"--envelopes", "/nonexistent"},
		{"--envelopes", "../../internal/replay/testdata/bad"},
		// Issue 33: what the schedule cannot hold, refused before anything
		// runs (1e300 used to spin for minutes, 1e-9 sent nothing, 1ns
		// reported 16399.4/s from one request).
		{"--rate", "1e300", "--duration", "1s"},
		{"--rate", "1e9"},
		{"--rate", "1e-9", "--count", "0", "--duration", "1s"},
		{"--count", "0", "--duration", "1ns"},
		{"--count", "9223372036854775807"},
		{"--count", "1", "--shard", "1/2"},
		{"--warmup", "8000h", "--duration", "8000h"},
		{"--rate", "max", "--concurrency", "1000000000"},
	} {
		args := append(append([]string{}, ok...), tc...)
		_, stderr, code := runBlast(t, args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc, code, stderr)
			continue
		}
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "blast: ") || strings.HasPrefix(lines[0], "blast: blast:") ||
			!strings.HasSuffix(lines[0], " (see --help)") || strings.Contains(lines[0], "bad config") {
			t.Errorf("%v: stderr %q, want one line naming the flag and pointing to --help", tc, stderr)
		}
	}
	if n.Load() != 0 {
		t.Fatalf("bad input sent %d requests", n.Load())
	}
	if _, _, code := runBlast(t, "merge"); code != 2 {
		t.Errorf("merge without files: exit %d", code)
	}
	if _, _, code := runBlast(t, "merge", "/nonexistent.json"); code != 2 {
		t.Errorf("merge of a missing file: exit %d", code)
	}
	// A damaged result file: one line, exit 2, no crash (a negative window
	// second used to panic in Merge).
	bad := filepath.Join(t.TempDir(), "bad.json")
	sk, err := blast.NewSketch().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	result := `{"schema":1,"latency":` + string(sk) + `,"lag":` + string(sk) + `,"service":` + string(sk) + `,"windows":[{"second":-3}]}`
	if err := os.WriteFile(bad, []byte(result), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runBlast(t, "merge", bad); code != 2 || !strings.Contains(stderr, "window 0 has second -3") ||
		strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("merge of a damaged file: exit %d, stderr %q", code, stderr)
	}
}

func TestRunShardsAndMerge(t *testing.T) {
	srv, n := sink(t)
	dir := t.TempDir()
	var files []string
	for _, shard := range []string{"0/2", "1/2"} {
		f := filepath.Join(dir, strings.ReplaceAll(shard, "/", "of")+".json")
		files = append(files, f)
		stdout, stderr, code := runBlast(t, "--target", srv.URL, "--rate", "2000", "--count", "301", "--pool", "40",
			"--encoding", "gzip", "--shard", shard, "--out", f, "--timeout", "30s")
		wantMeasured(t, code, stdout, stderr)
		if !strings.Contains(stdout, "sent") || !strings.Contains(stdout, "latency") {
			t.Fatalf("no summary table:\n%s", stdout)
		}
	}
	if n.Load() != 301 {
		t.Fatalf("server got %d, want 301", n.Load())
	}
	merged := filepath.Join(dir, "merged.json")
	stdout, stderr, code := runBlast(t, append([]string{"merge", "--out", merged}, files...)...)
	wantMeasured(t, code, stdout, stderr)
	r, err := blast.ReadFile(merged)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 301 || r.OK != 301 || r.Parts != 2 || r.Latency.Count() != 301 {
		t.Fatalf("merged sent %d ok %d parts %d latency count %d\n%s", r.Sent, r.OK, r.Parts, r.Latency.Count(), stdout)
	}
	if st, _ := os.Stat(merged); st.Size() > 100<<10 {
		t.Errorf("result file %d bytes", st.Size())
	}
}

func TestDump(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pool")
	_, stderr, code := runBlast(t, "--dump", dir, "--pool", "25", "--encoding", "zstd")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	ents, _ := filepath.Glob(filepath.Join(dir, "*.envelope"))
	if len(ents) != 25 {
		t.Fatalf("%d envelopes dumped", len(ents))
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m pool.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 25 || m.Options.Encoding != "zstd" || m.Options.Size != 25 {
		t.Fatalf("manifest: %d entries, options %+v", len(m.Entries), m.Options)
	}
	// Timestamps are fresh for every run: anchored at the time blast starts.
	if age := time.Since(m.Options.Now); age < 0 || age > time.Minute {
		t.Fatalf("pool anchored at %v, %v ago", m.Options.Now, age)
	}
	raw, err := os.ReadFile(filepath.Join(dir, m.Entries[0].File))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"sent_at":"` + m.Options.Now.Format("2006-01-02T15:04:05.000Z") + `"`; !strings.Contains(string(raw[:bytes.IndexByte(raw, '\n')]), want) {
		t.Fatalf("envelope header %.200s lacks %s", raw, want)
	}
}

// SIGINT stops sending, prints the partial result and writes --out.
func TestInterrupt(t *testing.T) {
	srv, n := sink(t)
	out := filepath.Join(t.TempDir(), "r.json")
	cmd := exec.Command(binary(t), "--target", srv.URL, "--rate", "500", "--duration", "60s", "--pool", "30", "--out", out, "--progress", "--timeout", "30s")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for traffic, then interrupt.
	deadline := time.Now().Add(20 * time.Second)
	for n.Load() < 700 && time.Now().Before(deadline) { // past the first progress line
		time.Sleep(20 * time.Millisecond)
	}
	stalls := testutil.StartStalls()
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	took, lost := time.Since(start), stalls.Stop()
	// An interrupted run is partial: exit status 130, as orchestrate's.
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 || !strings.Contains(e.String(), "blast: interrupted") {
		t.Fatalf("exit %v, want status 130 and a line saying interrupted: %s", err, e.String())
	}
	if took > 10*time.Second+lost {
		t.Errorf("exit took %v after SIGINT (%v lost to the machine)", took, lost)
	}
	r, err := blast.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.String(), "rate ") || !strings.Contains(e.String(), " p99 ") {
		t.Errorf("no progress line on stderr:\n%s", e.String())
	}
	if !r.Interrupted || r.Sent < 200 || r.Sent != n.Load() || !strings.Contains(o.String(), "interrupted") {
		t.Fatalf("interrupted %v sent %d server %d\n%s", r.Interrupted, r.Sent, n.Load(), o.String())
	}
}

// SIGTERM ends a run promptly however far behind its schedule the pacer is:
// at the highest rate, with few requests allowed in flight, almost every
// slot is due at once and dropped, and the pacer never sleeps (issue 33:
// it ignored SIGTERM until its whole plan was released).
func TestTermWhileBehind(t *testing.T) {
	srv, n := sink(t)
	cmd := exec.Command(binary(t), "--target", srv.URL, "--rate", "10000000", "--duration", "300s", "--pool", "20",
		"--max-inflight", "16", "--max-conns", "16", "--timeout", "2s")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() // a pacer that ignores the signal: ended here
	deadline := time.Now().Add(30 * time.Second)
	for n.Load() < 100 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n.Load() < 100 {
		t.Fatalf("blast sent %d requests in 30s", n.Load())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The grace for requests in flight is --timeout (2s); the rest is
	// room for a loaded machine, far below the 300s plan.
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Fatalf("exit %v, want status 130\n%s\n%s", err, o.String(), e.String())
		}
		if !strings.Contains(o.String(), "interrupted") {
			t.Errorf("the partial result does not say interrupted:\n%s", o.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("blast still running 60s after SIGTERM")
	}
}

// --projects-from takes the projects a fake upstream serves; the upstream
// then accepts every envelope (its keys are known).
func TestProjectsFromUpstream(t *testing.T) {
	ps, err := projects.Generate(99, 7)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := upstream.Start(upstream.Config{Projects: ps})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "r.json")
	stdout, stderr, code := runBlast(t, "--target", srv.URL, "--projects-from", srv.URL+"/projects", "--seed", "5",
		"--count", "150", "--rate", "1500", "--pool", "60", "--timeout", "30s", "--out", out)
	wantMeasured(t, code, stdout, stderr)
	r, err := blast.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); r.OK != 150 || st.Envelopes != 150 {
		t.Fatalf("blast ok %d (%v), upstream accepted %d (errors %v)", r.OK, r.ByStatus, st.Envelopes, st.Errors)
	}
	if _, stderr, code := runBlast(t, "--target", srv.URL, "--projects-from", srv.URL+"/nothing", "--count", "5"); code == 0 {
		t.Fatalf("bad --projects-from succeeded: %s", stderr)
	}
}

// A dump replayed with --envelopes sends the same items, by type, as the
// generated pool it was dumped from, to a real fake upstream that accepts
// them all; a capture-style corpus of foreign projects is accepted too.
func TestEnvelopes(t *testing.T) {
	ps, err := projects.Generate(1, 100) // blast's default --seed and --projects
	if err != nil {
		t.Fatal(err)
	}
	up, err := upstream.Start(upstream.Config{Projects: ps})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	dump := filepath.Join(t.TempDir(), "dump")
	if _, stderr, code := runBlast(t, "--dump", dump, "--pool", "80", "--encoding", "zstd"); code != 0 {
		t.Fatalf("dump: exit %d: %s", code, stderr)
	}
	send := func(extra ...string) upstream.Stats {
		t.Helper()
		up.ResetStats()
		args := append([]string{"--target", up.URL, "--pool", "80", "--count", "160", "--rate", "2000", "--timeout", "30s"}, extra...)
		stdout, stderr, code := runBlast(t, args...)
		wantMeasured(t, code, stdout, stderr)
		st := up.Stats()
		if st.Envelopes != 160 || len(st.Errors) > 0 {
			t.Fatalf("%v: upstream accepted %d of 160 (errors %v)\n%s", extra, st.Envelopes, st.Errors, stdout)
		}
		return st
	}
	gen := send()
	rep := send("--envelopes", dump)
	if fmt.Sprint(gen.ItemsByType) != fmt.Sprint(rep.ItemsByType) || fmt.Sprint(gen.RecordsByType) != fmt.Sprint(rep.RecordsByType) {
		t.Errorf("items by type: generated %v, replayed %v; records %v, %v", gen.ItemsByType, rep.ItemsByType, gen.RecordsByType, rep.RecordsByType)
	}
	if fmt.Sprint(gen.TopProjects) != fmt.Sprint(rep.TopProjects) {
		t.Errorf("projects: generated %v, replayed %v", gen.TopProjects, rep.TopProjects)
	}
	up.ResetStats()
	_, stderr, _ := runBlast(t, "--target", up.URL, "--pool", "9", "--count", "9", "--rate", "500", "--envelopes", corpus)
	if st := up.Stats(); st.Envelopes != 9 || !strings.Contains(stderr, "corpus: "+corpus+": 9 envelope files") {
		t.Errorf("fixture corpus: upstream accepted %d of 9 (errors %v); stderr %s", st.Envelopes, st.Errors, stderr)
	}
}

// The pool flags reach the pool: --mix, --projects, --zipf-s, --encoding,
// --seed, --user-agents, --unique-user-agents --pool N and
// --user-agents-file.
func TestPoolFlags(t *testing.T) {
	dump := func(args ...string) pool.Manifest {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "pool")
		if _, stderr, code := runBlast(t, append([]string{"--dump", dir}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m pool.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := dump("--unique-user-agents", "--pool", "300", "--mix", "errors=1", "--projects", "3", "--seed", "77",
		"--zipf-s", "2", "--encoding", "gzip")
	ps, err := projects.Generate(77, 3)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int64]bool{}
	for _, p := range ps {
		ids[p.ID] = true
	}
	agents := map[string]bool{}
	for _, e := range m.Entries {
		if e.Kind != pool.KindError || !ids[e.ProjectID] || e.Encoding != "gzip" {
			t.Fatalf("entry %+v: want an error of one of projects %v, gzip", e, ids)
		}
		agents[e.UserAgent] = true
	}
	if len(m.Entries) != 300 || len(agents) != 300 || m.Options.ZipfS != 2 || m.Options.Seed != 77 || !m.Options.UniqueUserAgents {
		t.Fatalf("%d entries, %d distinct agents, options %+v", len(m.Entries), len(agents), m.Options)
	}
	m = dump("--pool", "200", "--user-agents", "5", "--mix", "sessions=1")
	agents = map[string]bool{}
	for _, e := range m.Entries {
		agents[e.UserAgent] = true
	}
	if len(agents) > 5 || len(agents) < 2 || m.Options.UserAgents != 5 {
		t.Fatalf("--user-agents 5: %d distinct agents", len(agents))
	}
	m = dump("--pool", "200", "--user-agents-file", "testdata/agents.txt")
	agents = map[string]bool{}
	for _, e := range m.Entries {
		agents[e.UserAgent] = true
	}
	if len(agents) != 7 || m.Options.UserAgents != 7 || len(m.Options.Agents) != 7 || m.Options.AgentsFrom != "testdata/agents.txt" {
		t.Fatalf("--user-agents-file: %d distinct agents, options %d agents, %d listed, from %q", len(agents), m.Options.UserAgents,
			len(m.Options.Agents), m.Options.AgentsFrom)
	}
}

// --rate max --concurrency N runs closed loop.
func TestClosedLoop(t *testing.T) {
	srv, n := sink(t)
	stdout, stderr, code := runBlast(t, "--target", srv.URL, "--rate", "max", "--concurrency", "4", "--count", "120", "--pool", "30", "--timeout", "30s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n.Load() != 120 || !strings.Contains(stdout, "closed loop, concurrency 4") {
		t.Fatalf("server got %d, want 120\n%s", n.Load(), stdout)
	}
}

// wantMeasured fails the test unless a run ended as a measurement: exit 0,
// or exit 1 when the only INVALID reason is schedule lag (what a loaded
// 2-core test machine under -race can cause; the sink is never at fault).
func wantMeasured(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if code == 0 {
		return
	}
	var reasons []string
	for _, line := range strings.Split(stdout, "\n") {
		if why, ok := strings.CutPrefix(line, "INVALID"); ok {
			reasons = append(reasons, strings.TrimSpace(why))
		}
	}
	if code != 1 || len(reasons) == 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
	}
	for _, why := range reasons {
		if !strings.HasPrefix(why, "schedule lag p99") {
			t.Fatalf("exit %d, INVALID: %s\n%s", code, why, stderr)
		}
	}
	t.Logf("run INVALID only for schedule lag (a loaded machine): %q", reasons)
}

// blast merge refuses whatever would count slots twice or add up different
// schedules: the same file twice (by path, by a link, by a copy), two runs
// of one shard (also of the unsharded schedule, issue 9's "achieved
// 2000/s for a 1000/s run"), a merge and one of its parts, and results
// whose seed, rate, shard count, duration, count, warm-up or pool differ.
// Each gets one line on stderr naming the files, exit status 2, and no
// --out file.
func TestMergeRefuses(t *testing.T) {
	srv, _ := sink(t)
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		f := filepath.Join(dir, name+".json")
		// Later flags win: args override the base.
		base := []string{"--target", srv.URL, "--rate", "2000", "--count", "40", "--pool", "20", "--seed", "1", "--timeout", "30s", "--out", f}
		stdout, stderr, code := runBlast(t, append(base, args...)...)
		wantMeasured(t, code, stdout, stderr)
		return f
	}
	whole, whole2 := run("whole"), run("whole2")
	a, b, b2 := run("a", "--shard", "0/2"), run("b", "--shard", "1/2"), run("b2", "--shard", "1/2")
	seed2 := run("seed2", "--shard", "1/2", "--seed", "2")
	rate := run("rate", "--shard", "1/2", "--rate", "1000")
	count := run("count", "--shard", "1/2", "--count", "60")
	duration := run("duration", "--shard", "1/2", "--count", "0", "--duration", "30ms")
	warm := run("warm", "--shard", "1/2", "--warmup", "10ms")
	shards3 := run("shards3", "--shard", "1/3")
	mix := run("mix", "--shard", "1/2", "--mix", "errors=1")
	copyOfA := filepath.Join(dir, "copy-of-a.json")
	linkToA := filepath.Join(dir, "link-to-a.json")
	if buf, err := os.ReadFile(a); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(copyOfA, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a, linkToA); err != nil {
		t.Fatal(err)
	}
	// Hand-damaged copies of b (issue 33: they merged into "achieved
	// -4.6e18/s", valid, exit 0).
	damaged := func(name string, edit func(m map[string]any)) string {
		buf, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(buf))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		if buf, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, name+".json")
		if err := os.WriteFile(f, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	sentNegative := damaged("sent-negative", func(m map[string]any) { m["sent"] = json.Number("-9223372036854775409") })
	okAboveSent := damaged("ok-above-sent", func(m map[string]any) { m["ok"] = json.Number("1000") })
	sentMax := damaged("sent-max", func(m map[string]any) { m["sent"] = json.Number("9223372036854775807") })
	ab := filepath.Join(dir, "ab.json")
	stdout, stderr, code := runBlast(t, "merge", "--out", ab, a, b)
	wantMeasured(t, code, stdout, stderr)
	if r, err := blast.ReadFile(ab); err != nil || r.Sent != 40 || r.Parts != 2 {
		t.Fatalf("merge of the two shards: %v, %+v", err, r)
	}

	for _, tc := range []struct {
		name  string
		files []string
		want  []string // substrings of the one line on stderr
	}{
		{"the same path twice", []string{whole, whole}, []string{"given twice", "whole.json"}},
		{"a file and a link to it", []string{a, b, linkToA}, []string{"given twice", "a.json", "link-to-a.json"}},
		{"a file and its copy", []string{a, copyOfA}, []string{"same run", "a.json", "copy-of-a.json"}},
		{"two runs of the unsharded schedule", []string{whole, whole2}, []string{"shard 0/1", "whole.json", "whole2.json"}},
		{"a merge and one of its parts", []string{ab, b}, []string{"same run", "ab.json", "b.json"}},
		{"a merge and another run of one of its shards", []string{ab, b2}, []string{"shard 1/2", "ab.json", "b2.json"}},
		{"another seed", []string{a, seed2}, []string{"seed", "seed2.json"}},
		{"another rate", []string{a, rate}, []string{"rate", "rate.json"}},
		{"another count", []string{a, count}, []string{"count", "count.json"}},
		{"another duration", []string{a, duration}, []string{"duration", "duration.json"}},
		{"another warm-up", []string{a, warm}, []string{"warm-up", "warm.json"}},
		{"another shard count", []string{a, shards3}, []string{"shards", "shards3.json"}},
		{"another pool", []string{a, mix}, []string{"pool", "mix.json"}},
		{"a part with sent negative", []string{a, sentNegative}, []string{"sent-negative.json is damaged: sent -9223372036854775409: want 0..1000000000000000"}},
		{"a part with ok above sent", []string{a, okAboveSent}, []string{"ok-above-sent.json is damaged: ok 1000 != the 2xx of by_status 20"}},
		{"a part with sent 2^63-1", []string{sentMax, a}, []string{"sent-max.json is damaged: sent 9223372036854775807"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "merged.json")
			stdout, stderr, code := runBlast(t, append([]string{"merge", "--out", out}, tc.files...)...)
			line := strings.TrimSpace(stderr)
			if code != 2 || strings.Contains(line, "\n") || !strings.HasPrefix(line, "blast: ") {
				t.Fatalf("exit %d, stderr %q, want one line and status 2\n%s", code, stderr, stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("stderr %q lacks %q", line, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a refused merge wrote %s", out)
			}
		})
	}
}

// A run in which no request succeeded is INVALID and says so, and blast
// exits 1 (issue 9: a closed port gave exit status 0 and no INVALID line, so
// a script could not notice). The result is still printed and written.
func TestNoRequestSucceeded(t *testing.T) {
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer unavailable.Close()
	closed := fmt.Sprintf("http://127.0.0.1:%d", testutil.FreePort(t)) // listened on, then closed
	for _, tc := range []struct {
		name, target string
		check        func(r *blast.Result) bool
	}{
		{"every connection refused", closed, func(r *blast.Result) bool { return r.Errors[blast.ClassRefused] == r.Sent }},
		{"every answer 503", unavailable.URL, func(r *blast.Result) bool { return r.ByStatus[503] == r.Sent }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			stdout, stderr, code := runBlast(t, "--target", tc.target, "--rate", "10", "--duration", "1s", "--pool", "20", "--out", out)
			line := strings.TrimSpace(stderr)
			if i := strings.LastIndexByte(line, '\n'); i >= 0 {
				line = line[i+1:] // after the pool line
			}
			if code != 1 || !strings.HasPrefix(line, "blast: ") || !strings.Contains(line, "INVALID") || !strings.Contains(line, "succeeded") {
				t.Fatalf("exit %d, last stderr line %q; want status 1 and a line saying INVALID: no request succeeded\n%s", code, line, stdout)
			}
			if !strings.Contains(stdout, "INVALID") || !strings.Contains(stdout, "succeeded") {
				t.Errorf("summary does not say INVALID:\n%s", stdout)
			}
			r, err := blast.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if r.Sent < 5 || r.OK != 0 || !tc.check(r) || !r.Invalid {
				t.Fatalf("sent %d ok %d invalid %v, by status %v, errors %v", r.Sent, r.OK, r.Invalid, r.ByStatus, r.Errors)
			}
		})
	}
}

// --help states the exit statuses.
func TestHelpExitStatus(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"merge", "--help"}} {
		stdout, _, code := runBlast(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, want := range []string{"Exit status", "0 ", "1 ", "INVALID", "2 bad usage", "130 interrupted"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, stdout)
			}
		}
	}
}

// TestHelp: blast's and blast merge's --help list every flag in a group,
// in --flag form, within cli.Width columns, with three examples whose
// command lines parse.
func TestHelp(t *testing.T) {
	blastFlags := func() *flag.FlagSet {
		fs := flag.NewFlagSet("blast", flag.ContinueOnError)
		var o options
		o.define(fs)
		return fs
	}
	mergeFlags := func() *flag.FlagSet {
		fs := flag.NewFlagSet("blast merge", flag.ContinueOnError)
		fs.String("out", "", "")
		return fs
	}
	for _, tc := range []struct {
		args  []string
		help  cli.Help
		flags func() *flag.FlagSet
	}{{[]string{"--help"}, help, blastFlags}, {[]string{"merge", "--help"}, mergeHelp, mergeFlags}} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Fatalf("%v: exit %d, stderr %q", tc.args, code, stderr.String())
		}
		out := stdout.String()
		if err := tc.help.Check(tc.flags()); err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
		if err := tc.help.CheckOutput(out); err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
		for _, e := range tc.help.Examples {
			for _, line := range strings.Split(e.Command, "\n") {
				args := strings.Fields(line)[1:]
				fs := blastFlags()
				if args[0] == "merge" {
					args, fs = args[1:], mergeFlags()
				}
				fs.SetOutput(io.Discard)
				if err := fs.Parse(args); err != nil {
					t.Errorf("example %q does not parse: %v", line, err)
				}
			}
		}
	}
	var stdout bytes.Buffer
	run([]string{"--help"}, &stdout, &bytes.Buffer{})
	for _, g := range []string{"\nTarget:\n  --target URL", "\nTraffic:\n  --rate RATE", "\nPool:\n  --mix WEIGHTS", "\nOutput:\n  --out FILE"} {
		if !strings.Contains(stdout.String(), g) {
			t.Errorf("--help lacks %q", g)
		}
	}
}

// TestTypo: an unknown flag close to one names it, in one line, exit 2.
func TestTypo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rates", "100"}, "blast: unknown flag --rates: did you mean --rate? (see --help)\n"},
		{[]string{"--taget", "http://127.0.0.1:1"}, "blast: unknown flag --taget: did you mean --target? (see --help)\n"},
		{[]string{"--projects_from", "x"}, "blast: unknown flag --projects_from: did you mean --projects-from? (see --help)\n"},
		{[]string{"merge", "--output", "x"}, "blast: unknown flag --output: did you mean --out? (see --help)\n"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || stderr.String() != tc.want || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
