package blast

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relayload/relayload/internal/pool"
)

// SchemaVersion is the version of the Result JSON.
const SchemaVersion = 1

// Result is what one run (or a merge of several shards' runs) measured. It
// marshals to JSON as is: counters plus encoded sketches, no per-request
// data, so a file is a few KB plus about 1 KB per second of run.
//
// Counters cover the measured period only (warm-up excluded). Invariants:
// Sent + Dropped == Scheduled, and Sent == sum(ByStatus) + sum(Errors) +
// Abandoned.
type Result struct {
	Schema      int       `json:"schema"`
	Target      string    `json:"target"`
	Client      string    `json:"client"`
	Rate        float64   `json:"rate"` // target total rate over all shards; 0 = closed loop
	Concurrency int       `json:"concurrency,omitempty"`
	Shard       int       `json:"shard"`  // -1 after Merge
	Shards      int       `json:"shards"` // shards of the shared schedule
	Parts       int       `json:"parts"`  // results merged into this one (1 for a run)
	Start       time.Time `json:"start"`
	// Warmup is the discarded first part of the run; Elapsed the measured
	// part (the schedule's length, or longer if sending ended late).
	Warmup  time.Duration `json:"warmup_ns"`
	Elapsed time.Duration `json:"elapsed_ns"`

	Scheduled int64 `json:"scheduled"` // measured slots this process owned
	Sent      int64 `json:"sent"`      // requests started
	OK        int64 `json:"ok"`        // 2xx responses
	Dropped   int64 `json:"dropped"`   // slots not started: MaxInflight reached
	Abandoned int64 `json:"abandoned"` // still in flight when a cancelled run gave up

	// PeakInflight is the most requests in flight when a slot was released;
	// Workers the sender goroutines (and connections) that needed.
	PeakInflight int64 `json:"peak_inflight"`
	Workers      int   `json:"workers"`

	WarmupSent    int64 `json:"warmup_sent"`
	WarmupOK      int64 `json:"warmup_ok"`
	WarmupDropped int64 `json:"warmup_dropped"`

	ByStatus map[int]int64    `json:"by_status"` // responses by HTTP status (0: outside 100..599)
	Errors   map[string]int64 `json:"errors"`    // transport failures by class (Class*)
	// ErrorSamples holds one error message per class seen, for diagnosis.
	ErrorSamples map[string]string   `json:"error_samples,omitempty"`
	ByKind       map[pool.Kind]int64 `json:"by_kind"` // requests sent per envelope kind
	OKByKind     map[pool.Kind]int64 `json:"ok_by_kind"`

	// Latency runs from the intended send time to the response (no
	// coordinated omission); Service from the actual send (the request
	// handed to the HTTP client, so it includes dialing and waiting for one
	// of MaxConns connections); Lag is actual minus intended send (≥ 0). Latency and Service cover requests that
	// got a response, Lag every sent request. Unit: ms, α = 0.01.
	Latency *Sketch `json:"latency"`
	Lag     *Sketch `json:"lag"`
	Service *Sketch `json:"service"`

	// Windows are the run's seconds by actual send time (drops by intended
	// time), warm-up included: Windows[i] covers [i s, i+1 s) from Start.
	Windows []Window `json:"windows"`

	PoolEntries int    `json:"pool_entries"`
	PoolBytes   int64  `json:"pool_bytes"` // encoded bodies held in memory
	Encoding    string `json:"encoding"`

	Interrupted    bool     `json:"interrupted"`
	Invalid        bool     `json:"invalid"`
	InvalidReasons []string `json:"invalid_reasons,omitempty"`

	// What defines the shared schedule besides Rate, Shards and Warmup:
	// Merge adds up only results whose schedule fields are all equal (see
	// checkMergeable). Files written by an older blast lack these fields.
	Seed     uint64        `json:"seed"`        // the pool's seed (--seed)
	Duration time.Duration `json:"duration_ns"` // measured duration asked for (0: until Count)
	Count    int64         `json:"count"`       // measured slots asked for, all shards (0: no limit)
	// PoolDigest identifies what the pool sends apart from its timestamps
	// (which every run anchors anew): its options and projects, hashed.
	PoolDigest string `json:"pool_digest"`

	// RunIDs name the runs a result holds (one, random, for a run; every
	// part's for a merge) and ShardsCovered the shards (Shard for a run,
	// the union for a merge): Merge refuses a run or a shard twice.
	RunIDs        []string `json:"run_ids"`
	ShardsCovered []int    `json:"shards_covered"`

	// Source is the file ReadFile read the result from ("" otherwise):
	// Merge's errors name it.
	Source string `json:"-"`
}

