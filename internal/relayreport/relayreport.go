// Package relayreport measures the figures a Relay developer asks first,
// with one command, into one report: what each kind of envelope costs,
// the mixed traffic Relay keeps up with, what happens when it is sent as
// fast as possible, where an error's time goes (perf), and what Relay's
// own signature timer says (StatsD). Each section is one orchestrate.Run;
// its full report is written next to the summary.
//
// With Options.Compare it answers the same questions for two builds side by
// side: each kind's cost as a comparison in slices (orchestrate's paired
// change with its 95% interval), and each build's capacity from its own
// bisection.
package relayreport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/replay"
	"github.com/relayload/relayload/internal/report"
	"github.com/relayload/relayload/internal/useragent"
)

// Options say which Relay to measure and how long each step runs.
type Options struct {
	RelayBin string
	// Out is the directory for report.md and one sub-directory per section.
	Out string
	// Duration of each measured window (default 30 s); Warmup and Idle
	// of each step (orchestrate's defaults when 0).
	Duration, Warmup, Idle time.Duration
	// KindRate is the rate of the cost-per-kind steps (default 300/s).
	KindRate float64
	// Bounds of the mixed-traffic search (default 200 and 2000/s).
	MinRate, MaxRate float64
	// Perf records the errors step with perf (needs the perf tool).
	Perf bool
	// Log receives progress lines.
	Log io.Writer
	// Progress, if set, is each section's orchestrate.Config.Progress,
	// told the section's name ("kind-error", "capacity", …).
	Progress func(section string, p orchestrate.Progress)
	// RelayConfig overrides are merged into every step's config.yml.
	RelayConfig relayconfig.Config
	// PoolSize is each section's envelope pool (orchestrate's default when
	// 0); every section builds its own.
	PoolSize int
	// BaselineName names RelayBin's build (default "relay").
	BaselineName string
	// Compare, when set, is a second build measured beside the baseline:
	// each kind is then a comparison in slices of Slice (default
	// orchestrate.DefaultSlice) that ends when the change in CPU per
	// envelope is known to within Precision (a fraction; 0: never) or
	// CompareBudget (default 2 min) is spent, per kind; the capacity search
	// and the max-rate step run for both builds; perf records the
	// baseline only.
	Compare       *orchestrate.Build
	Slice         time.Duration
	Precision     float64
	CompareBudget time.Duration
	// Kinds are the kinds costed one at a time (default Kinds, or with a
	// Corpus the kinds found in it).
	Kinds []pool.Kind
	// Agents, when given, replace every section's generated user agents
	// (see pool.Options.Agents); AgentsFrom names where they came from.
	Agents     []useragent.Weighted
	AgentsFrom string
	// Corpus, when set, replaces the generated envelopes in every section
	// (package replay): each kind is costed on the corpus's envelopes of
	// that kind, the capacity and max-rate sections send all of them, and
	// the perf section its errors (skipped when it has none).
	Corpus *replay.Corpus
}

// DefaultCompareBudget is how long each kind's comparison may take.
const DefaultCompareBudget = 2 * time.Minute

// Kinds costed one at a time, in the seed's order.
var Kinds = []pool.Kind{pool.KindTransaction, pool.KindError, pool.KindLog, pool.KindCheckIn, pool.KindSession}

// SignatureTimer is Relay's StatsD timer for signing upstream requests.
const SignatureTimer = "signature.create.duration"

// Card is what the sections measured.
type Card struct {
	Relay orchestrate.Build
	// Compared is Options.Compare as it ran (with its version); nil
	// without a comparison.
	Compared *orchestrate.Build
	Started  time.Time
	Took     time.Duration
	Kinds    []KindCost
	Capacity *orchestrate.Report
	Max      *orchestrate.Report
	Errors   *orchestrate.Report // the perf'd errors step
	// Corpus describes Options.Corpus; nil for generated envelopes.
	Corpus *replay.Summary
	Notes  []string
}

