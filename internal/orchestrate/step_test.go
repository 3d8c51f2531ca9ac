package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/testutil"
	"github.com/relayload/relayload/projects"
)

// testRunner is a runner as Run prepares it, for driving a step's phases
// one at a time.
func testRunner(t *testing.T, cfg Config) *runner {
	t.Helper()
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: cfg, root: t.TempDir()}
	if r.projects, err = projects.Generate(cfg.Seed, cfg.Projects); err != nil {
		t.Fatal(err)
	}
	r.pool, err = pool.Build(t.Context(), pool.Options{Seed: cfg.Seed, Size: cfg.PoolSize, Mix: cfg.Mix, Projects: r.projects})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestStepPhases runs a harness step phase by phase and checks what each
// phase leaves behind.
func TestStepPhases(t *testing.T) {
	cfg := quick(200)
	cfg.Duration = 2 * time.Second
	r := testRunner(t, cfg)
	st := &Step{Index: 1, Build: "harness", Round: 1, Rate: 200}
	s := newStep(t.Context(), r, st, Build{Name: "harness"})
	defer s.close()
	ph := map[string]func() error{}
	var order []string
	for _, p := range s.phases() {
		ph[p.name] = p.run
		order = append(order, p.name)
	}
	want := []string{"work dir", "fake upstream", "relay start", "sampler", "warm-up", "idle", "measured window", "drain", "shutdown"}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("phases %v, want %v", order, want)
	}
	run := func(name string) {
		t.Helper()
		if err := ph[name](); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	run("work dir")
	if fi, err := os.Stat(s.dir); err != nil || !fi.IsDir() || filepath.Base(s.dir) != "001-harness-r1-200" {
		t.Errorf("work dir %q: %v", s.dir, err)
	}
	run("fake upstream")
	resp, err := http.Get(s.up.URL + "/stats")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("fake upstream at %s: %v", s.up.URL, err)
	}
	resp.Body.Close()
	run("relay start")
	if s.proc != nil || s.target != s.up.URL {
		t.Errorf("harness: proc %v, target %s (want the fake upstream %s)", s.proc, s.target, s.up.URL)
	}
	run("sampler")
	if s.sampler == nil || s.sampler.PID() != os.Getpid() {
		t.Fatalf("harness samples orchestrate itself: %v", s.sampler)
	}
	run("warm-up")
	if !st.Warm.Complete || st.Warm.Forwarded < int64(len(r.projects)) {
		t.Errorf("warm-up %+v", st.Warm)
	}
	began := time.Now()
	run("idle")
	if d := time.Since(began); d < cfg.Idle {
		t.Errorf("idle took %v, want ≥ %v", d, cfg.Idle)
	}
	stalls := testutil.StartStalls()
	run("measured window")
	if s.res == nil || st.Sent != 400 || st.OK != 400 || st.warmOK != int64(0.3*200) {
		t.Errorf("measured: sent %d ok %d warm %d", st.Sent, st.OK, st.warmOK)
	}
	// The upstream was reset at blast's start: the warm-up's envelopes
	// are not in what it counts now.
	if got := s.up.DataEnvelopes(); got > st.OK+st.warmOK {
		t.Errorf("upstream counts %d, more than blast's %d", got, st.OK+st.warmOK)
	}
	run("drain")
	lost := stalls.Stop()
	if !st.Drain.Settled || s.atDrainEnd.CPU <= s.atBlast.CPU {
		t.Errorf("drain %+v, cpu %v → %v", st.Drain, s.atBlast.CPU, s.atDrainEnd.CPU)
	}
	run("shutdown")
	if st.Memory.RusageMaxRSS != 0 || st.Shutdown.Took != 0 {
		t.Errorf("harness shutdown: %+v %+v", st.Memory, st.Shutdown)
	}
	s.collect()
	if st.Upstream.Forwarded != st.OK+st.warmOK || st.Upstream.Gap != 0 {
		t.Errorf("forwarded %d gap %d", st.Upstream.Forwarded, st.Upstream.Gap)
	}
	// The window's one whole second forwards about 200; a stall moves up
	// to 200 envelopes a second lost out of it.
	if len(st.Seconds) < 2 || st.Steady.Seconds != 1 || st.Steady.ForwardedRate < 150-200*lost.Seconds() {
		t.Errorf("seconds %d, steady %+v (%v lost to the machine)", len(st.Seconds), st.Steady, lost)
	}
	var sent, fwd int64
	for _, p := range st.Seconds {
		sent += p.Sent
		fwd += p.Forwarded
	}
	if sent != st.Sent+st.WarmupSent || fwd != st.Upstream.Forwarded {
		t.Errorf("series sums: sent %d (blast %d+%d), forwarded %d (upstream %d)", sent, st.Sent, st.WarmupSent, fwd, st.Upstream.Forwarded)
	}
	if st.CPU.CostEnvelopes != st.Upstream.Forwarded || st.CPU.MsPerEnv <= 0 || st.CPU.CostSpan < cfg.Duration {
		t.Errorf("cost %+v", st.CPU)
	}
	judge(st, r.cfg, true)
	if st.Verdict != VerdictKeptUp && st.Verdict != VerdictFellBehind {
		t.Errorf("verdict %s %v", st.Verdict, st.Reasons)
	}
	s.close()
	if _, err := http.Get(s.up.URL + "/stats"); err == nil {
		t.Error("the fake upstream still answers after close")
	}
}