// Window is one second of a run.
type Window struct {
	Second  int   `json:"second"`
	Sent    int64 `json:"sent"`
	OK      int64 `json:"ok"`
	Errors  int64 `json:"errors"`
	Dropped int64 `json:"dropped"`
	// Latency is nil (JSON null) for windows more than DefaultLatencyWindows
	// seconds before the end of the run: their sketches are not kept.
	Latency *Sketch `json:"latency"`
}

// Metric names a Result sketch for Quantile.
type Metric string

// Metrics of Result.Quantile.
const (
	MetricLatency Metric = "latency"
	MetricLag     Metric = "lag"
	MetricService Metric = "service"
)

// Sketch returns the named sketch (nil for an unknown name).
func (r *Result) Sketch(m Metric) *Sketch {
	switch m {
	case MetricLatency:
		return r.Latency
	case MetricLag:
		return r.Lag
	case MetricService:
		return r.Service
	}
	return nil
}

// Quantile returns quantile q (0..1) of the named sketch; 1 is the exact max.
func (r *Result) Quantile(m Metric, q float64) time.Duration {
	return r.Sketch(m).Quantile(q)
}

// AchievedRate is measured requests started per second of the measured period.
func (r *Result) AchievedRate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Sent) / r.Elapsed.Seconds()
}

// ShareRate is the rate this result was meant to achieve: Rate for an
// unsharded run or a merge of all shards, Rate/Shards for one shard, and
// Rate·Parts/Shards for a merge of some of the shards.
func (r *Result) ShareRate() float64 {
	switch {
	case r.Shards <= 1:
		return r.Rate
	case r.Shard >= 0:
		return r.Rate / float64(r.Shards)
	}
	return r.Rate * float64(min(max(r.Parts, 1), r.Shards)) / float64(r.Shards)
}

// WindowDeviations returns, for each full measured second (warm-up and the
// last, partial second excluded), sent/ShareRate − 1:
// how far the achieved rate of that second was from the target. Empty for
// closed-loop runs.
func (r *Result) WindowDeviations() []float64 {
	want := r.ShareRate()
	if want <= 0 {
		return nil
	}
	first := int((r.Warmup + time.Second - 1) / time.Second)
	last := int((r.Warmup + r.Elapsed) / time.Second) // exclusive: partial second
	var out []float64
	for _, w := range r.Windows {
		if w.Second >= first && w.Second < last {
			out = append(out, float64(w.Sent)/want-1)
		}
	}
	return out
}

// finish sorts out derived fields and validity.
func (r *Result) finish() {
	var reasons []string
	if r.Sent == 0 {
		reasons = append(reasons, "nothing was sent")
	} else if r.OK == 0 {
		reasons = append(reasons, fmt.Sprintf("no request succeeded: none of the %d sent got a 2xx response", r.Sent))
	}
	if r.Sent > 0 && r.OK > 0 {
		var none int64
		var classes []string
		for _, c := range errorClasses {
			if n := r.Errors[c]; n > 0 {
				none += n
				classes = append(classes, fmt.Sprintf("%s %d", c, n))
			}
		}
		if float64(none) > MaxNoAnswerFraction*float64(r.Sent) {
			reasons = append(reasons, fmt.Sprintf("%d of %d requests (%.1f%% > %.0f%%) got no answer (%s): the latency percentiles cover only the %d answered",
				none, r.Sent, 100*float64(none)/float64(r.Sent), 100*MaxNoAnswerFraction, strings.Join(classes, ", "), r.Sent-none))
		}
	}
	if r.Scheduled > 0 && float64(r.Dropped) > MaxDropFraction*float64(r.Scheduled) {
		reasons = append(reasons, fmt.Sprintf("dropped %d of %d slots (%.2f%% > %.1f%%): in-flight limit reached; raise --max-inflight or lower --rate",
			r.Dropped, r.Scheduled, 100*float64(r.Dropped)/float64(r.Scheduled), 100*MaxDropFraction))
	}
	if p99 := r.Lag.Quantile(0.99); p99 > MaxLagP99 {
		reasons = append(reasons, fmt.Sprintf("schedule lag p99 %s > %s: the generator could not keep to the schedule", fmtDur(p99), MaxLagP99))
	}
	if r.Interrupted {
		reasons = append(reasons, "interrupted before the schedule ended")
	}
	if r.Abandoned > 0 {
		reasons = append(reasons, fmt.Sprintf("%d requests still in flight after the grace period", r.Abandoned))
	}
	r.InvalidReasons = reasons
	r.Invalid = len(reasons) > 0
}

