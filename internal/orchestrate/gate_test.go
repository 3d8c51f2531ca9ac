package orchestrate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"encoding/json"
)

func TestParseThresholds(t *testing.T) {
	ths, err := ParseThresholds("cpu_ms_per_envelope>+5%, p99>+20%,forwarded_rate<-5%")
	if err != nil || len(ths) != 3 || ths[0] != (Threshold{Metric: "cpu_ms_per_envelope", Op: '>', Pct: 5, Spec: "cpu_ms_per_envelope>+5%"}) ||
		ths[2].Op != '<' || ths[2].Pct != -5 {
		t.Fatalf("%+v %v", ths, err)
	}
	for _, tc := range []struct {
		spec  string
		op    byte
		value float64 // in the Point's unit
	}{
		{"p99>1s", '>', 1000},
		{"p50>250ms", '>', 250},
		{"max>1.5s", '>', 1500},
		{"p90<2ms", '<', 2},
		{"cpu_ms_per_envelope>5", '>', 5},
		{"cpu_ms_per_envelope>0.25ms", '>', 0.25},
		{"cores>1.5", '>', 1.5},
		{"peak_rss>800MiB", '>', 800 << 20},
		{"peak_rss>1GiB", '>', 1 << 30},
		{"peak_rss>1048576", '>', 1 << 20},
		{"forwarded_rate<400", '<', 400},
		{"accepted_rate<400/s", '<', 400},
		{"kept_up<500", '<', 500},
		{"kept_up<500/s", '<', 500},
		{"p99 > 1s", '>', 1000},
	} {
		ths, err := ParseThresholds(tc.spec)
		want := Threshold{Metric: strings.TrimSpace(tc.spec[:strings.IndexAny(tc.spec, "<>")]), Op: tc.op, Spec: tc.spec, Abs: true, Value: tc.value}
		if err != nil || len(ths) != 1 || ths[0] != want {
			t.Errorf("%q: %+v %v, want %+v", tc.spec, ths, err, want)
		}
	}
	// Limits and changes mix; each keeps its own form.
	ths, err = ParseThresholds("p99>+20%, kept_up<500,p99>1s")
	if err != nil || len(ths) != 3 || ths[0].Abs || ths[0].Pct != 20 || !ths[1].Abs || ths[1].Metric != "kept_up" || !ths[2].Abs || ths[2].Pct != 0 {
		t.Errorf("mixed: %+v %v", ths, err)
	}
	for _, tc := range []struct{ spec, want string }{
		{"", "want METRIC>+PCT% or METRIC<-PCT%"},
		{"p99", "p99>1s, kept_up<500"},
		{">+5%", "want METRIC>+PCT%"},
		{"speed>+5%", `unknown metric "speed" (want one of accepted_rate, cores,`},
		{"speed>1s", "kept_up, max,"},
		{"p99>-5%", "want a change in percent"},
		{"forwarded_rate<+5%", "want a change in percent"},
		{"p99>+x%", "want a change in percent"},
		{"p99>5", "p99 takes a change (p99>+5%) or a limit: a duration such as 250ms or 1s"},
		{"p99>-1s", "p99 takes a change (p99>+5%) or a limit: a duration"},
		{"p99>0s", "a duration such as 250ms"},
		{"forwarded_rate<0", "forwarded_rate takes a change (forwarded_rate<-5%) or a limit: envelopes per second"},
		{"cores>-1", "cores takes a change (cores>+5%) or a limit: cores such as 1.5"},
		{"cpu_ms_per_envelope>NaN", "milliseconds of CPU per envelope"},
		{"cpu_ms_per_envelope>Inf", "milliseconds of CPU per envelope"},
		{"peak_rss>lots", "peak_rss takes a change (peak_rss>+5%) or a limit: a size in bytes, or with KiB, MiB or GiB"},
		{"instructions_per_envelope>1000", "instructions_per_envelope takes a change only"},
		{"kept_up>500", "kept_up takes < only"},
		{"kept_up<-5%", "kept_up takes a rate, not a change"},
		{"kept_up<fast", "kept_up<RATE wants envelopes per second such as 500"},
		{"p99>1s,kept_up>5", "kept_up takes < only"},
	} {
		var ce *ConfigError
		_, err := ParseThresholds(tc.spec)
		if !errors.As(err, &ce) || ce.Field != "FailOn" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a FailOn config error with %q", tc.spec, err, tc.want)
		}
	}
}

