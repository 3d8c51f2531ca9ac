package orchestrate

import (
	"context"
	"os"
	"testing"
	"time"
)

// quick is a short config for tests.
func quick(rates ...float64) Config {
	return Config{
		Rates: rates, Duration: 1500 * time.Millisecond, Warmup: 500 * time.Millisecond, Idle: 300 * time.Millisecond,
		Projects: 10, PoolSize: 200, Seed: 7, WarmupTimeout: 10 * time.Second, DrainTimeout: 5 * time.Second,
	}
}

func TestHarnessSweep(t *testing.T) {
	cfg := quick(200, 400)
	cfg.WorkDir = t.TempDir()
	rep, err := Run(context.Background(), cfg)
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
		if st.Verdict != VerdictKeptUp {
			t.Errorf("step %d: %s %v", st.Index, st.Verdict, st.Reasons)
		}
		if st.CPU.LoadCores <= 0 || st.CPU.MsPerEnv <= 0 || st.Memory.PeakRSS == 0 {
			t.Errorf("step %d: cpu %+v mem %+v", st.Index, st.CPU, st.Memory)
		}
		if len(st.Series) < 10 {
			t.Errorf("step %d: %d series points", st.Index, len(st.Series))
		}
	}
	if rep.KeptUpWith["harness"] != 400 {
		t.Errorf("kept up with %v", rep.KeptUpWith)
	}
	// The work directory is gone.
	if ents, _ := os.ReadDir(cfg.WorkDir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}
