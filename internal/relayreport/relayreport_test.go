package relayreport

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/replay"
	"github.com/relayload/relayload/internal/testutil"
)

// TestMarkdown renders a card with every section and checks the figures
// each table must carry.
func TestMarkdown(t *testing.T) {
	step := func(rate float64, v string, ms float64) *orchestrate.Step {
		return &orchestrate.Step{Rate: rate, Verdict: v, CPU: orchestrate.CPU{MsPerEnv: ms, NetCores: ms * rate / 1000},
			Steady:  orchestrate.Steady{AcceptedRate: rate, ForwardedRate: min(rate, 800), BacklogEnd: int64(max(rate-800, 0) * 30), BacklogGrowth: max(rate-800, 0), RSSSlope: 0.5},
			StatsD:  map[string]orchestrate.Quantiles{SignatureTimer: {P50: 0.053, P99: 0.120}},
			LoadAvg: [2]float64{0.4, 1.1},
		}
	}
	behind := step(1400, orchestrate.VerdictFellBehind, 2.1)
	behind.Seconds = []orchestrate.SecondPoint{{T: 0, Accepted: 1400, Forwarded: 770, Backlog: 630, RSSMiB: 200}, {T: 1, Accepted: 1400, Forwarded: 770, Backlog: 1260, RSSMiB: 224}}
	maxStep := step(orchestrate.RateMax, orchestrate.VerdictFellBehind, 2)
	maxStep.Concurrency, maxStep.Steady.AcceptedRate, maxStep.Steady.ForwardedRate, maxStep.Steady.RSSSlope = 64, 11770, 360, 260
	maxStep.Memory.PeakRSS = 3900 << 20
	maxStep.StoppedEarly = "Relay's RSS passed 4.0 GiB (4100.0 MiB) 15.2 s after blast started; blast was stopped there"
	perfStep := step(200, orchestrate.VerdictKeptUp, 3.3)
	perfStep.Perf = &orchestrate.PerfRecord{File: "/out/errors-perf/relay.perf.data", Event: "cpu-clock", Profile: &orchestrate.PerfProfile{
		Samples: 12000, Unwound: 87,
		Top:    []orchestrate.FunctionShare{{Name: "relay_event_normalization::normalize::user_agent::normalize_user_agent_info_generic", Inclusive: 24.1, Self: 0.2}},
		Groups: []orchestrate.GroupShare{{Name: "user-agent parsing", Share: 24.1}, {Name: "PII scrubbing", Share: 9.5}},
		Folded: "/out/errors-perf/relay.perf.folded", Flame: "/out/errors-perf/flame-relay.svg",
	}}
	card := &Card{
		Relay:    orchestrate.Build{Name: "relay", Bin: "/r/relay", Version: "relay 26.4.0"},
		Started:  time.Unix(1780000000, 0),
		Kinds:    []KindCost{{Kind: "transactions", Step: step(300, orchestrate.VerdictKeptUp, 7.5)}, {Kind: "errors", Step: step(300, orchestrate.VerdictKeptUp, 3.3)}},
		Capacity: &orchestrate.Report{Setup: orchestrate.Setup{Builds: []orchestrate.Build{{Name: "relay", Bin: "/r/relay"}}}, KeptUpWith: map[string]float64{"relay": 800}, Steps: []*orchestrate.Step{step(800, orchestrate.VerdictKeptUp, 2), behind}},
		Max:      &orchestrate.Report{Steps: []*orchestrate.Step{maxStep}},
		Errors:   &orchestrate.Report{Steps: []*orchestrate.Step{perfStep}},
		Notes:    []string{"max-rate: something to say"},
	}
	var b bytes.Buffer
	card.Markdown(&b)
	// Tables are padded to equal widths: compare with runs of spaces as one.
	squash := regexp.MustCompile(` +`)
	md := squash.ReplaceAllString(b.String(), " ")
	for _, want := range []string{
		"# What Relay costs: relay 26.4.0",
		"| transactions | 7.50 ms | 2.25 | 300 | 0.0 | 53 µs | 120 µs | kept up | 0.4 |",
		"| 1,400 | 1,400 | 800 | 18,000 | +600/s | 2.10 ms | +0.5 MiB/s | fell behind |",
		"The backlog at 1,400/s, second by second",
		"| 1 | 1,400 | 770 | 1,260 | 224 |",
		"64 senders, back to back: Relay accepted 11,770/s and forwarded 360/s; its RSS grew +260 MiB/s to a peak of 3.8 GiB. Relay's RSS passed 4.0 GiB",
		"12,000 samples (cpu-clock), 87% with a usable stack.",
		"| user-agent parsing | 24.1% |",
		"`relay_event_normalization::normalize::user_agent::normalize_user_agent_info_generic` | 24.1% | 0.2% |",
		"[errors-perf/flame-relay.svg](errors-perf/flame-relay.svg)",
		"- max-rate: something to say",
	} {
		if !strings.Contains(md, squash.ReplaceAllString(want, " ")) {
			t.Errorf("report.md lacks %q\n%s", want, md)
		}
	}
}