func TestGate(t *testing.T) {
	point := func(build string, rate, ms, p99, fwd float64) *Point {
		return &Point{Build: build, Rate: rate, MsPerEnv: ms, Latency: Quantiles{P99: p99}, ForwardedRate: fwd, Verdict: VerdictKeptUp}
	}
	base := &Report{Setup: Setup{Builds: []Build{{Name: "old"}}}, Summary: []*Point{
		point("old", 200, 4.0, 10, 200), point("old", 500, 3.0, 20, 500)}}
	rep := &Report{Setup: Setup{Builds: []Build{{Name: "new"}}}, Summary: []*Point{
		point("new", 200, 4.1, 13, 200), point("new", 500, 3.3, 21, 450), point("new", 900, 3.0, 30, 700)}}
	ths, err := ParseThresholds("cpu_ms_per_envelope>+5%,p99>+20%,forwarded_rate<-5%")
	if err != nil {
		t.Fatal(err)
	}
	g := Gate(rep, base, "old/results.json", ths)
	var got []string
	for _, b := range g.Breaches {
		got = append(got, b.String())
	}
	want := []string{
		"new at 200/s: 10 → 13 (+30.0%), threshold p99>+20%",
		"new at 500/s: 3 → 3.3 (+10.0%), threshold cpu_ms_per_envelope>+5%",
		"new at 500/s: 500 → 450 (-10.0%), threshold forwarded_rate<-5%",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || g.Compared != 6 || len(g.Missing) != 1 || g.Missing[0] != 900 {
		t.Errorf("breaches\n%s\nwant\n%s\ncompared %d, missing %v", strings.Join(got, "\n"), strings.Join(want, "\n"), g.Compared, g.Missing)
	}
	// The same thresholds against itself: nothing crossed.
	if g := Gate(base, base, "", ths); len(g.Breaches) != 0 || g.Compared != 6 {
		t.Errorf("self: %+v", g)
	}
}

func TestReadReport(t *testing.T) {
	dir := t.TempDir()
	rep := &Report{Setup: Setup{Builds: []Build{{Name: "a"}}}, Summary: []*Point{{Build: "a", Rate: 100, MsPerEnv: 2}}}
	b, _ := json.Marshal(rep)
	good := filepath.Join(dir, "results.json")
	os.WriteFile(good, b, 0o644)
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o644)
	os.WriteFile(filepath.Join(dir, "empty.json"), []byte("{}"), 0o644)
	if got, err := ReadReport(good); err != nil || got.Summary[0].MsPerEnv != 2 {
		t.Errorf("good: %v %v", got, err)
	}
	for _, name := range []string{"bad.json", "empty.json", "missing.json"} {
		if _, err := ReadReport(filepath.Join(dir, name)); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestAbsoluteGate holds limits against hand-built sweeps: a limit crossed
// or passed at the rates judged, and no pass where there was nothing to
// hold (a failed step, no step judged, no figure), each said.
func TestAbsoluteGate(t *testing.T) {
	point := func(build string, rate float64, verdict string, p99, fwd float64) *Point {
		return &Point{Build: build, Rate: rate, Runs: 1, Verdict: verdict, Latency: Quantiles{P99: p99}, ForwardedRate: fwd, MsPerEnv: 2}
	}
	mixed := point("main", 1000, "mixed: 1 kept up, 1 failed", 80, 1000)
	mixed.Runs, mixed.Failed = 2, 1
	failed := point("main", 900, VerdictFailed, 0, 0)
	failed.Failed = 1
	sweep := &Report{
		Setup: Setup{Builds: []Build{{Name: "main"}}},
		Summary: []*Point{
			point("main", 200, VerdictKeptUp, 50, 200),
			point("main", 500, VerdictFellBehind, 1300, 300),
			point("main", 800, VerdictHarnessLimited, 60, 700),
			failed, mixed,
			point("main", 1200, VerdictFellBehind, 0, 0), // nothing was sent
		},
		KeptUpWith: map[string]float64{"main": 200},
	}
	unmeasured := []string{
		"p99 of main at 800/s: no step judged (harness-limited)",
		"p99 of main at 900/s: every step failed",
		"p99 of main at 1000/s: 1 of 2 steps failed",
		"p99 of main at 1200/s: nothing measured",
	}
	nothingKeptUp := &Report{
		Setup:      Setup{Builds: []Build{{Name: "slow"}}},
		Summary:    []*Point{point("slow", 200, VerdictFellBehind, 2000, 100), point("slow", 400, VerdictFellBehind, 3000, 100)},
		KeptUpWith: map[string]float64{},
	}
	capped := &Report{
		Setup:      Setup{Builds: []Build{{Name: "c"}}},
		Summary:    []*Point{point("c", 100, VerdictKeptUp, 20, 100), point("c", 200, VerdictFellBehind, 2000, 150)},
		KeptUpWith: map[string]float64{"c": 100},
	}
	notJudged := &Report{
		Setup:      Setup{Builds: []Build{{Name: "h"}}},
		Summary:    []*Point{point("h", 200, VerdictHarnessLimited, 10, 200), point("h", RateMax, VerdictKeptUp, 10, 900)},
		KeptUpWith: map[string]float64{},
	}
	for _, tc := range []struct {
		name       string
		rep        *Report
		spec       string
		breaches   []string
		unmeasured []string
		compared   int
	}{
		{"crossed", sweep, "p99>1s,cpu_ms_per_envelope>+5%", []string{"p99 of main at 500/s: 1.3s > 1s"}, unmeasured, 3},
		{"kept up below", capped, "kept_up<150", []string{"kept_up of c: 100/s < 150/s (the highest rate it kept up with)"}, nil, 1},
		{"not judged above", sweep, "kept_up<500", nil, []string{
			"kept_up of main: 800/s not judged (harness-limited), and no rate from 500/s kept up"}, 0},
		{"below a floor", sweep, "forwarded_rate<250", []string{
			"forwarded_rate of main at 200/s: 200/s < 250/s",
		}, []string{"forwarded_rate of main at 800/s: no step judged (harness-limited)", "forwarded_rate of main at 900/s: every step failed",
			"forwarded_rate of main at 1000/s: 1 of 2 steps failed", "forwarded_rate of main at 1200/s: nothing measured"}, 3},
		{"passed", sweep, "p99>1500ms,kept_up<200", nil, unmeasured, 4},
		{"nothing kept up", nothingKeptUp, "kept_up<100,p99>10s", []string{
			"kept_up of slow: 0/s < 100/s (it kept up with no rate tried)",
		}, nil, 3},
		{"no rate judged", notJudged, "kept_up<100", nil, []string{
			"kept_up of h: no rate judged (every step failed, was harness-limited or ran at max rate)"}, 0},
		{"no rate measured", &Report{}, "p99>1s,kept_up<100", nil, []string{"p99>1s: no rate measured", "kept_up<100: no build ran"}, 0},
	} {
		ths, err := ParseThresholds(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		g := AbsoluteGate(tc.rep, ths)
		var got []string
		for _, b := range g.Breaches {
			got = append(got, b.String())
		}
		if !slices.Equal(got, tc.breaches) || !slices.Equal(g.Unmeasured, tc.unmeasured) || g.Compared != tc.compared {
			t.Errorf("%s: breaches\n%s\nwant\n%s\nunmeasured\n%s\nwant\n%s\ncompared %d, want %d", tc.name,
				strings.Join(got, "\n"), strings.Join(tc.breaches, "\n"), strings.Join(g.Unmeasured, "\n"), strings.Join(tc.unmeasured, "\n"), g.Compared, tc.compared)
		}
		if len(g.AbsoluteBreaches()) != len(g.Breaches) {
			t.Errorf("%s: %d absolute breaches of %d", tc.name, len(g.AbsoluteBreaches()), len(g.Breaches))
		}
	}
}

// TestGateJoin: a baseline's changes and absolute limits in one result,
// in results.json, the limits told apart.
func TestGateJoin(t *testing.T) {
	rel := GateResult{Baseline: "old.json", Compared: 2, Breaches: []Breach{{Threshold: Threshold{Metric: "p99", Op: '>', Pct: 20, Spec: "p99>+20%"}}}}
	ths, _ := ParseThresholds("p99>1s")
	abs := GateResult{Compared: 3, Breaches: []Breach{{Threshold: ths[0], Build: "main", Rate: 500, Value: 1300}}, Unmeasured: []string{"x"}}
	g := rel.Join(abs)
	if g.Baseline != "old.json" || g.Compared != 5 || len(g.Breaches) != 2 || len(g.AbsoluteBreaches()) != 1 || len(g.Unmeasured) != 1 || len(rel.Breaches) != 1 {
		t.Fatalf("%+v", g)
	}
	b, _ := json.Marshal(g)
	var back GateResult
	if err := json.Unmarshal(b, &back); err != nil || !back.Breaches[1].Threshold.Abs || back.Breaches[1].Threshold.Value != 1000 || back.Unmeasured[0] != "x" {
		t.Errorf("%s: %+v %v", b, back, err)
	}
}

// TestNeverKeptUp: a build is listed only when every judged step fell
// behind; failed and harness-limited steps are not judged.
func TestNeverKeptUp(t *testing.T) {
	step := func(build, verdict string) *Step { return &Step{Build: build, Verdict: verdict} }
	rep := &Report{Steps: []*Step{
		step("bisected", VerdictKeptUp), step("bisected", VerdictFellBehind), step("bisected", VerdictFellBehind),
		step("slow", VerdictFellBehind), step("slow", VerdictHarnessLimited), step("slow", VerdictFailed),
		step("broken", VerdictFailed), step("limited", VerdictHarnessLimited),
		step("slower", VerdictFellBehind),
	}}
	if got := NeverKeptUp(rep); !slices.Equal(got, []string{"slow", "slower"}) {
		t.Errorf("%v, want slow and slower", got)
	}
	if got := NeverKeptUp(&Report{}); got != nil {
		t.Errorf("no steps: %v", got)
	}
	harness := &Report{Harness: true, Steps: []*Step{step("harness", VerdictFellBehind)}}
	if got := NeverKeptUp(harness); got != nil {
		t.Errorf("the harness: %v", got)
	}
}