// Merge combines the results of the shards of one shared schedule (each run
// in its own process, or merges of some of them): counters add, sketches
// and windows merge exactly; Elapsed is the longest. Windows are aligned by
// second since each process's own start. It refuses (see checkMergeable)
// results of different schedules and any run or shard given twice, which
// would count slots twice. The inputs are not modified.
func Merge(rs ...*Result) (*Result, error) {
	if len(rs) == 0 {
		return nil, errors.New("blast: merge: no results")
	}
	covered, err := checkMergeable(rs)
	if err != nil {
		return nil, fmt.Errorf("blast: merge: %w", err)
	}
	out := &Result{
		Schema: SchemaVersion, Target: rs[0].Target, Client: rs[0].Client, Rate: rs[0].Rate,
		Concurrency: 0, Shard: -1, Shards: rs[0].Shards, Start: rs[0].Start, Warmup: rs[0].Warmup,
		ByStatus: map[int]int64{}, Errors: map[string]int64{}, ErrorSamples: map[string]string{}, ByKind: map[pool.Kind]int64{}, OKByKind: map[pool.Kind]int64{},
		Latency: NewSketch(), Lag: NewSketch(), Service: NewSketch(),
		PoolEntries: rs[0].PoolEntries, PoolBytes: rs[0].PoolBytes, Encoding: rs[0].Encoding,
		Seed: rs[0].Seed, Duration: rs[0].Duration, Count: rs[0].Count, PoolDigest: rs[0].PoolDigest,
		ShardsCovered: covered,
	}
	for _, r := range rs {
		out.RunIDs = append(out.RunIDs, r.RunIDs...)
		if r.Start.Before(out.Start) {
			out.Start = r.Start
		}
		out.Concurrency += r.Concurrency
		out.Parts += max(r.Parts, 1)
		out.Elapsed = max(out.Elapsed, r.Elapsed)
		out.PeakInflight += r.PeakInflight // an upper bound: peaks need not coincide
		out.Workers += r.Workers
		out.Warmup = max(out.Warmup, r.Warmup)
		out.Scheduled += r.Scheduled
		out.Sent += r.Sent
		out.OK += r.OK
		out.Dropped += r.Dropped
		out.Abandoned += r.Abandoned
		out.WarmupSent += r.WarmupSent
		out.WarmupDropped += r.WarmupDropped
		out.WarmupOK += r.WarmupOK
		addMap(out.ByStatus, r.ByStatus)
		addMap(out.Errors, r.Errors)
		for c, msg := range r.ErrorSamples {
			if out.ErrorSamples[c] == "" {
				out.ErrorSamples[c] = msg
			}
		}
		addMap(out.ByKind, r.ByKind)
		addMap(out.OKByKind, r.OKByKind)
		for _, pair := range [][2]*Sketch{{out.Latency, r.Latency}, {out.Lag, r.Lag}, {out.Service, r.Service}} {
			if err := pair[0].Merge(pair[1]); err != nil {
				return nil, err
			}
		}
		for _, w := range r.Windows {
			for len(out.Windows) <= w.Second {
				out.Windows = append(out.Windows, Window{Second: len(out.Windows), Latency: NewSketch()})
			}
			ow := &out.Windows[w.Second]
			ow.Sent += w.Sent
			ow.OK += w.OK
			ow.Errors += w.Errors
			ow.Dropped += w.Dropped
			if w.Latency == nil {
				ow.Latency = nil // one input kept no sketch: the merge has none either
			} else if ow.Latency != nil {
				if err := ow.Latency.Merge(w.Latency); err != nil {
					return nil, err
				}
			}
		}
		out.Interrupted = out.Interrupted || r.Interrupted
	}
	out.finish()
	return out, nil
}

func addMap[K comparable](dst, src map[K]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

// ReadFile reads a Result written with WriteFile (or --out); see ParseResult.
func ReadFile(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("blast: %w", err)
	}
	r, err := parseResult(b)
	if err != nil {
		return nil, fmt.Errorf("blast: %s: %w", path, err)
	}
	r.Source = path
	return r, nil
}

// ParseResult decodes and checks a Result's JSON: the schema, the three
// sketches, and windows numbered 0, 1, 2, … (Merge indexes by Second, so a
// negative or huge one would crash it or allocate without bound).
func ParseResult(b []byte) (*Result, error) {
	r, err := parseResult(b)
	if err != nil {
		return nil, fmt.Errorf("blast: result: %w", err)
	}
	return r, nil
}

func parseResult(b []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Schema != SchemaVersion {
		return nil, fmt.Errorf("schema %d, want %d", r.Schema, SchemaVersion)
	}
	if r.Latency == nil || r.Lag == nil || r.Service == nil {
		return nil, errors.New("missing sketches")
	}
	for i, w := range r.Windows {
		if w.Second != i {
			return nil, fmt.Errorf("window %d has second %d", i, w.Second)
		}
	}
	for i, s := range r.ShardsCovered {
		if s < 0 || s >= r.Shards || (i > 0 && s <= r.ShardsCovered[i-1]) {
			return nil, fmt.Errorf("shards_covered %v: want increasing shards below %d", r.ShardsCovered, r.Shards)
		}
	}
	return &r, nil
}