// TestStepFail checks how a phase's error ends a step.
func TestStepFail(t *testing.T) {
	r := &runner{cfg: Config{ShutdownTimeout: time.Second}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, tc := range []struct {
		name        string
		err         error
		interrupted bool
		failed      bool
		msg         string
	}{
		{"relay exited", fmt.Errorf("%w: exited with status 101", errRelayExited), false, true, "relay exited: exited with status 101 during the warm-up"},
		{"other", errors.New("fake upstream listen: no ports"), false, true, "fake upstream listen: no ports"},
		{"interrupted", context.Canceled, true, false, ""},
	} {
		c := ctx
		if tc.interrupted {
			cancel()
		}
		st := &Step{}
		s := newStep(c, r, st, Build{Name: "x", Bin: "/x"})
		s.fail("warm-up", tc.err)
		if st.Failed != tc.failed || st.Error != tc.msg || tc.failed && st.Verdict != VerdictFailed {
			t.Errorf("%s: failed %v error %q verdict %q", tc.name, st.Failed, st.Error, st.Verdict)
		}
		s.close()
	}
}

// TestStepRelayPhases starts the stand-in as a step's Relay, checks the
// shutdown grace derived from its config, and that stop measures a clean
// shutdown.
func TestStepRelayPhases(t *testing.T) {
	t.Parallel() // waits on a stand-in's timers more than it uses CPU
	bin := standin(t)
	cfg := quick(100)
	cfg.Builds = []Build{{Name: "standin", Bin: bin}}
	cfg.ShutdownTimeout = 3 * time.Second
	r := testRunner(t, cfg)
	st := &Step{Index: 2, Build: "standin", Round: 1, Rate: 100}
	s := newStep(t.Context(), r, st, cfg.Builds[0])
	defer s.close()
	for _, p := range s.phases()[:4] { // work dir … sampler
		if err := p.run(); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
	}
	if s.proc == nil || s.sampler.PID() != s.proc.PID() || st.ReadyAfter <= 0 || s.target == s.up.URL {
		t.Fatalf("relay: proc %v, sampled pid %d, ready after %v, target %s", s.proc, s.sampler.PID(), st.ReadyAfter, s.target)
	}
	// Relay's own limits.shutdown_timeout (2 s) plus the margin, since
	// that is longer than --shutdown-timeout here.
	if want := 2*time.Second + shutdownMargin; s.grace != want {
		t.Errorf("grace %v, want %v", s.grace, want)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "config", "config.yml"))
	if err != nil || !strings.Contains(string(b), "shutdown_timeout: 2") || !strings.Contains(string(b), "flush_interval: 1") {
		t.Errorf("config.yml: %v\n%s", err, b)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if st.Shutdown.Killed || st.Shutdown.Exit != "exited with status 0" || st.Shutdown.Took <= 0 || st.Shutdown.Took > s.grace {
		t.Errorf("shutdown %+v", st.Shutdown)
	}
	if ok, _ := s.proc.Exited(); !ok {
		t.Error("relay still running after stop")
	}
}

// TestMaxRateStep runs closed-loop steps against the stand-in: one to the
// end of its window, one stopped by the RSS bound at once.
func TestMaxRateStep(t *testing.T) {
	t.Parallel() // waits on a stand-in's timers more than it uses CPU
	bin := standin(t)
	cfg := quick(RateMax)
	cfg.Concurrency = 4
	cfg.Idle = 0
	cfg.Builds = []Build{{Name: "standin", Bin: bin}}
	cfg.WorkDir = t.TempDir()
	stalls := testutil.StartStalls()
	rep, err := Run(t.Context(), cfg)
	lost := stalls.Stop()
	if err != nil {
		t.Fatal(err)
	}
	st := rep.Steps[0]
	// At least 50/s over the window, less what the machine took of it.
	least := 50 * max(0, 1-lost.Seconds()/cfg.Duration.Seconds())
	if st.Failed || st.Rate != RateMax || st.Concurrency != 4 || st.StoppedEarly != "" || st.AcceptedRate < least || st.Sent == 0 {
		t.Fatalf("max step (at least %.0f/s accepted, %v lost to the machine): %+v", least, lost, st)
	}
	if _, ok := rep.KeptUpWith["standin"]; ok && rep.KeptUpWith["standin"] != 0 {
		t.Errorf("a max step is not a rate kept up with: %v", rep.KeptUpWith)
	}
	if len(rep.Summary) != 1 || rep.Summary[0].Rate != RateMax || rep.Summary[0].AcceptedRate <= 0 {
		t.Errorf("summary %+v", rep.Summary)
	}

	cfg.MaxRelayRSS = 1 << 20 // any Relay is bigger: stopped at the first sample
	stalls = testutil.StartStalls()
	rep, err = Run(t.Context(), cfg)
	lost = stalls.Stop()
	if err != nil {
		t.Fatal(err)
	}
	st = rep.Steps[0]
	if !strings.Contains(st.StoppedEarly, "RSS passed 1.0 MiB") || st.Verdict != VerdictFellBehind || !strings.Contains(strings.Join(st.Reasons, "|"), "RSS passed") {
		t.Errorf("stopped early %q, verdict %s %v", st.StoppedEarly, st.Verdict, st.Reasons)
	}
	// Unstopped, blast sends in seconds 0 and 1 (0.3 s warm-up + 1.5 s);
	// stopped at the first 10 Hz sample, in second 0, unless the machine
	// held the process back.
	stopBy := 600*time.Millisecond + lost
	for _, p := range st.Seconds {
		if time.Duration(p.T)*time.Second >= stopBy && p.Sent > 0 {
			t.Errorf("blast still sent in second %d after the bound was passed (%v lost to the machine): %+v", p.T, lost, p)
		}
	}
}

// TestStartUpstreamConfig: --quota and --inbound-filters reach the step's
// fake upstream, so every project config Relay fetches carries them.
func TestStartUpstreamConfig(t *testing.T) {
	q := json.RawMessage(`{"id":"q0","categories":["transaction"],"limit":0,"scope":"project","reasonCode":"relayload_quota"}`)
	cfg := quick(100)
	cfg.Quotas, cfg.InboundFilters = []json.RawMessage{q}, true
	r := testRunner(t, cfg)
	s := newStep(t.Context(), r, &Step{Index: 1}, Build{Name: "harness"})
	defer s.close()
	if err := s.startUpstream(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.up.ProjectState(len(r.projects)); ok {
		t.Error("a project past the last one")
	}
	for i := range r.projects {
		ps, _ := s.up.ProjectState(i)
		pc := ps.Config
		if len(pc.Quotas) != 1 || string(pc.Quotas[0]) != string(q) || pc.FilterSettings["webCrawlers"] == nil {
			t.Fatalf("project %d: quotas %s, filters %v", i, pc.Quotas, pc.FilterSettings)
		}
	}
}
