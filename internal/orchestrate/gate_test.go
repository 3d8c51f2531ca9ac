package orchestrate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"encoding/json"
)

func TestParseThresholds(t *testing.T) {
	ths, err := ParseThresholds("cpu_ms_per_envelope>+5%, p99>+20%,forwarded_rate<-5%")
	if err != nil || len(ths) != 3 || ths[0] != (Threshold{"cpu_ms_per_envelope", '>', 5, "cpu_ms_per_envelope>+5%"}) ||
		ths[2].Op != '<' || ths[2].Pct != -5 {
		t.Fatalf("%+v %v", ths, err)
	}
	for _, bad := range []string{"", "p99", "p99>5", "p99>-5%", "forwarded_rate<+5%", "speed>+5%", ">+5%", "p99>+x%"} {
		var ce *ConfigError
		if _, err := ParseThresholds(bad); !errors.As(err, &ce) || ce.Field != "FailOn" {
			t.Errorf("%q: %v, want a FailOn config error", bad, err)
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