// ErrInvalid is wrapped by Result.Check's error for an INVALID result.
var ErrInvalid = errors.New("INVALID")

// Check returns nil for a valid result, and for an INVALID one an error
// wrapping ErrInvalid that gives every reason on one line.
func (r *Result) Check() error {
	if !r.Invalid {
		return nil
	}
	return fmt.Errorf("result %w: %s", ErrInvalid, strings.Join(r.InvalidReasons, "; "))
}

// WriteFile writes r as indented JSON.
func (r *Result) WriteFile(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return fmt.Errorf("blast: result: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("blast: %w", err)
	}
	return nil
}

// WriteSummary writes the human-readable table.
func (r *Result) WriteSummary(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format+"\n", a...) }
	mode := fmt.Sprintf("open loop, %s/s", fmtRate(r.Rate))
	if r.Rate == 0 {
		mode = fmt.Sprintf("closed loop, concurrency %d", r.Concurrency)
	}
	shard := ""
	if r.Shards > 1 {
		shard = fmt.Sprintf(", shard %d/%d", r.Shard, r.Shards)
		if r.Shard < 0 {
			shard = fmt.Sprintf(", %d parts of %d shards", r.Parts, r.Shards)
		}
	}
	p("target\t%s (%s%s, client %s)", r.Target, mode, shard, r.Client)
	p("pool\t%d envelopes, %s %s", r.PoolEntries, fmtBytes(r.PoolBytes), r.Encoding)
	p("duration\t%s measured (+%s warm-up: %d sent, %d dropped)", fmtDur(r.Elapsed), r.Warmup, r.WarmupSent, r.WarmupDropped)
	p("scheduled\t%d", r.Scheduled)
	p("sent\t%d\tachieved %s/s", r.Sent, fmtRate(r.AchievedRate()))
	p("2xx\t%d", r.OK)
	if len(r.ByStatus) > 0 {
		codes := slices.Sorted(maps.Keys(r.ByStatus))
		var parts []string
		for _, c := range codes {
			parts = append(parts, fmt.Sprintf("%d: %d", c, r.ByStatus[c]))
		}
		p("by status\t%s", strings.Join(parts, ", "))
	}
	var errParts []string
	for _, c := range errorClasses {
		if n := r.Errors[c]; n > 0 {
			errParts = append(errParts, fmt.Sprintf("%s: %d", c, n))
		}
	}
	if len(errParts) == 0 {
		errParts = []string{"0"}
	}
	p("errors\t%s", strings.Join(errParts, ", "))
	for _, c := range errorClasses {
		if msg := r.ErrorSamples[c]; msg != "" {
			p("  e.g. %s\t%.160s", c, msg)
		}
	}
	dropPct := 0.0
	if r.Scheduled > 0 {
		dropPct = 100 * float64(r.Dropped) / float64(r.Scheduled)
	}
	p("dropped\t%d (%.3f%%)\tpeak in flight %d, %d workers", r.Dropped, dropPct, r.PeakInflight, r.Workers)
	if r.Abandoned > 0 {
		p("abandoned\t%d", r.Abandoned)
	}
	if devs := r.WindowDeviations(); len(devs) > 0 {
		worst := 0.0
		for _, d := range devs {
			if abs(d) > abs(worst) {
				worst = d
			}
		}
		p("1 s windows\t%d full, worst %+.2f%% from target", len(devs), 100*worst)
	}
	kinds := slices.Sorted(maps.Keys(r.ByKind))
	var kp []string
	for _, k := range kinds {
		kp = append(kp, fmt.Sprintf("%s: %d (%d ok)", k, r.ByKind[k], r.OKByKind[k]))
	}
	p("by kind\t%s", strings.Join(kp, ", "))
	p("")
	p("\tp50\tp90\tp99\tp99.9\tp99.99\tmax\tcount")
	for _, m := range []Metric{MetricLatency, MetricService, MetricLag} {
		s := r.Sketch(m)
		p("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d", m, fmtDur(s.Quantile(0.5)), fmtDur(s.Quantile(0.9)), fmtDur(s.Quantile(0.99)),
			fmtDur(s.Quantile(0.999)), fmtDur(s.Quantile(0.9999)), fmtDur(s.Max()), s.Count())
	}
	if r.Invalid {
		p("")
		for _, why := range r.InvalidReasons {
			p("INVALID\t%s", why)
		}
	}
	return tw.Flush()
}

func abs(f float64) float64 { return max(f, -f) }

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.3fs", d.Seconds())
}

func fmtRate(r float64) string { return fmt.Sprintf("%.1f", r) }

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