// KindCost is one kind at KindRate: one step of the baseline, or with
// Options.Compare the comparison in slices of the two builds.
type KindCost struct {
	Kind   string
	Step   *orchestrate.Step
	Slices *orchestrate.SliceRun
}

// Run measures every section. A section that fails is noted and the rest
// go on; ctx's end stops at once with what was measured. With
// Options.Compare, bad options (of the comparison, or of a build as
// orchestrate checks them) return an error and no card before anything
// runs.
func Run(ctx context.Context, o Options) (*Card, error) {
	if o.RelayBin == "" {
		return nil, errors.New("relayreport: no Relay binary")
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	// Before anything runs: a report is not lost to an Out that cannot be
	// written.
	if err := report.CheckDir(o.Out); err != nil {
		return nil, configerr.Wrap("Out", err)
	}
	card := &Card{Started: time.Now()}
	if o.Corpus != nil {
		sum := o.Corpus.Summary()
		card.Corpus = &sum
	}
	defer func() { card.Took = time.Since(card.Started) }()
	builds := []orchestrate.Build{{Name: o.BaselineName, Bin: o.RelayBin}}
	if o.Compare != nil {
		builds = append(builds, *o.Compare)
	}
	base := orchestrate.Config{
		Builds: builds, Duration: o.Duration, Log: o.Log,
		Warmup: o.Warmup, Idle: o.Idle, Seed: 1, RelayConfig: o.RelayConfig, PoolSize: o.PoolSize,
		StatsDListen: "127.0.0.1:0", StatsDMetrics: []string{SignatureTimer}, Agents: o.Agents, AgentsFrom: o.AgentsFrom,
	}
	section := func(name string, mod func(*orchestrate.Config)) (*orchestrate.Report, error) {
		cfg := base
		mod(&cfg)
		// The heading goes out with the section's first progress line, so
		// that a config orchestrate refuses is all a terminal shows.
		cfg.Log = &headed{w: o.Log, head: "== " + name + "\n"}
		if o.Progress != nil {
			cfg.Progress = func(p orchestrate.Progress) { o.Progress(name, p) }
		}
		rep, err := orchestrate.Run(ctx, cfg)
		if rep != nil {
			if len(rep.Setup.Builds) > 0 {
				card.Relay = rep.Setup.Builds[0]
			}
			if len(rep.Setup.Builds) > 1 {
				card.Compared = &rep.Setup.Builds[1]
			}
			if _, werr := report.Write(filepath.Join(o.Out, name), rep); werr != nil {
				card.Notes = append(card.Notes, fmt.Sprintf("%s: writing its report: %v", name, werr))
			}
		}
		if err != nil && ctx.Err() == nil {
			card.Notes = append(card.Notes, fmt.Sprintf("%s: %v", name, err))
		}
		return rep, err
	}

	whole := func(c *orchestrate.Config) { c.Corpus = o.Corpus }
	for i, k := range o.Kinds {
		var only *replay.Corpus
		if o.Corpus != nil {
			var err error
			if only, err = o.Corpus.Only(k); err != nil {
				card.Notes = append(card.Notes, fmt.Sprintf("kind-%s: %v", k, err))
				continue
			}
		}
		rep, err := section("kind-"+string(k), func(c *orchestrate.Config) {
			c.Rates = []float64{o.KindRate}
			if only != nil {
				c.Corpus = only
			} else {
				c.Mix = pool.Mix{k: 1}
			}
			if o.Compare != nil {
				c.Slices, c.Slice, c.Precision, c.Budget = true, o.Slice, o.Precision, o.CompareBudget
			}
		})
		if ctx.Err() != nil {
			return card, ctx.Err()
		}
		if i == 0 && o.Compare != nil && errors.Is(err, orchestrate.ErrConfig) {
			return nil, err
		}
		switch {
		case err != nil:
		case o.Compare != nil && len(rep.SliceRuns) > 0:
			card.Kinds = append(card.Kinds, KindCost{Kind: string(k), Slices: rep.SliceRuns[0]})
		case o.Compare == nil && len(rep.Steps) > 0:
			card.Kinds = append(card.Kinds, KindCost{Kind: string(k), Step: rep.Steps[0]})
		}
	}
	if card.Capacity, _ = section("capacity", func(c *orchestrate.Config) {
		whole(c)
		c.Rates, c.FindMax = []float64{o.MinRate, o.MaxRate}, true
	}); ctx.Err() != nil {
		return card, ctx.Err()
	}
	if card.Max, _ = section("max-rate", func(c *orchestrate.Config) {
		whole(c)
		c.Rates = []float64{orchestrate.RateMax}
		c.Duration = min(o.Duration, 15*time.Second)
	}); ctx.Err() != nil {
		return card, ctx.Err()
	}
	perf := o.Perf
	var errorsOnly *replay.Corpus
	if perf && o.Corpus != nil {
		var err error
		if errorsOnly, err = o.Corpus.Only(pool.KindError); err != nil {
			card.Notes = append(card.Notes, "errors-perf: skipped: the corpus holds no errors")
			perf = false
		}
	}
	if perf {
		dir := filepath.Join(o.Out, "errors-perf")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return card, fmt.Errorf("relayreport: %w", err)
		}
		if card.Errors, _ = section("errors-perf", func(c *orchestrate.Config) {
			c.Builds = builds[:1]
			c.Rates = []float64{200}
			if errorsOnly != nil {
				c.Corpus = errorsOnly
			} else {
				c.Mix = pool.Mix{pool.KindError: 1}
			}
			c.Perf = filepath.Join(dir, "relay.perf.data")
		}); ctx.Err() != nil {
			return card, ctx.Err()
		}
	}
	return card, nil
}

