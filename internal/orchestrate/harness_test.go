package orchestrate

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/replay"
	"github.com/relayload/relayload/internal/testutil"
	"github.com/relayload/relayload/internal/useragent"
)

// quick is a short config for tests. The machine running tests is shared
// and noisy, so the latency bound for "kept up" is loose, and blast's
// requests time out only after as long: these tests check the mechanism,
// not performance, and count requests exactly.
func quick(rates ...float64) Config {
	return Config{
		MaxP99: 30 * time.Second, Timeout: 30 * time.Second,
		Rates: rates, Duration: 1500 * time.Millisecond, Warmup: 300 * time.Millisecond, Idle: 200 * time.Millisecond,
		Projects: 10, PoolSize: 200, Seed: 7, WarmupTimeout: 10 * time.Second, DrainTimeout: 30 * time.Second,
		settle: 500 * time.Millisecond,
	}
}

func TestHarnessSweep(t *testing.T) {
	cfg := quick(200, 400)
	cfg.WorkDir = t.TempDir()
	stalls := testutil.StartStalls()
	rep, err := Run(context.Background(), cfg)
	lost := stalls.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Harness || len(rep.Steps) != 2 || rep.Failed != 0 {
		t.Fatalf("harness=%v steps=%d failed=%d", rep.Harness, len(rep.Steps), rep.Failed)
	}
	for _, st := range rep.Steps {
		if !st.Warm.Complete {
			t.Errorf("step %d warm-up incomplete: %+v", st.Index, st.Warm)
		}
		want := int64(st.Rate * 1.5)
		if st.Sent != want || st.OK != want {
			t.Errorf("step %d: sent %d ok %d, want %d", st.Index, st.Sent, st.OK, want)
		}
		// Every envelope blast got a 2xx for (warm-up included) reached the sink.
		if st.Upstream.Envelopes != st.OK+st.warmOK || st.Upstream.Gap != 0 {
			t.Errorf("step %d: upstream %d, ok %d + warm %d, gap %d", st.Index, st.Upstream.Envelopes, st.OK, st.warmOK, st.Upstream.Gap)
		}
		// On a loaded test machine the harness may miss its schedule or
		// stall; then the only acceptable reasons are the harness's own.
		if st.Verdict != VerdictKeptUp {
			for _, r := range st.Reasons {
				if !strings.HasPrefix(r, "blast") && !strings.HasPrefix(r, "orchestrate itself") && !strings.HasPrefix(r, "also: ") {
					t.Errorf("step %d: %s %v", st.Index, st.Verdict, st.Reasons)
				}
			}
		}
		if st.CPU.LoadCores <= 0 || st.CPU.MsPerEnv <= 0 || st.Memory.PeakRSS == 0 {
			t.Errorf("step %d: cpu %+v mem %+v", st.Index, st.CPU, st.Memory)
		}
		if st.OutsideWindow <= 0 || st.OutsideWindow >= 100 || st.Took < st.Elapsed {
			t.Errorf("step %d: %.0f%% of %v outside a %v window", st.Index, st.OutsideWindow, st.Took, st.Elapsed)
		}
		// 10 Hz over more than two seconds; the sampler misses a tick
		// only while the process cannot run.
		if want := 10 - int(lost/(100*time.Millisecond)); len(st.Series) < max(want, 2) {
			t.Errorf("step %d: %d series points (%v lost to the machine)", st.Index, len(st.Series), lost)
		}
	}
	if rep.Steps[1].Verdict == VerdictKeptUp && rep.KeptUpWith["harness"] != 400 {
		t.Errorf("kept up with %v", rep.KeptUpWith)
	}
	// The work directory is gone.
	if ents, _ := os.ReadDir(cfg.WorkDir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// A list of agents reaches the pool and the report's Setup, and with
// unique agents the log says how far it goes.
func TestHarnessAgentsList(t *testing.T) {
	cfg := quick(200)
	cfg.WorkDir = t.TempDir()
	cfg.Agents = []useragent.Weighted{{UA: "curl/8.5.0"}, {UA: "Wget/1.21.4"}, {UA: "ShopApp/5821 CFNetwork/1568.100.1 Darwin/24.0.0"}}
	cfg.AgentsFrom, cfg.UniqueUserAgents = "agents.txt", true
	var log strings.Builder
	cfg.Log = &log
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Setup
	if s.UserAgents != 3 || s.UserAgentsFrom != "agents.txt" || !s.UniqueUserAgents || len(rep.Steps) != 1 || rep.Steps[0].OK == 0 {
		t.Fatalf("setup %d agents from %q unique %v; %d steps", s.UserAgents, s.UserAgentsFrom, s.UniqueUserAgents, len(rep.Steps))
	}
	if want := "3 user agents in agents.txt for a pool of 200 envelopes: each agent serves about 67 envelopes, in turn\n"; !strings.Contains(log.String(), want) {
		t.Errorf("log %q, want %q", log.String(), want)
	}
}

// A sweep with a corpus replays it: the setup names it, every accepted
// envelope that carries data reaches the upstream (its client reports
// alone do not count as forwarded, nor against the gap), and the items
// are the corpus's.
func TestHarnessSweepCorpus(t *testing.T) {
	c, err := replay.Load("../replay/testdata/corpus", 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := quick(300)
	cfg.WorkDir, cfg.Corpus, cfg.PoolSize = t.TempDir(), c, 90
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Setup.Corpus == nil || rep.Setup.Corpus.Files != 9 || rep.Setup.Mix != "" || len(rep.Steps) != 1 {
		t.Fatalf("setup %+v, %d steps", rep.Setup, len(rep.Steps))
	}
	st := rep.Steps[0]
	if st.Upstream.Gap != 0 || st.Upstream.ItemsByType["feedback"] == 0 || st.Upstream.ItemsByType["client_report"] == 0 {
		t.Errorf("gap %d, items %v", st.Upstream.Gap, st.Upstream.ItemsByType)
	}
	// Its client reports are never forwarded as envelopes: not a pace
	// Relay fails to keep (a loaded machine may still fail blast's).
	for _, r := range st.Reasons {
		if strings.Contains(r, "never reached") || strings.Contains(r, "forwarded") || strings.Contains(r, "backlog") {
			t.Errorf("verdict %s: %v", st.Verdict, st.Reasons)
		}
	}
	if want := st.OK + st.warmOK; st.Upstream.Envelopes != want {
		t.Errorf("upstream got %d envelopes, blast had %d accepted", st.Upstream.Envelopes, want)
	}
	for _, bad := range []Config{{Mix: pool.Mix{pool.KindError: 1}}, {UserAgents: 5}, {UniqueUserAgents: true}} {
		bad.Corpus, bad.Rates = c, []float64{100}
		if _, err := bad.withDefaults(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v with a corpus: %v", bad, err)
		}
	}
}
