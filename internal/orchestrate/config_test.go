package orchestrate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/internal/useragent"
	"github.com/relayload/relayload/upstream"
)

func TestParseFault(t *testing.T) {
	// The grammar is upstream.ParseFaultSpec's (tested there); here the
	// errors name the Config field.
	var ce *ConfigError
	if _, err := ParseFault("flood=1s"); !errors.As(err, &ce) || ce.Field != "Fault" || !strings.Contains(err.Error(), "unknown kind") {
		t.Errorf("bad spec: %v", err)
	}
	// The default start is a quarter of the window, at most 5 s; a fault
	// must end inside the window.
	f, _ := ParseFault("outage=2s")
	if err := validateFault(f, 8*time.Second); err != nil || f.Start != 2*time.Second {
		t.Errorf("default start %v err %v", f.Start, err)
	}
	f, _ = ParseFault("outage=20s")
	if err := validateFault(f, 10*time.Second); err == nil {
		t.Error("fault longer than the window accepted")
	}
}

func TestConfigValidation(t *testing.T) {
	ok := Config{Rates: []float64{100}}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no rates", func(c *Config) { c.Rates = nil }, "no rates"},
		{"negative rate", func(c *Config) { c.Rates = []float64{-5} }, "Rates: -5: want a rate from 0.001 to 10000000 requests/s, or max"},
		{"a rate above the cap", func(c *Config) { c.Rates = []float64{100, 1e300} }, "Rates: 1e+300: want a rate from 0.001 to 10000000 requests/s"},
		{"less than one request per step", func(c *Config) { c.Rates, c.Duration = []float64{10}, 50*time.Millisecond },
			"Duration: 50ms at rate 10/s holds less than one request: want at least 100ms, or higher Rates"},
		{"find-max with max", func(c *Config) { c.FindMax, c.Rates = true, []float64{100, RateMax} }, "max is not one"},
		{"bad concurrency", func(c *Config) { c.Concurrency = -1 }, "Concurrency: -1: want 1..10000"},
		{"find-max one bound", func(c *Config) { c.FindMax = true }, "FindMax: wants two Rates, the bounds (e.g. 100,5000)"},
		{"dup build", func(c *Config) { c.Builds = []Build{{Name: "a", Bin: "/x"}, {Name: "a", Bin: "/y"}} }, "used twice"},
		{"bad build name", func(c *Config) { c.Builds = []Build{{Name: "a b", Bin: "/x"}} }, "build name"},
		{"harness in compare", func(c *Config) { c.Builds = []Build{{Name: "a", Bin: "/x"}, {Name: "b"}} }, "no binary"},
		{"statsd both", func(c *Config) {
			c.Builds = []Build{{Bin: "/x"}}
			c.StatsD, c.StatsDListen = "a:1", "b:2"
		}, "StatsDListen: cannot be used with StatsD"},
		{"metric without receiver", func(c *Config) { c.Builds = []Build{{Bin: "/x"}}; c.StatsDMetrics = []string{"x"} }, "StatsDMetrics: needs StatsDListen"},
		{"harness perf without perf", func(c *Config) { c.Builds = []Build{{Bin: "/x"}}; c.PerfHarness = true }, "PerfHarness: needs Perf"},
		{"perf without relay", func(c *Config) { c.Perf = "x.data" }, "Perf: needs a Relay to measure (Builds)"},
		{"bad cpus", func(c *Config) { c.Builds = []Build{{Bin: "/x"}}; c.RelayCPUs = "1-0" }, "cpu list"},
		{"bad call graph", func(c *Config) { c.Builds = []Build{{Bin: "/x"}}; c.Perf, c.CallGraph = "p", "magic" }, "CallGraph: \"magic\": want dwarf, lbr or fp"},
		{"Duration: -1s: must not be negative", func(c *Config) { c.Duration = -time.Second }, "Duration: -1s: must not be negative"},
		{"agent twice", func(c *Config) { c.Agents = []useragent.Weighted{{UA: "a/1"}, {UA: "a/1"}} }, `Agents: agent 1: "a/1" given twice`},
	}
	for _, tc := range tests {
		c := ok
		c.Builds = nil
		tc.mod(&c)
		_, err := c.withDefaults()
		var ce *ConfigError
		if err == nil || !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want a ConfigError %q", tc.name, err, tc.want)
		}
		// Library errors name Config fields, never a command line's flags.
		if err != nil && strings.Contains(err.Error(), "--") {
			t.Errorf("%s: %q names a flag", tc.name, err)
		}
	}
	c, err := ok.withDefaults()
	if err != nil || !c.Harness() || c.Duration != DefaultDuration || c.Rounds != 1 || c.Builds[0].Name != "harness" ||
		c.Concurrency != DefaultConcurrency || c.MaxRelayRSS != DefaultMaxRelayRSS || c.MaxCatchUp != DefaultMaxCatchUp {
		t.Errorf("defaults: %+v %v", c, err)
	}
	if _, err := (Config{Rates: []float64{RateMax, 200}}).withDefaults(); err != nil {
		t.Errorf("max among the rates: %v", err)
	}
}