// TestRunWithStandin runs every section against the stand-in relay with
// short steps: each section's report is written and the card holds them.
func TestRunWithStandin(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 8 steps")
	}
	bin := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	out := t.TempDir()
	// Each section's progress goes to Options.Progress under its name.
	var sections []string
	var capacity []orchestrate.Progress
	progress := func(section string, p orchestrate.Progress) {
		if len(sections) == 0 || sections[len(sections)-1] != section {
			sections = append(sections, section)
		}
		if section == "capacity" {
			capacity = append(capacity, p)
		}
	}
	// Idle 500 ms: a shorter window reads a tick of CPU (10 ms) as 0.1 cores
	// of idle, more than the stand-in uses under this load.
	card, err := Run(context.Background(), Options{RelayBin: bin, Out: out, Duration: time.Second, Warmup: 300 * time.Millisecond, Idle: 500 * time.Millisecond,
		KindRate: 50, MinRate: 50, MaxRate: 100, PoolSize: 300, // a pool per section: the default 5,000 took most of the test under -race
		// The stand-in, like Relay, waits limits.shutdown_timeout (2 s)
		// after SIGTERM; no step here looks at its shutdown.
		RelayConfig: relayconfig.Config{"limits": map[string]any{"shutdown_timeout": 0}}, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range Kinds {
		want = append(want, "kind-"+string(k))
	}
	if want = append(want, "capacity", "max-rate"); !slices.Equal(sections, want) {
		t.Errorf("progress of sections %q, want %q", sections, want)
	}
	for _, p := range capacity {
		if p.Steps != orchestrate.DefaultFindMaxProbes || !p.AtMost {
			t.Fatalf("capacity's progress: %+v, want steps at most %d", p, orchestrate.DefaultFindMaxProbes)
		}
	}
	if len(card.Kinds) != len(Kinds) || card.Capacity == nil || card.Max == nil || card.Errors != nil {
		t.Fatalf("card: %d kinds, capacity %v, max %v, errors %v; notes %v", len(card.Kinds), card.Capacity != nil, card.Max != nil, card.Errors != nil, card.Notes)
	}
	for _, k := range card.Kinds {
		// At 50/s for 1 s the stand-in's load CPU can fall within the idle
		// reading's error: then the step says so instead of a cost.
		if k.Step.Failed || k.Step.CPU.CostEnvelopes == 0 || k.Step.Upstream.ItemsByType == nil ||
			(k.Step.CPU.MsPerEnv <= 0 && !hasNote(k.Step.Notes, orchestrate.NoteCostBelowIdle)) {
			t.Errorf("%s: %+v", k.Kind, k.Step)
		}
	}
	if len(card.Capacity.FindMax) != 1 || card.Max.Steps[0].Rate != orchestrate.RateMax {
		t.Errorf("capacity %+v, max %+v", card.Capacity.FindMax, card.Max.Steps[0])
	}
	for _, dir := range []string{"kind-errors", "kind-transactions", "capacity", "max-rate"} {
		if _, err := os.Stat(filepath.Join(out, dir, "results.json")); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
	if card.Relay.Version == "" || !strings.Contains(card.Relay.Version, "not Relay") {
		t.Errorf("version %q", card.Relay.Version)
	}
}

func hasNote(notes []string, prefix string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

func TestMain(m *testing.M) { testutil.Main(m) }

// With a corpus every section replays it: each kind costed on the
// corpus's envelopes of that kind alone, the capacity search on all of
// them, and the report names the corpus.
func TestRunWithStandinCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs several steps")
	}
	c, err := replay.Load("../replay/testdata/corpus", 0)
	if err != nil {
		t.Fatal(err)
	}
	bin := testutil.Build(t, "github.com/relayload/relayload/internal/cmd/standin-relay")
	out := t.TempDir()
	card, err := Run(context.Background(), Options{RelayBin: bin, Out: out, Duration: time.Second, Warmup: 300 * time.Millisecond, Idle: 500 * time.Millisecond,
		KindRate: 50, MinRate: 50, MaxRate: 100, PoolSize: 30, Corpus: c, Kinds: []pool.Kind{pool.KindSession, "feedback"},
		RelayConfig: relayconfig.Config{"limits": map[string]any{"shutdown_timeout": 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(card.Kinds) != 2 || card.Corpus == nil || card.Capacity == nil || card.Capacity.Setup.Corpus == nil || card.Capacity.Setup.Corpus.Files != 9 {
		t.Fatalf("card: %d kinds, corpus %v, capacity %v; notes %v", len(card.Kinds), card.Corpus, card.Capacity != nil, card.Notes)
	}
	for _, k := range card.Kinds {
		want := map[pool.Kind]string{pool.KindSession: "session", "feedback": "feedback"}[pool.Kind(k.Kind)]
		items := k.Step.Upstream.ItemsByType
		if k.Step.Failed || items[want] == 0 {
			t.Errorf("%s: items %v, failed %v", k.Kind, items, k.Step.Failed)
		}
		for typ := range items {
			if typ != want && typ != "client_report" && typ != "metric_buckets" && typ != "statsd" {
				t.Errorf("%s: the kind's section sent %s too", k.Kind, typ)
			}
		}
	}
	var b bytes.Buffer
	card.Markdown(&b)
	if !strings.Contains(b.String(), "recorded envelopes from `../replay/testdata/corpus` (9 files") {
		t.Errorf("report.md does not name the corpus:\n%s", b.String())
	}
	if got := corpusKinds(c.Kinds()); fmt.Sprint(got) != "[transactions errors logs checkins sessions client_report feedback]" {
		t.Errorf("corpus kinds in report order: %v", got)
	}
}
