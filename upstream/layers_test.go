package upstream

import (
	"encoding/json"
	"testing"
	"time"
)

// TestFaultLayers: Config.Faults, the control layer (SetFaults, POST
// /control) and AddFaults's layers each keep their own faults and clock:
// setting or removing one never changes another, an outage ends when its
// own duration has passed since its layer was set, and GET /control
// answers every layer combined with each that still does something.
func TestFaultLayers(t *testing.T) {
	slow := func(route, d string) Faults {
		var v Duration
		if err := v.UnmarshalJSON([]byte(`"` + d + `"`)); err != nil {
			t.Fatal(err)
		}
		return Faults{Latency: map[string]Latency{route: {Fixed: v}}}
	}
	type step struct {
		at   time.Duration // since the server started
		do   string        // "add", "remove", "control", "check"
		f    Faults
		live int      // status of GET live after the step (0: not checked)
		want []string // the layers GET /control shows (nil: not checked)
	}
	outage := func(mode string, d time.Duration) Faults {
		return Faults{Outage: &Outage{Mode: mode, Duration: Duration(d)}}
	}
	for _, tc := range []struct {
		name   string
		config Faults
		steps  []step
	}{
		{"a config outage keeps its end through a timed fault", outage(OutageUnavailable, 3*time.Second), []step{
			{at: 0, do: "check", live: 503, want: []string{"config"}},
			{at: 2 * time.Second, do: "add", f: slow("envelope", "1ms"), live: 503, want: []string{"config", "timed"}},
			{at: 3 * time.Second, do: "check", live: 200, want: []string{"timed"}},
			{at: 5 * time.Second, do: "remove", live: 200, want: nil},
		}},
		{"removing a timed fault keeps /control's faults", Faults{}, []step{
			{at: 0, do: "add", f: Faults{Inject: []Injection{{Route: "live", Status: 500, Probability: 1}}}, live: 500, want: []string{"timed"}},
			{at: time.Second, do: "control", f: slow("outcomes", "2ms"), live: 500, want: []string{"control", "timed"}},
			{at: 2 * time.Second, do: "remove", live: 200, want: []string{"control"}},
		}},
		{"/control leaves the config layer", slow("live", "1ms"), []step{
			{at: 0, do: "control", f: Faults{Inject: []Injection{{Route: "live", Status: 502, Probability: 1}}}, live: 502, want: []string{"config", "control"}},
			{at: time.Second, do: "control", f: Faults{}, live: 200, want: []string{"config"}},
		}},
		{"a timed outage over a longer one ends on time", outage(OutageUnavailable, 10*time.Second), []step{
			{at: time.Second, do: "add", f: outage(OutageUnavailable, 2*time.Second), live: 503, want: []string{"config", "timed"}},
			{at: 2 * time.Second, do: "check", live: 503, want: []string{"config", "timed"}},
			{at: 3 * time.Second, do: "check", live: 503, want: []string{"config"}},
			{at: 4 * time.Second, do: "remove", live: 503, want: []string{"config"}},
			{at: 10 * time.Second, do: "check", live: 200, want: nil},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Faults = tc.config })
			start := f.clock.Now()
			var remove func()
			for i, s := range tc.steps {
				f.clock.Add(start.Add(s.at).Sub(f.clock.Now()))
				switch s.do {
				case "add":
					var err error
					if remove, err = f.srv.AddFaults("timed", s.f); err != nil {
						t.Fatal(err)
					}
				case "remove":
					remove()
				case "control":
					b, _ := json.Marshal(s.f)
					f.setFaults(t, string(b))
				}
				if s.live != 0 {
					if got := f.do("GET", "/api/0/relays/live/", nil, nil).status; got != s.live {
						t.Errorf("step %d (%s at %s): live answered %d, want %d", i, s.do, s.at, got, s.live)
					}
				}
				var a struct {
					Layers []struct{ Layer string } `json:"layers"`
				}
				if err := json.Unmarshal(f.do("GET", "/control", nil, nil).body, &a); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, l := range a.Layers {
					got = append(got, l.Layer)
				}
				if len(got) != len(s.want) || len(got) > 0 && fmtList(got) != fmtList(s.want) {
					t.Errorf("step %d (%s at %s): layers %v, want %v", i, s.do, s.at, got, s.want)
				}
			}
		})
	}
}

func fmtList(s []string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