func TestCountCPUs(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "1": 1, "0-3": 4, "0,2-3": 3, "1,3,5": 3} {
		if n, err := CountCPUs(in); err != nil || n != want {
			t.Errorf("%q: %d %v, want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"", "a", "3-1", "1,,2", "-1", "01"} {
		if _, err := CountCPUs(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestJudge(t *testing.T) {
	cfg := Config{MaxP99: time.Second, MaxCatchUp: 3 * time.Second}
	base := func() *Step {
		return &Step{Rate: 1000, Sent: 30000, OK: 30000, AchievedRate: 1000, AcceptedRate: 1000,
			Latency: Quantiles{P99: 20}, LagP99: 1, Drain: Drain{Settled: true}, Upstream: UpstreamSeen{Envelopes: 30000, Forwarded: 30000},
			Steady: Steady{ForwardedRate: 1000, AcceptedRate: 1000, Allowance: 1000, GrowthSpan: 14, Seconds: 30, CatchUp: 200 * time.Millisecond}}
	}
	behind := func(s *Step) {
		s.Steady = Steady{ForwardedRate: 770, AcceptedRate: 1400, BacklogEnd: 18900, BacklogGrowth: 630, GrowthSpan: 14, Allowance: 1400,
			RSSSlope: 24, Seconds: 30, CatchUp: 16 * time.Second}
		s.Drain.LastForward = 16 * time.Second
	}
	tests := []struct {
		name    string
		mod     func(*Step)
		harness bool
		verdict string
		reason  string
	}{
		{"backlog grows", behind, false, VerdictFellBehind,
			"forwarded 770/s of 1,400/s accepted; backlog +630/s (±0) over the second half of the window, 18,900 at its end; RSS +24.0 MiB/s; drained 16.0 s after blast (more than 3s)"},
		{"slow catch-up", func(s *Step) { s.Steady.CatchUp = 5 * time.Second }, false, VerdictFellBehind, "forwarded 1,000/s of 1,000/s accepted; drained 5.0 s after blast (more than 3s)"},
		{"backlog within one interval, noisy", func(s *Step) { s.Steady.BacklogGrowth, s.Steady.GrowthError = 70, 25 }, false, VerdictKeptUp, ""},
		{"backlog within one interval, below 3%", func(s *Step) { s.Steady.BacklogGrowth, s.Steady.GrowthError = 25, 1 }, false, VerdictKeptUp, ""},
		{"backlog growing steadily", func(s *Step) { s.Steady.BacklogGrowth, s.Steady.GrowthError = 70, 5 }, false, VerdictFellBehind, "backlog +70/s (±5)"},
		{"unsettled with a backlog", func(s *Step) { behind(s); s.Drain = Drain{Took: 20 * time.Second}; s.Upstream.Gap = 12000 },
			false, VerdictFellBehind, "still forwarding 20s after blast ended, 12,000 accepted envelopes not forwarded yet"},
		{"stopped early", func(s *Step) { s.StoppedEarly = "Relay's RSS passed 4.0 GiB" }, false, VerdictFellBehind, "RSS passed 4.0 GiB"},
		{"drops: in-flight cap", func(s *Step) { s.Dropped = 500 }, false, VerdictFellBehind, "500 of 30500 requests could not start: blast's cap on requests in flight was reached, waiting for Relay"},
		{"clean", func(*Step) {}, false, VerdictKeptUp, ""},
		{"503s", func(s *Step) { s.OK, s.Failures, s.ByStatus = 29000, 1000, map[string]int64{"200": 29000, "503": 1000} }, false, VerdictFellBehind, "503×1000"},
		{"drops", func(s *Step) { s.Dropped = 500 }, false, VerdictFellBehind, "could not start"},
		{"slow", func(s *Step) { s.Latency.P99 = 2500 }, false, VerdictFellBehind, "p99 2500 ms"},
		{"not forwarded", func(s *Step) { s.Upstream.Gap = 3000 }, false, VerdictFellBehind, "never reached"},
		{"small gap ok", func(s *Step) { s.Upstream.Gap = 30 }, false, VerdictKeptUp, ""},
		{"unsettled", func(s *Step) { s.Drain = Drain{Took: 20 * time.Second} }, false, VerdictFellBehind, "still forwarding"},
		{"lag", func(s *Step) { s.LagP99 = 9 }, false, VerdictHarnessLimited, "schedule lag"},
		{"short of rate", func(s *Step) { s.AchievedRate = 900 }, false, VerdictHarnessLimited, "sent 900/s"},
		{"harness lag: the harness fell behind", func(s *Step) { s.LagP99 = 9 }, true, VerdictFellBehind, "the load generator fell behind its schedule"},
		{"harness far off schedule", func(s *Step) { s.LagP99 = 300 }, true, VerdictFellBehind, "schedule lag"},
		{"failed", func(s *Step) { s.Failed = true }, false, VerdictFailed, ""},
		{"stalled harness", func(s *Step) { s.Stall = 15 * time.Second; s.Latency.P99 = 15000 }, false, VerdictHarnessLimited, "no CPU for 15.0 s"},
		{"short pause is fine", func(s *Step) { s.Stall = 300 * time.Millisecond }, false, VerdictKeptUp, ""},
	}
	for _, tc := range tests {
		st := base()
		tc.mod(st)
		judge(st, cfg, tc.harness)
		if st.Verdict != tc.verdict || tc.reason != "" && !strings.Contains(strings.Join(st.Reasons, "|"), tc.reason) {
			t.Errorf("%s: %s %v, want %s %q", tc.name, st.Verdict, st.Reasons, tc.verdict, tc.reason)
		}
	}
}

// TestJudgeNotes: canary leaks and a load average above the CPU count are
// said in the step's notes (they do not change the verdict).
func TestJudgeNotes(t *testing.T) {
	cfg := Config{MaxP99: time.Second, MaxCatchUp: 3 * time.Second}
	st := &Step{Rate: 100, Sent: 100, OK: 100, AchievedRate: 100, Drain: Drain{Settled: true},
		Upstream: UpstreamSeen{Canaries: upstream.Canaries{Leaks: map[string]int64{"password": 2, "iban": 1}}}}
	judge(st, cfg, false)
	notes := strings.Join(st.Notes, "|")
	if st.Verdict != VerdictKeptUp || !strings.Contains(notes, "3 PII canaries that Relay's default scrubbing must remove reached the upstream (iban×1, password×2)") {
		t.Errorf("%s %v", st.Verdict, st.Notes)
	}
	if n := loadNote([2]float64{0.5, 3.5}, 2); n != "the 1-minute load average was 0.5→3.5 on 2 CPUs: more runnable threads than CPUs, so this step's figures are not comparable with a quiet machine's" {
		t.Errorf("load note %q", n)
	}
	if n := loadNote([2]float64{1.9, 2}, 2); n != "" {
		t.Errorf("load within the CPUs: %q", n)
	}
	st = &Step{Rate: 100, Sent: 100, OK: 100, AchievedRate: 100, Drain: Drain{Settled: true},
		Upstream: UpstreamSeen{Canaries: upstream.Canaries{Leaks: map[string]int64{"password": 2}}}}
	judge(st, cfg, true) // the harness scrubs nothing: no note
	if len(st.Notes) != 0 {
		t.Errorf("harness: %v", st.Notes)
	}
	// Above 5% of Relay's CPU the harness says so, and how its CPU split
	// where it was recorded.
	for _, tt := range []struct {
		cpu  CPU
		want string
	}{
		{CPU{LoadCores: 1.8, HarnessCores: 0.09, HarnessShare: 5}, ""},
		{CPU{LoadCores: 1.8, HarnessCores: 0.15, HarnessShare: 8.3},
			"harness CPU (blast, the fake upstream) 0.15 cores over the window, 8% of Relay's 1.80: on one machine that is CPU Relay could not use"},
		{CPU{LoadCores: 1.8, HarnessCores: 0.15, HarnessShare: 8.3, HarnessSplit: &HarnessSplit{BlastCores: 0.042, UpstreamCores: 0.074, SchedulerCores: 0.031, OtherCores: 0.003}},
			"harness CPU (blast, the fake upstream) 0.15 cores (blast 0.042, the fake upstream 0.074, the Go scheduler 0.031, the rest 0.003) over the window, 8% of Relay's 1.80"},
	} {
		st = &Step{Rate: 100, Sent: 100, OK: 100, AchievedRate: 100, Drain: Drain{Settled: true}, CPU: tt.cpu}
		judge(st, cfg, false)
		notes := strings.Join(st.Notes, "|")
		if tt.want == "" && strings.Contains(notes, "harness CPU") || !strings.Contains(notes, tt.want) {
			t.Errorf("%+v: notes %q, want %q", tt.cpu, notes, tt.want)
		}
	}
}

// TestJudgeQuota429 checks that 429s the configured quotas ask for are not
// counted against Relay (seen with Relay 26.4.0 and --quota transaction:0:
// every transaction envelope answered 429, rate_limited outcomes sent).
func TestJudgeQuota429(t *testing.T) {
	st := &Step{Rate: 200, Sent: 1600, OK: 1271, Failures: 329, AchievedRate: 200, ByStatus: map[string]int64{"200": 1271, "429": 329},
		Drain: Drain{Settled: true}, Steady: Steady{Seconds: 8, Allowance: 159}}
	quota := Config{MaxP99: time.Second, MaxCatchUp: 3 * time.Second, Quotas: []json.RawMessage{[]byte(`{}`)}}
	judge(st, quota, false)
	if st.Verdict != VerdictKeptUp || !strings.Contains(strings.Join(st.Notes, "|"), "329 of 1600 requests answered 429: rate limited by the configured quotas") {
		t.Errorf("with quotas: %s %v %v", st.Verdict, st.Reasons, st.Notes)
	}
	st.Notes = nil
	judge(st, Config{MaxP99: time.Second, MaxCatchUp: 3 * time.Second}, false)
	if st.Verdict != VerdictFellBehind || !strings.Contains(strings.Join(st.Reasons, "|"), "329 of 1600 requests not accepted (429×329)") {
		t.Errorf("without quotas: %s %v", st.Verdict, st.Reasons)
	}
}

func TestFindMaxBisects(t *testing.T) {
	for _, limit := range []float64{50, 730, 4000, 9000} {
		r := &runner{cfg: Config{Rates: []float64{100, 5000}, FindMaxProbes: 8}}
		var probes []float64
		fm := r.findMax(t.Context(), Build{Name: "x"}, func(_ Build, _ int, rate float64, _ bool) *Step {
			probes = append(probes, rate)
			v := VerdictFellBehind
			if rate <= limit {
				v = VerdictKeptUp
			}
			return &Step{Rate: rate, Verdict: v}
		})
		switch {
		case limit < 100:
			if fm.KeptUp != 0 || fm.FellBehind != 100 || len(probes) != 1 {
				t.Errorf("limit %v: %+v", limit, fm)
			}
		case limit >= 5000:
			if fm.KeptUp != 5000 || len(probes) != 2 {
				t.Errorf("limit %v: %+v", limit, fm)
			}
		default:
			if fm.KeptUp > limit || fm.FellBehind <= limit || len(probes) > 8 {
				t.Errorf("limit %v: %+v", limit, fm)
			}
			if fm.FellBehind/fm.KeptUp > 1.25 {
				t.Errorf("limit %v: bracket %v..%v too wide after %d probes", limit, fm.KeptUp, fm.FellBehind, len(probes))
			}
		}
	}
}

func TestFindMaxStopsWhenHarnessLimited(t *testing.T) {
	r := &runner{cfg: Config{Rates: []float64{100, 5000}, FindMaxProbes: 8}}
	fm := r.findMax(t.Context(), Build{Name: "x"}, func(_ Build, _ int, rate float64, _ bool) *Step {
		if rate > 1000 {
			return &Step{Rate: rate, Verdict: VerdictHarnessLimited, Reasons: []string{"blast's schedule lag p99 9 ms > 5 ms"}}
		}
		return &Step{Rate: rate, Verdict: VerdictKeptUp}
	})
	if fm.KeptUp != 100 || fm.FellBehind != 0 || len(fm.Probes) != 2 || !strings.Contains(fm.Stopped, "harness-limited") {
		t.Errorf("%+v", fm)
	}
}

func TestMedianSpread(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median %v", m)
	}
	if m := Median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median %v", m)
	}
	if s := Spread([]float64{0.9, 1, 1.1}); s < 19.99 || s > 20.01 {
		t.Errorf("spread %v", s)
	}
	if Median(nil) != 0 || Spread([]float64{5}) != 0 {
		t.Error("degenerate")
	}
	if r := roundRate(1234.5); r != 1200 {
		t.Errorf("roundRate %v", r)
	}
}

func TestSeriesPeak(t *testing.T) {
	var smp []relayproc.Sample
	for i := range 30 {
		cpu := float64(i) * 0.05 // 0.5 cores
		if i >= 20 {
			cpu = 0.95 + float64(i-19)*0.1 // 1 core from 2 s on
		}
		smp = append(smp, relayproc.Sample{At: time.Duration(i) * 100 * time.Millisecond, CPU: cpu, RSS: 1 << 20})
	}
	pts, peak := series(smp, time.Second)
	if len(pts) != 30 || pts[0].T != -1 || pts[0].RSSMB != 1 {
		t.Errorf("points %+v", pts[:2])
	}
	if peak < 0.99 || peak > 1.01 {
		t.Errorf("peak %v, want 1 core", peak)
	}
}

func TestPointVerdict(t *testing.T) {
	s := func(vs ...string) []*Step {
		var out []*Step
		for _, v := range vs {
			out = append(out, &Step{Verdict: v})
		}
		return out
	}
	for want, steps := range map[string][]*Step{
		VerdictKeptUp:                                        s(VerdictKeptUp, VerdictKeptUp),
		VerdictHarnessLimited:                                s(VerdictHarnessLimited),
		"mixed: 1 fell behind, 2 harness-limited":            s(VerdictHarnessLimited, VerdictFellBehind, VerdictHarnessLimited),
		"mixed: 2 kept up, 1 failed":                         s(VerdictKeptUp, VerdictFailed, VerdictKeptUp),
		"mixed: 1 kept up, 1 fell behind, 1 harness-limited": s(VerdictKeptUp, VerdictFellBehind, VerdictHarnessLimited),
	} {
		if got := pointVerdict(steps); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestSummarizeIgnoresUnjudgedRounds(t *testing.T) {
	cfg := Config{Builds: []Build{{Name: "a", Bin: "/x"}, {Name: "b", Bin: "/y"}}}
	st := func(b string, rate float64, v string, msPerEnv float64) *Step {
		return &Step{Build: b, Rate: rate, Verdict: v, CPU: CPU{MsPerEnv: msPerEnv, NetCores: msPerEnv * rate / 1000}}
	}
	rep := &Report{KeptUpWith: map[string]float64{}, Steps: []*Step{
		st("a", 100, VerdictKeptUp, 1.0), st("b", 100, VerdictKeptUp, 0.8),
		st("a", 200, VerdictHarnessLimited, 1.1), st("b", 200, VerdictKeptUp, 0.9),
		st("a", 100, VerdictKeptUp, 1.2), st("b", 100, VerdictKeptUp, 0.8),
		st("a", 200, VerdictKeptUp, 0.9), st("b", 200, VerdictFellBehind, 0.9),
	}}
	summarize(rep, cfg)
	if rep.KeptUpWith["a"] != 200 || rep.KeptUpWith["b"] != 100 {
		t.Errorf("kept up with %v, want a 200 (a harness-limited round is not judged), b 100", rep.KeptUpWith)
	}
	if len(rep.Summary) != 4 || rep.Summary[0].MsPerEnv != 1.1 || rep.Summary[0].MsPerEnvSpread < 18 || rep.Summary[0].MsPerEnvSpread > 18.2 {
		t.Errorf("summary[0] %+v", rep.Summary[0])
	}
	if len(rep.Comparisons) != 2 || rep.Comparisons[0].Rate != 100 || rep.Comparisons[0].MsPerEnvChange > -27 || rep.Comparisons[0].MsPerEnvChange < -28 {
		t.Errorf("comparisons %+v", rep.Comparisons)
	}
}
