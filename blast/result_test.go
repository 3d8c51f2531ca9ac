package blast

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/compression"
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
