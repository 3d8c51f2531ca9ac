package orchestrate

import (
	"testing"

	"github.com/relayload/relayload/internal/profile"
)

func TestHarnessGroups(t *testing.T) {
	groups := harnessGroups()
	for _, tt := range []struct {
		frame string
		want  string
	}{
		{"github.com/relayload/relayload/internal/blast.(*runner).worker", groupBlast},
		{"github.com/valyala/fasthttp.(*HostClient).Do", groupBlast},
		{"github.com/relayload/relayload/upstream.(*Server).handleEnvelope", groupUpstream},
		{"net/http.(*conn).serve", groupUpstream},
		{"github.com/valyala/fasthttp.(*Server).serveConn", groupUpstream},
		{"github.com/valyala/fasthttp.(*workerPool).workerFunc", groupUpstream},
		{"github.com/valyala/fasthttp.(*HostClient).connsCleaner", groupBlast},
		{"github.com/valyala/fasthttp/fasthttpadaptor.NewFastHTTPHandler.func1", groupUpstream},
		// Frames both sides call are told apart by a caller's frame.
		{"github.com/valyala/fasthttp.(*Request).Write", ""},
		{"github.com/valyala/fasthttp.(*RequestHeader).parse", ""},
		{"runtime.findRunnable", groupScheduler},
		{"runtime.schedule", groupScheduler},
		{"runtime.gcBgMarkWorker", ""},
		{"github.com/relayload/relayload/internal/orchestrate/relayproc.(*Sampler).Read", ""},
	} {
		var got []string
		for _, g := range groups {
			if g.Match(profile.Frame{Name: tt.frame}) {
				got = append(got, g.Name)
			}
		}
		if tt.want == "" && len(got) != 0 || tt.want != "" && (len(got) != 1 || got[0] != tt.want) {
			t.Errorf("%s: in %v, want %q", tt.frame, got, tt.want)
		}
	}
	if f := harnessPerfFile("/tmp/out/relay-today-r1-500.data"); f != "/tmp/out/relay-today-r1-500-harness.data" {
		t.Errorf("harness file %s", f)
	}
}

func TestSplitHarness(t *testing.T) {
	pp := &PerfProfile{Samples: 500, Groups: []GroupShare{{Name: groupBlast, Share: 28}, {Name: groupUpstream, Share: 49}, {Name: groupScheduler, Share: 21}}}
	h := splitHarness(pp, 0.15)
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	if h == nil || h.Samples != 500 || !near(h.BlastCores, 0.042) || !near(h.UpstreamCores, 0.0735) || !near(h.SchedulerCores, 0.0315) || !near(h.OtherCores, 0.003) {
		t.Fatalf("%+v", h)
	}
	// Groups over 100% (they may overlap) leave no negative rest.
	pp.Groups[0].Share = 40
	if h := splitHarness(pp, 0.15); h.OtherCores != 0 {
		t.Errorf("rest %v", h.OtherCores)
	}
	if splitHarness(&PerfProfile{Groups: pp.Groups[:2]}, 1) != nil || splitHarness(nil, 1) != nil {
		t.Error("a split without every group")
	}
}

func TestTooFewHarnessSamples(t *testing.T) {
	grouped := []GroupShare{{Name: groupBlast, Share: 28}, {Name: groupUpstream, Share: 49}, {Name: groupScheduler, Share: 20}}
	sysmonOnly := []GroupShare{{Name: groupBlast}, {Name: groupUpstream}, {Name: groupScheduler}}
	for _, tt := range []struct {
		samples     int64
		groups      []GroupShare
		cores, secs float64
		event       string
		refused     bool
	}{
		{2863, grouped, 0.169, 20, "cpu-clock", false}, // seen against Relay 26.4.0
		{42, sysmonOnly, 0.149, 20, "cpu-clock", true}, // seen: only sysmon followed
		{1200, grouped, 0.149, 20, "cpu-clock", true},
		{1200, grouped, 0.149, 20, "cycles", false},
		{262, grouped, 0.34, 3, "cpu-clock", false}, // seen: a 3 s window, perf attaching late
		{300, sysmonOnly, 0.02, 3, "cpu-clock", true},
		{5, grouped, 0.02, 0.5, "cpu-clock", false}, // too little CPU to judge
	} {
		n := tooFewHarnessSamples(&PerfProfile{Samples: tt.samples, Groups: tt.groups}, tt.cores, tt.secs, tt.event)
		if (n != "") != tt.refused {
			t.Errorf("%d samples, %.3f cores, %v s, %s: %q", tt.samples, tt.cores, tt.secs, tt.event, n)
		}
	}
	if n := tooFewHarnessSamples(&PerfProfile{Samples: 42, Groups: grouped}, 0.149, 20, "cpu-clock"); n != "the harness's perf recording holds 42 samples where its 0.149 cores over 20 s should give at least 2756 (perf did not follow all of orchestrate's threads): its CPU is not split" {
		t.Errorf("note %q", n)
	}
}
