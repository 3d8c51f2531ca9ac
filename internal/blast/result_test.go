package blast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
)

// fakeOutcomes records n synthetic outcomes into each recorder (recs[i]
// belongs to runners[i]), as if released and sent by each runner.
func fakeOutcomes(runners []*runner, seed uint64, n int, into ...*recorder) {
	r := runners[0]
	rnd := rand.New(rand.NewPCG(seed, 9))
	for i := range n {
		intended := time.Duration(rnd.IntN(int(5 * time.Second)))
		sent := intended + time.Duration(rnd.ExpFloat64()*float64(300*time.Microsecond))
		done := sent + time.Duration(rnd.ExpFloat64()*float64(2*time.Millisecond))
		status, err := 200, error(nil)
		switch rnd.IntN(10) {
		case 0:
			status = 429
		case 1:
			err = errTimeoutForTest
		}
		j := job{k: int64(i), intended: intended, warm: i%17 == 0}
		if rnd.IntN(50) == 0 {
			for x, rec := range into {
				rec.drop(runners[x], j)
			}
			continue
		}
		for x, rec := range into {
			if !j.warm {
				runners[x].started.Add(1)
			}
			rec.record(runners[x], j, uint8(i%len(r.kinds)), sent, done, status, err)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

var errTimeoutForTest error = timeoutErr{}

func newFakeRunner(t *testing.T) *runner {
	p := testPool(t, 20, compression.Identity)
	cfg, u, err := Config{Target: "http://127.0.0.1:1", Pool: p, Rate: 1000, Duration: 5 * time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: cfg, clock: newRealClock()}
	r.prepare(u.String())
	return r
}

// Merging two results gives exactly the counters, sketches and windows of
// one result that saw the union of their outcomes.
func TestMergeEqualsUnion(t *testing.T) {
	ra, rb, ru := newFakeRunner(t), newFakeRunner(t), newFakeRunner(t)
	ua, ub := ru.newRecorder(), ru.newRecorder()
	fakeOutcomes([]*runner{ra, ru}, 1, 3000, ra.newRecorder(), ua)
	fakeOutcomes([]*runner{rb, ru}, 2, 5000, rb.newRecorder(), ub)
	a, b, union := ra.collect(), rb.collect(), ru.collect()
	for _, r := range []*Result{a, b, union} {
		r.Elapsed = 5 * time.Second
		r.finish()
	}
	// a and b as the two shards of one schedule (Merge refuses two runs of
	// one shard).
	a.Shard, a.Shards, a.ShardsCovered = 0, 2, []int{0}
	b.Shard, b.Shards, b.ShardsCovered = 1, 2, []int{1}
	// Through JSON, as blast merge reads them.
	var parts []*Result
	for _, r := range []*Result{a, b} {
		buf, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Result
		if err := json.Unmarshal(buf, &back); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, &back)
	}
	m, err := Merge(parts...)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sent != union.Sent || m.OK != union.OK || m.Dropped != union.Dropped || m.Scheduled != union.Scheduled ||
		m.WarmupSent != union.WarmupSent || m.WarmupOK != union.WarmupOK || m.WarmupDropped != union.WarmupDropped {
		t.Fatalf("merged counters %+v\nunion %+v", m, union)
	}
	if union.Sent < 7000 || union.Dropped == 0 || union.Errors[ClassTimeout] == 0 || union.ByStatus[429] == 0 {
		t.Fatalf("test data too thin: %+v", union)
	}
	for _, mp := range []struct{ a, b map[string]int64 }{{m.Errors, union.Errors}} {
		for k, v := range mp.b {
			if mp.a[k] != v {
				t.Errorf("errors[%s] %d, want %d", k, mp.a[k], v)
			}
		}
	}
	for k, v := range union.ByStatus {
		if m.ByStatus[k] != v {
			t.Errorf("status %d: %d, want %d", k, m.ByStatus[k], v)
		}
	}
	for k, v := range union.ByKind {
		if m.ByKind[k] != v || m.OKByKind[k] != union.OKByKind[k] {
			t.Errorf("kind %s: %d/%d, want %d/%d", k, m.ByKind[k], m.OKByKind[k], v, union.OKByKind[k])
		}
	}
	for _, metric := range []Metric{MetricLatency, MetricLag, MetricService} {
		if !m.Sketch(metric).Equal(union.Sketch(metric)) {
			t.Errorf("%s: merged sketch differs from the union's", metric)
		}
	}
	if len(m.Windows) != len(union.Windows) {
		t.Fatalf("%d windows, want %d", len(m.Windows), len(union.Windows))
	}
	for i, w := range union.Windows {
		mw := m.Windows[i]
		if mw.Sent != w.Sent || mw.OK != w.OK || mw.Errors != w.Errors || mw.Dropped != w.Dropped || !mw.Latency.Equal(w.Latency) {
			t.Errorf("window %d differs", i)
		}
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	r := newFakeRunner(t)
	fakeOutcomes([]*runner{r}, 3, 2000, r.newRecorder())
	res := r.collect()
	res.Elapsed = 5 * time.Second
	res.finish()
	a, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(a, &back); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("round trip changed the JSON:\n%s\n%s", a, b)
	}
	if len(a) > 100<<10 {
		t.Errorf("result JSON %d bytes for a 5 s run", len(a))
	}
	var sum strings.Builder
	if err := back.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sent", "2xx", "429:", "timeout:", "dropped", "latency", "service", "lag", "p99.9", "by kind"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
}

func TestMergeRejects(t *testing.T) {
	r := newFakeRunner(t)
	fakeOutcomes([]*runner{r}, 4, 100, r.newRecorder())
	a := r.collect()
	b := *a
	b.Rate = 5
	if _, err := Merge(a, &b); err == nil {
		t.Error("merged different rates")
	}
	c := *a
	c.Schema = 99
	if _, err := Merge(a, &c); err == nil {
		t.Error("merged another schema")
	}
	if _, err := Merge(); err == nil {
		t.Error("merged nothing")
	}
}

// A result file with windows not numbered 0, 1, 2, … is rejected: Merge
// indexes windows by second (a negative one crashed blast merge).
func TestParseResultRejectsBadWindows(t *testing.T) {
	r := newFakeRunner(t)
	fakeOutcomes([]*runner{r}, 5, 300, r.newRecorder())
	res := r.collect()
	res.Elapsed = 5 * time.Second
	res.finish()
	good, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseResult(good); err != nil {
		t.Fatalf("a written result does not parse: %v", err)
	}
	for _, second := range []int{-3, 1 << 40, 7} {
		bad := *res
		bad.Windows = slices.Clone(res.Windows)
		bad.Windows[1].Second = second
		b, err := json.Marshal(&bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseResult(b); err == nil {
			t.Errorf("window second %d accepted", second)
		}
	}
	for _, b := range []string{`{}`, `{"schema":1}`, `[]`, `{"schema":1,"latency":null}`} {
		if _, err := ParseResult([]byte(b)); err == nil {
			t.Errorf("accepted %s", b)
		}
	}
}

// FuzzParseResult: whatever parses can be merged (alone: with itself Merge
// refuses it), summarized and written again without a panic and with
// bounded memory.
func FuzzParseResult(f *testing.F) {
	s := NewSketch()
	s.Add(time.Millisecond)
	sk, _ := json.Marshal(s)
	f.Add([]byte(`{"schema":1,"rate":100,"shards":1,"latency":` + string(sk) + `,"lag":` + string(sk) + `,"service":` + string(sk) +
		`,"windows":[{"second":0,"sent":3,"latency":` + string(sk) + `}],"by_status":{"200":3},"errors":{"timeout":1}}`))
	f.Add([]byte(`{"schema":1,"windows":[{"second":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseResult(b)
		if err != nil {
			return
		}
		if _, err := Merge(r, r); err == nil {
			t.Fatal("merged a result with itself")
		}
		m, err := Merge(r)
		if err != nil {
			return
		}
		if err := m.WriteSummary(io.Discard); err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	})
}

// finish marks a run invalid above 0.1% drops, 5 ms lag p99 or 1% of
// requests unanswered, or when no request succeeded, and the summary says
// so; answers of any status are answers.
func TestValidity(t *testing.T) {
	for _, tc := range []struct {
		name             string
		scheduled, drops int64
		failed           int64            // sent requests without a 2xx
		noAnswer         map[string]int64 // of those, the ones without an answer
		lag              time.Duration    // every request's lag
		invalid          string           // substring of the reason; "" = valid
	}{
		{"clean", 10000, 0, 0, nil, time.Millisecond, ""},
		{"drops at the limit", 10000, 10, 0, nil, time.Millisecond, ""},
		{"drops over the limit", 10000, 11, 0, nil, time.Millisecond, "dropped 11 of 10000"},
		{"lag at the limit", 10000, 0, 0, nil, MaxLagP99 - MaxLagP99/50, ""}, // sketch bins are ±1%
		{"lag over the limit", 10000, 0, 0, nil, MaxLagP99 + MaxLagP99/20, "schedule lag p99"},
		{"all but one answered with an error status", 10000, 0, 9999, nil, time.Millisecond, ""},
		{"unanswered at the limit", 10000, 0, 100, map[string]int64{ClassTimeout: 100}, time.Millisecond, ""},
		{"unanswered over the limit", 10000, 0, 101, map[string]int64{ClassTimeout: 101}, time.Millisecond,
			"101 of 10000 requests (1.0% > 1%) got no answer (timeout 101): the latency percentiles cover only the 9899 answered"},
		{"target killed mid-run", 2000, 0, 1248, map[string]int64{ClassRefused: 1235, ClassReset: 13}, time.Millisecond,
			"1248 of 2000 requests (62.4% > 1%) got no answer (refused 1235, reset 13)"},
		{"none succeeded", 10000, 0, 10000, nil, time.Millisecond, "no request succeeded: none of the 10000 sent"},
		{"one sent, it failed", 1, 0, 1, map[string]int64{ClassRefused: 1}, time.Millisecond, "no request succeeded: none of the 1 sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Scheduled: tc.scheduled, Dropped: tc.drops, Sent: tc.scheduled - tc.drops, Rate: 1000,
				Latency: NewSketch(), Lag: NewSketch(), Service: NewSketch()}
			r.OK = r.Sent - tc.failed
			r.Errors = tc.noAnswer
			for range r.Sent {
				r.Lag.Add(tc.lag)
			}
			r.finish()
			var sum strings.Builder
			if err := r.WriteSummary(&sum); err != nil {
				t.Fatal(err)
			}
			if tc.invalid == "" {
				if r.Invalid || strings.Contains(sum.String(), "INVALID") {
					t.Fatalf("marked invalid: %q\n%s", r.InvalidReasons, sum.String())
				}
				return
			}
			if !r.Invalid || len(r.InvalidReasons) != 1 || !strings.Contains(r.InvalidReasons[0], tc.invalid) {
				t.Fatalf("invalid %v, reasons %q; want one containing %q", r.Invalid, r.InvalidReasons, tc.invalid)
			}
			if !strings.Contains(sum.String(), "INVALID") || !strings.Contains(sum.String(), tc.invalid) {
				t.Fatalf("summary does not say INVALID:\n%s", sum.String())
			}
		})
	}
}

// WindowDeviations covers the full measured seconds only: not the warm-up,
// not the last partial second; a shard is held to its share of the rate.
func TestWindowDeviations(t *testing.T) {
	r := &Result{Rate: 1000, Shards: 2, Shard: 1, Warmup: time.Second, Elapsed: 3500 * time.Millisecond}
	for i, sent := range []int64{100, 500, 505, 490, 250} { // warm-up, 3 full seconds, partial
		r.Windows = append(r.Windows, Window{Second: i, Sent: sent})
	}
	got := r.WindowDeviations()
	want := []float64{0, 0.01, -0.02}
	if len(got) != len(want) {
		t.Fatalf("deviations %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("deviations %v, want %v", got, want)
		}
	}
	r.Rate = 0 // closed loop: no target to deviate from
	if d := r.WindowDeviations(); d != nil {
		t.Fatalf("closed loop deviations %v", d)
	}
}

// mergePart is one input of a TestMergeRefuses case: the base result with
// set's fields replaced; older drops the fields a blast before issue 9 did
// not write (the schedule's identity).
type mergePart struct {
	set   map[string]any
	older bool
}

// Merge refuses inputs that would count slots twice or add up different
// schedules, and still merges the shards of one schedule, also from files
// written by an older blast. Inputs go through JSON, as blast merge reads
// them.
func TestMergeRefuses(t *testing.T) {
	r := newFakeRunner(t)
	fakeOutcomes([]*runner{r}, 6, 300, r.newRecorder())
	res := r.collect()
	res.Elapsed = 5 * time.Second
	res.finish()
	base, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	build := func(t *testing.T, i int, p mergePart) *Result {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		m["run_ids"] = []string{fmt.Sprintf("run-%d", i)} // each part its own run unless set says otherwise
		maps.Copy(m, p.set)
		if p.older {
			for _, k := range []string{"run_ids", "shards_covered", "seed", "duration_ns", "count", "pool_digest"} {
				delete(m, k)
			}
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out, err := ParseResult(b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	s0 := map[string]any{"shard": 0, "shards": 2}
	s1 := map[string]any{"shard": 1, "shards": 2}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := maps.Clone(m)
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	merged01 := map[string]any{"shard": -1, "shards": 2, "parts": 2, "shards_covered": []int{0, 1}, "run_ids": []string{"p", "q"}}
	for _, tc := range []struct {
		name  string
		parts []mergePart
		want  string // substring of the error; "" = merges
	}{
		{"the two shards", []mergePart{{set: s0}, {set: s1}}, ""},
		{"the two shards, older files", []mergePart{{set: s0, older: true}, {set: s1, older: true}}, ""},
		{"one result alone", []mergePart{{}}, ""},
		{"an older merge alone", []mergePart{{set: with(merged01, "shards_covered", nil), older: true}}, ""},
		{"a merge and a third shard", []mergePart{{set: with(merged01, "shards", 3)}, {set: map[string]any{"shard": 2, "shards": 3}}}, ""},

		{"the same run twice", []mergePart{{set: with(s0, "run_ids", []string{"x"})}, {set: with(s0, "run_ids", []string{"x"})}}, "same run"},
		{"the unsharded run twice", []mergePart{{set: map[string]any{"run_ids": []string{"x"}}}, {set: map[string]any{"run_ids": []string{"x"}}}}, "same run"},
		{"two runs of the unsharded schedule", []mergePart{{}, {}}, "both cover shard 0/1"},
		{"two older runs of the unsharded schedule", []mergePart{{older: true}, {older: true}}, "both cover shard 0/1"},
		{"two runs of one shard", []mergePart{{set: s1}, {set: s0}, {set: s1}}, "both cover shard 1/2"},
		{"a merge and one of its parts", []mergePart{{set: merged01}, {set: s1}}, "both cover shard 1/2"},
		{"a merge and a run it holds", []mergePart{{set: merged01}, {set: with(s0, "run_ids", []string{"q"}, "shard", 1)}}, "same run"},
		{"an older merge and a shard", []mergePart{{set: with(merged01, "shards_covered", nil), older: true}, {set: s1, older: true}}, "older blast"},
		{"an older file and a newer one", []mergePart{{set: s0, older: true}, {set: s1}}, "older blast"},

		{"another seed", []mergePart{{set: s0}, {set: with(s1, "seed", 2)}}, "seed"},
		{"another rate", []mergePart{{set: s0}, {set: with(s1, "rate", 500)}}, "rate"},
		{"another shard count", []mergePart{{set: s0}, {set: map[string]any{"shard": 1, "shards": 3}}}, "shards"},
		{"another duration", []mergePart{{set: s0}, {set: with(s1, "duration_ns", 6e9)}}, "duration"},
		{"another count", []mergePart{{set: s0}, {set: with(s1, "count", 5000)}}, "count"},
		{"another warm-up", []mergePart{{set: s0}, {set: with(s1, "warmup_ns", 1e9)}}, "warm-up"},
		{"another pool", []mergePart{{set: s0}, {set: with(s1, "pool_digest", "0123456789abcdef")}}, "pool"},
		{"another pool size", []mergePart{{set: s0}, {set: with(s1, "pool_entries", 999)}}, "pool"},
		{"another encoding", []mergePart{{set: s0}, {set: with(s1, "encoding", "gzip")}}, "encoding"},
		{"another rate, older files", []mergePart{{set: s0, older: true}, {set: with(s1, "rate", 500), older: true}}, "rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs []*Result
			for i, p := range tc.parts {
				rs = append(rs, build(t, i, p))
			}
			m, err := Merge(rs...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if want := int64(len(rs)) * res.Sent; m.Sent != want {
					t.Fatalf("merged sent %d, want %d", m.Sent, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

// A part whose counters or sketches break what Result documents is refused
// by name and field, whatever the other parts (issue 33: a hand-edited
// part with sent negative, ok above sent or 2^63−1 merged into "sent
// −9223372036854775409 … achieved −4.6e18/s", valid, exit 0).
func TestMergeRefusesDamagedParts(t *testing.T) {
	r := newFakeRunner(t)
	fakeOutcomes([]*runner{r}, 6, 300, r.newRecorder())
	res := r.collect()
	res.Elapsed = 5 * time.Second
	res.Shards = 2
	res.finish()
	base, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.checkInvariants(); err != nil || res.Sent == 0 || res.OK == 0 || len(res.Windows) == 0 {
		t.Fatalf("the undamaged part: %v (sent %d ok %d, %d windows)", err, res.Sent, res.OK, len(res.Windows))
	}
	dir := t.TempDir()
	write := func(t *testing.T, name string, edit func(m map[string]any)) string {
		t.Helper()
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(base))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		m["run_ids"] = []string{name}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	n := func(v int64) json.Number { return json.Number(fmt.Sprint(v)) }
	good := write(t, "good", func(m map[string]any) { m["shard"], m["shards_covered"] = 0, []int{0} })
	empty, _ := json.Marshal(NewSketch())
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		want string // after "<file> is damaged: "
	}{
		{"sent negative", func(m map[string]any) { m["sent"] = n(-9223372036854775409) }, "sent -9223372036854775409: want 0..1000000000000000"},
		{"sent 2^63-1", func(m map[string]any) { m["sent"], m["scheduled"] = n(math.MaxInt64), n(math.MaxInt64) }, "scheduled 9223372036854775807: want 0.."},
		{"ok above sent", func(m map[string]any) { m["ok"] = n(res.Sent + 5) }, fmt.Sprintf("ok %d != the 2xx of by_status %d", res.Sent+5, res.OK)},
		{"scheduled not sent + dropped", func(m map[string]any) { m["scheduled"] = n(res.Scheduled + 1) }, fmt.Sprintf("sent %d + dropped %d != scheduled %d", res.Sent, res.Dropped, res.Scheduled+1)},
		{"dropped negative, scheduled to match", func(m map[string]any) { m["dropped"], m["scheduled"] = n(-5), n(res.Sent-5) }, "dropped -5: want 0.."},
		{"a status count negative", func(m map[string]any) { m["by_status"] = map[string]any{"200": n(-3)} }, "by_status[200] -3"},
		{"a status out of range", func(m map[string]any) { m["by_status"] = map[string]any{"700": n(res.Sent)} }, "by_status: status 700"},
		{"an unknown error class", func(m map[string]any) { m["errors"] = map[string]any{"gremlins": n(1)} }, `errors: class "gremlins"`},
		{"more sent than answered and failed", func(m map[string]any) { m["sent"], m["scheduled"] = n(res.Sent+1), n(res.Scheduled+1) }, fmt.Sprintf("sent %d != by_status", res.Sent+1)},
		{"ok by kind above ok", func(m map[string]any) { m["ok_by_kind"] = map[string]any{"error": n(res.OK + 1)} }, "ok_by_kind adds up to"},
		{"a lag sketch that lost its requests", func(m map[string]any) { m["lag"] = json.RawMessage(empty) }, "lag sketch counts 0 requests"},
		{"a window sent more", func(m map[string]any) {
			w := m["windows"].([]any)[0].(map[string]any)
			w["sent"], w["latency"] = n(1e6), nil
		}, "windows' sent adds up to"},
		{"a window sent negative", func(m map[string]any) { m["windows"].([]any)[0].(map[string]any)["sent"] = n(-1) }, "windows[0].sent -1"},
		{"elapsed negative", func(m map[string]any) { m["elapsed_ns"] = n(-1) }, "elapsed_ns -1"},
		{"a rate beyond the schedule", func(m map[string]any) { m["rate"] = 1e300 }, "rate 1e+300: want 0 (closed loop) to 10000000"},
		{"warm-up ok above warm-up sent", func(m map[string]any) { m["warmup_ok"] = n(res.WarmupSent + 1) }, "warmup_ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := write(t, strings.ReplaceAll(tc.name, " ", "-"), func(m map[string]any) {
				m["shard"], m["shards_covered"] = 1, []int{1}
				tc.edit(m)
			})
			for _, files := range [][]string{{bad}, {good, bad}, {bad, good}} {
				m, err := MergeFiles(files...)
				if want := bad + " is damaged: " + tc.want; err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("merge %v: %v (sent %v), want an error with %q", files, err, m, want)
				}
			}
		})
	}
	if m, err := MergeFiles(good, write(t, "other", func(m map[string]any) { m["shard"], m["shards_covered"] = 1, []int{1} })); err != nil || m.Sent != 2*res.Sent {
		t.Fatalf("the undamaged parts: %v", err)
	}
	// Parts each within the bounds, together above them: refused rather
	// than added up past int64.
	huge := func(name string, shard int) string {
		return write(t, name, func(m map[string]any) {
			m["shard"], m["shards_covered"], m["shards"] = shard, []int{shard}, 3
			m["dropped"], m["scheduled"], m["windows"] = n(MaxCount/2), n(res.Sent+MaxCount/2), []any{}
		})
	}
	if _, err := MergeFiles(huge("h0", 0), huge("h1", 1), huge("h2", 2)); err == nil || !strings.Contains(err.Error(), "together count more than 1000000000000000") {
		t.Fatalf("merge of parts above MaxCount together: %v", err)
	}
}
