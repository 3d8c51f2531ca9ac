package orchestrate

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/profile"
)

// HarnessSplit is the harness's CPU over the measured window split by what
// its perf samples were doing: blast sending to Relay, the fake upstream
// answering Relay (its HTTP server included), the Go scheduler waiting on and
// waking for the network, and the rest (the collector, sampling Relay,
// StatsD, unwound nowhere). Cores are shares of HarnessCores in proportion
// to the samples' weight. (Go's own CPU profile with goroutine labels was
// tried for this: its split varied severalfold between identical runs,
// where perf's stayed steady.)
type HarnessSplit struct {
	BlastCores     float64 `json:"blast_cores"`
	UpstreamCores  float64 `json:"upstream_cores"`
	SchedulerCores float64 `json:"scheduler_cores"`
	OtherCores     float64 `json:"other_cores"`
	Samples        int64   `json:"samples"`
}

// String is the split as a step's note gives it.
func (h HarnessSplit) String() string {
	return fmt.Sprintf("blast %.3f, the fake upstream %.3f, the Go scheduler %.3f, the rest %.3f",
		h.BlastCores, h.UpstreamCores, h.SchedulerCores, h.OtherCores)
}

// Names of the harness's groups (PerfProfile.Groups of HarnessPerf).
const (
	groupBlast     = "blast"
	groupUpstream  = "fake upstream"
	groupScheduler = "Go scheduler"
)

// harnessGroups tell the harness's work apart by its Go frames. They do not
// overlap: a goroutine's stack is blast's or the upstream's, and the
// scheduler runs on its own (g0) stack. Both sides use fasthttp (blast's
// HostClient, the upstream's Server), so fasthttp's frames are told apart
// by the type whose goroutine they run on: a HostClient's connection
// cleaner is blast's, a Server's worker pool the upstream's.
func harnessGroups() []profile.Group {
	return []profile.Group{
		profile.PrefixGroup(groupBlast, "blast's pacer and senders (fasthttp's HostClient)",
			"github.com/relayload/relayload/internal/blast.", "github.com/valyala/fasthttp.(*HostClient)."),
		profile.PrefixGroup(groupUpstream, "the fake upstream and the HTTP server serving it (fasthttp or net/http)",
			"github.com/relayload/relayload/upstream.", "net/http.",
			"github.com/valyala/fasthttp.(*Server).", "github.com/valyala/fasthttp.(*workerPool).",
			"github.com/valyala/fasthttp/fasthttpadaptor."),
		profile.PrefixGroup(groupScheduler, "the Go scheduler: finding work, the network poller",
			"runtime.schedule", "runtime.findRunnable", "runtime.park_m"),
	}
}

// harnessPerfFile is the harness's recording next to Relay's.
func harnessPerfFile(relayFile string) string {
	ext := filepath.Ext(relayFile)
	return strings.TrimSuffix(relayFile, ext) + "-harness" + ext
}

// perfAttach is how long perf record -p may take to attach on a loaded
// machine: the recording misses that much of the window.
const perfAttach = 1500 * time.Millisecond

// tooFewHarnessSamples says why a harness recording cannot be split, or ""
// when it can. startHarness samples about once per ms of CPU, so cores
// over a window of secs, less perf's attach time, give at least
// cores×(secs−1.5)×1000 samples; fewer than half of that, or none in any
// group, is perf having missed orchestrate's threads, which was seen
// against Relay (a recording of the runtime's sysmon thread alone, or one
// that attached late).
func tooFewHarnessSamples(pp *PerfProfile, cores, secs float64, event string) string {
	want := cores * max(secs-perfAttach.Seconds(), 0.5) * 1000
	floor := want / 2
	if event != "cpu-clock" {
		floor = want / 4 // cycles: the period is 1 ms only at 3 GHz
	}
	var grouped float64
	for _, g := range pp.Groups {
		grouped += g.Share
	}
	switch {
	case want >= 20 && float64(pp.Samples) < floor:
		return fmt.Sprintf("the harness's perf recording holds %d samples where its %.3f cores over %.0f s should give at least %.0f (perf did not follow all of orchestrate's threads): its CPU is not split",
			pp.Samples, cores, secs, want)
	case pp.Samples > 0 && grouped == 0:
		return fmt.Sprintf("none of the harness's %d perf samples is of blast, the fake upstream or the Go scheduler (perf missed orchestrate's threads, or orchestrate has no symbol table): its CPU is not split", pp.Samples)
	}
	return ""
}

// splitHarness turns the groups' shares (percent) into cores of the
// harness's cores; nil without the three groups.
func splitHarness(pp *PerfProfile, cores float64) *HarnessSplit {
	if pp == nil {
		return nil
	}
	h := &HarnessSplit{Samples: pp.Samples}
	found, rest := 0, 100.0
	for _, g := range pp.Groups {
		var part *float64
		switch g.Name {
		case groupBlast:
			part = &h.BlastCores
		case groupUpstream:
			part = &h.UpstreamCores
		case groupScheduler:
			part = &h.SchedulerCores
		default:
			continue
		}
		*part = cores * g.Share / 100
		found++
		rest -= g.Share
	}
	if found != 3 {
		return nil
	}
	h.OtherCores = cores * max(0, rest) / 100
	return h
}