// defaults fills o's zero fields and checks the comparison's own options.
// Errors are *configerr.Error naming Options fields.
func (o *Options) defaults() error {
	if o.Duration == 0 {
		o.Duration = 30 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = orchestrate.DefaultWarmup
	}
	if o.Idle == 0 {
		o.Idle = orchestrate.DefaultIdle
	}
	if o.KindRate == 0 {
		o.KindRate = 300
	}
	if o.MinRate == 0 {
		o.MinRate = 200
	}
	if o.MaxRate == 0 {
		o.MaxRate = 2000
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.BaselineName == "" {
		o.BaselineName = "relay"
	}
	if o.Kinds == nil {
		o.Kinds = Kinds
		if o.Corpus != nil {
			o.Kinds = corpusKinds(o.Corpus.Kinds())
		}
	}
	if o.Compare == nil {
		return nil
	}
	if o.Slice == 0 {
		o.Slice = orchestrate.DefaultSlice
	}
	if o.CompareBudget == 0 {
		o.CompareBudget = DefaultCompareBudget
	}
	switch {
	case o.Compare.Bin == "":
		return configerr.Errorf("Compare", "build %q has no binary", o.Compare.Name)
	case o.Compare.Name == "":
		return configerr.New("Compare", "the build has no name")
	case o.Compare.Name == o.BaselineName:
		return configerr.New("Compare", "the build's name is %s's; give it another", "BaselineName")
	}
	return nil
}

// corpusKinds orders a corpus's kinds as Kinds orders the pool's, the
// others after them.
func corpusKinds(found []pool.Kind) []pool.Kind {
	var out []pool.Kind
	for _, k := range Kinds {
		if slices.Contains(found, k) {
			out = append(out, k)
		}
	}
	for _, k := range found {
		if !slices.Contains(Kinds, k) {
			out = append(out, k)
		}
	}
	return out
}

// headed writes head before the first write to w.
type headed struct {
	w    io.Writer
	head string
	once sync.Once
}

func (h *headed) Write(p []byte) (int, error) {
	h.once.Do(func() { io.WriteString(h.w, h.head) })
	return h.w.Write(p)
}

// Markdown writes the card as report.md.
func (c *Card) Markdown(w io.Writer) {
	if c.Compared != nil {
		c.compareHeader(w)
	} else {
		fmt.Fprintf(w, "# What Relay costs: %s\n\n", c.Relay.Version)
		fmt.Fprintf(w, "Measured with relayload against `%s` (%s), on this machine, %s; took %s. Every figure is from a real Relay; each section's full report (results.json, charts) is in its own directory.\n",
			c.Relay.Bin, c.Relay.Version, c.Started.UTC().Format("2006-01-02 15:04 UTC"), c.Took.Round(time.Second))
	}
	if s := c.Corpus; s != nil {
		fmt.Fprintf(w, "\nTraffic: recorded envelopes from `%s` (%d files, %.1f MiB, %s; items by type: %s), re-targeted to the run's projects with new ids and timestamps at the time of the run; each kind is costed on the corpus's envelopes of that kind.\n",
			s.Dir, s.Files, float64(s.Bytes)/(1<<20), s.Digest, replay.FormatCounts(s.ItemTypes))
	}

	switch {
	case c.Compared != nil:
		c.kindsCompared(w)
	case len(c.Kinds) > 0:
		rate := c.Kinds[0].Step.Rate
		fmt.Fprintf(w, "\n## Cost per envelope, one kind at a time (%s/s)\n\n", report.Num(rate))
		t := report.NewTable("kind", ">CPU per envelope", ">Relay cores", ">forwarded/s", ">p99 ms", ">signature p50", ">signature p99", "verdict", ">load 1m")
		for _, k := range c.Kinds {
			st := k.Step
			sig := st.StatsD[SignatureTimer]
			t.Add(k.Kind, fmt.Sprintf("%.2f ms", st.CPU.MsPerEnv), fmt.Sprintf("%.2f", st.CPU.NetCores), report.Num(st.Steady.ForwardedRate),
				fmt.Sprintf("%.1f", st.Latency.P99), usec(sig.P50), usec(sig.P99), st.Verdict, fmt.Sprintf("%.1f", st.LoadAvg[0]))
		}
		t.Write(w)
		fmt.Fprintln(w, "\nCPU per envelope: Relay's CPU time from blast's start until forwarding settled, idle subtracted, divided by the envelopes it forwarded. A kind Relay cannot keep up with at this rate still gets its true cost (it is not divided by what Relay merely accepted). signature: Relay's own `signature.create.duration` timer (StatsD), the Ed25519 signature on every request it sends upstream.")
	}

	switch {
	case c.Compared != nil && c.Capacity != nil:
		c.capacityCompared(w)
	case c.Capacity != nil:
		fmt.Fprintln(w, "\n## Mixed traffic: the highest rate Relay keeps up with")
		fmt.Fprintln(w)
		fmt.Fprintln(w, report.Headline(c.Capacity))
		fmt.Fprintln(w)
		t := report.NewTable(">target/s", ">accepted/s", ">forwarded/s", ">backlog at end", ">backlog growth", ">CPU per envelope", ">RSS slope", "verdict")
		for _, st := range c.Capacity.Steps {
			t.Add(report.Num(st.Rate), report.Num(st.Steady.AcceptedRate), report.Num(st.Steady.ForwardedRate), report.Num(float64(st.Steady.BacklogEnd)),
				fmt.Sprintf("%+.0f/s", st.Steady.BacklogGrowth), fmt.Sprintf("%.2f ms", st.CPU.MsPerEnv), fmt.Sprintf("%+.1f MiB/s", st.Steady.RSSSlope), st.Verdict)
		}
		t.Write(w)
		if st := firstBehind(c.Capacity, ""); st != nil {
			fmt.Fprintf(w, "\nThe backlog at %s/s, second by second (accepted − forwarded since blast started, of the accepted only those Relay is expected to forward):\n\n", report.Num(st.Rate))
			t := report.NewTable(">s", ">accepted", ">forwarded", ">backlog", ">RSS MiB")
			for _, p := range st.Seconds {
				if p.T%2 == 0 || p.T == len(st.Seconds)-1 {
					t.Add(fmt.Sprint(p.T), report.Num(float64(p.Accepted)), report.Num(float64(p.Forwarded)), report.Num(float64(p.Backlog)), fmt.Sprintf("%.0f", p.RSSMiB))
				}
			}
			t.Write(w)
		}
	}

	if c.Max != nil && len(c.Max.Steps) > 0 {
		fmt.Fprintln(w, "\n## Sent as fast as possible")
		fmt.Fprintln(w)
		steps := c.Max.Steps[:1]
		if c.Compared != nil {
			steps = c.Max.Steps
		}
		for _, st := range steps {
			if c.Compared != nil {
				fmt.Fprintf(w, "- %s: ", st.Build)
			}
			fmt.Fprintf(w, "%d senders, back to back: Relay accepted %s/s and forwarded %s/s; its RSS grew %+.0f MiB/s to a peak of %s.",
				st.Concurrency, report.Num(st.Steady.AcceptedRate), report.Num(st.Steady.ForwardedRate), st.Steady.RSSSlope, mib(st.Memory.PeakRSS))
			if st.StoppedEarly != "" {
				fmt.Fprintf(w, " %s.", st.StoppedEarly)
			}
			fmt.Fprintln(w)
		}
		if c.Compared != nil {
			fmt.Fprintln(w, "\nOne step of each build: no interval; a difference here is a lead to measure, not a verdict.")
		}
	}

	if c.Errors != nil && len(c.Errors.Steps) > 0 {
		st := c.Errors.Steps[0]
		fmt.Fprintln(w, "\n## Where an error's time goes (perf, errors at 200/s)")
		fmt.Fprintln(w)
		if c.Compared != nil {
			fmt.Fprintf(w, "Recorded for the baseline, %s, only.\n\n", c.Relay.Name)
		}
		switch {
		case st.Perf == nil:
			fmt.Fprintln(w, "No recording was made.")
		case st.Perf.Profile == nil:
			fmt.Fprintf(w, "Recorded %s, but it could not be read: %s\n", st.Perf.File, st.Perf.Note)
		default:
			p := st.Perf.Profile
			fmt.Fprintf(w, "%s samples (%s), %.0f%% with a usable stack.\n\n", report.Num(float64(p.Samples)), st.Perf.Event, p.Unwound)
			t := report.NewTable("group", ">share of Relay's CPU")
			for _, g := range p.Groups {
				t.Add(g.Name, fmt.Sprintf("%.1f%%", g.Share))
			}
			t.Write(w)
			fmt.Fprintln(w)
			t = report.NewTable("function", ">inclusive", ">self")
			for i, f := range p.Top {
				if i == 12 {
					break
				}
				t.Add("`"+shorten(f.Name, 100)+"`", fmt.Sprintf("%.1f%%", f.Inclusive), fmt.Sprintf("%.1f%%", f.Self))
			}
			t.Write(w)
			if p.Flame != "" {
				rel, err := filepath.Rel(filepath.Dir(filepath.Dir(p.Flame)), p.Flame)
				if err != nil {
					rel = p.Flame
				}
				fmt.Fprintf(w, "\nFlame graph: [%s](%s); folded stacks for speedscope or inferno: `%s`.\n", rel, rel, filepath.Base(p.Folded))
			}
		}
	}

	if len(c.Notes) > 0 {
		fmt.Fprintln(w, "\n## Notes")
		fmt.Fprintln(w)
		for _, n := range c.Notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
}

// firstBehind is the lowest-rate step (of build, unless "") that fell
// behind with a growing backlog, if any.
func firstBehind(rep *orchestrate.Report, build string) *orchestrate.Step {
	steps := slices.Clone(rep.Steps)
	slices.SortFunc(steps, func(a, b *orchestrate.Step) int { return int(a.Rate - b.Rate) })
	for _, st := range steps {
		if (build == "" || st.Build == build) && st.Verdict == orchestrate.VerdictFellBehind && st.Steady.BacklogGrowth > 0 && len(st.Seconds) > 0 {
			return st
		}
	}
	return nil
}

func usec(ms float64) string {
	if ms == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f µs", ms*1000)
}

func mib(b uint64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func shorten(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
