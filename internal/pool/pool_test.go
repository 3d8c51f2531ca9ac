package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/canary"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/projects"
)

var testNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func testProjects(t testing.TB, n int) []projects.Project {
	t.Helper()
	ps, err := projects.Generate(7, n)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func build(t testing.TB, o Options) *Pool {
	t.Helper()
	if o.Projects == nil {
		o.Projects = testProjects(t, 20)
	}
	if o.Now.IsZero() {
		o.Now = testNow
	}
	p, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// mixedPool is the default mix, 2000 entries, built once per test binary
// run and shared by parallel tests (which only read it).
var mixedPool struct {
	sync.Mutex
	p *Pool
}

func mixed(t testing.TB) *Pool {
	mixedPool.Lock()
	defer mixedPool.Unlock()
	if mixedPool.p == nil {
		mixedPool.p = build(t, Options{Seed: 11, Size: 2000})
	}
	return mixedPool.p
}

func TestDeterminism(t *testing.T) {
	o := Options{Seed: 5, Size: 800, Projects: testProjects(t, 30), Now: testNow}
	a := build(t, o)
	prev := runtime.GOMAXPROCS(1)
	b := build(t, o)
	runtime.GOMAXPROCS(max(4, prev))
	c := build(t, o)
	runtime.GOMAXPROCS(prev)
	if a.Hash() != b.Hash() || a.Hash() != c.Hash() {
		t.Fatalf("hash differs across builds/GOMAXPROCS: %s %s %s", a.Hash(), b.Hash(), c.Hash())
	}
	for i := range a.Entries {
		if !bytes.Equal(a.Raw(i), b.Raw(i)) {
			t.Fatalf("entry %d differs", i)
		}
	}
	o2 := o
	o2.Seed = 6
	if d := build(t, o2); d.Hash() == a.Hash() {
		t.Fatal("different seed gave the same pool")
	}
	o3 := o
	o3.Now = testNow.Add(time.Hour)
	if d := build(t, o3); d.Hash() == a.Hash() {
		t.Fatal("different Now gave the same pool")
	}
	// A prefix does not depend on the pool size (entry i is a function of (seed, i)),
	// except where a check-in pair would straddle the end.
	o4 := o
	o4.Size = 500
	d := build(t, o4)
	for i := 0; i < 499; i++ {
		if !bytes.Equal(d.Raw(i), a.Raw(i)) {
			t.Fatalf("entry %d of a smaller pool differs", i)
		}
	}
}

func TestEveryEntryParses(t *testing.T) {
	t.Parallel() // CPU-bound; reads the shared pool only
	p := mixed(t)
	var s envelope.Summary
	wantTypes := map[Kind][]string{
		KindError: {"event"}, KindTransaction: {"transaction"}, KindSession: {"session", "sessions"}, KindCheckIn: {"check_in"}, KindLog: {"log"},
	}
	sentAt := testNow.Format("2006-01-02T15:04:05.000Z")
	for i := 0; i < len(p.Entries); i += checkStride {
		e := p.Entries[i]
		raw := p.Raw(i)
		if len(raw) != e.RawSize {
			t.Fatalf("%d: RawSize %d, raw %d", i, e.RawSize, len(raw))
		}
		env, err := envelope.Parse(raw)
		if err != nil {
			t.Fatalf("%d (%s): %v", i, e.Kind, err)
		}
		if err := envelope.Scan(raw, &s); err != nil {
			t.Fatalf("%d: scan: %v", i, err)
		}
		if len(s.Items) != len(env.Items) {
			t.Fatalf("%d: scan found %d items, parse %d", i, len(s.Items), len(env.Items))
		}
		if env.EventID != e.EventID || env.SentAt != sentAt || env.DSN != "" {
			t.Fatalf("%d: header event_id %q (entry %q) sent_at %q dsn %q", i, env.EventID, e.EventID, env.SentAt, env.DSN)
		}
		if (e.Kind == KindError || e.Kind == KindTransaction) != (e.EventID != "") {
			t.Fatalf("%d: %s with event id %q", i, e.Kind, e.EventID)
		}
		var hdr map[string]any
		if err := json.Unmarshal(env.Header, &hdr); err != nil {
			t.Fatalf("%d: header: %v", i, err)
		}
		items := 0
		for k, it := range env.Items {
			if !contains(wantTypes[e.Kind], it.Type) {
				t.Fatalf("%d: %s envelope has item type %q", i, e.Kind, it.Type)
			}
			if string(s.Items[k].Type) != it.Type || s.Items[k].ItemCount != it.ItemCount {
				t.Fatalf("%d: scan and parse disagree on item %d", i, k)
			}
			var v map[string]any
			if err := json.Unmarshal(it.Payload, &v); err != nil {
				t.Fatalf("%d: item %d payload: %v", i, k, err)
			}
			if it.Type == "log" {
				recs := v["items"].([]any)
				if it.ItemCount != len(recs) || it.ContentType != logContentType {
					t.Fatalf("%d: log item_count %d content_type %q, %d records", i, it.ItemCount, it.ContentType, len(recs))
				}
				if len(recs) < 1 || len(recs) > 100 {
					t.Fatalf("%d: %d log records", i, len(recs))
				}
				items += len(recs)
			} else {
				items++
			}
			if id, ok := v["event_id"]; ok && id != e.EventID {
				t.Fatalf("%d: payload event_id %v, header %q", i, id, e.EventID)
			}
		}
		if items != e.Items {
			t.Fatalf("%d: Entry.Items %d, counted %d", i, e.Items, items)
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// decode parses item k of entry i as JSON.
func decode(t *testing.T, p *Pool, i, k int) map[string]any {
	t.Helper()
	env, err := envelope.Parse(p.Raw(i))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(env.Items[k].Payload, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func header(t *testing.T, p *Pool, i int) map[string]any {
	t.Helper()
	env, err := envelope.Parse(p.Raw(i))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(env.Header, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestErrorShape(t *testing.T) {
	t.Parallel() // CPU-bound; reads the shared pool only
	p := build(t, Options{Seed: 12, Size: 1200, Mix: Mix{KindError: 1}})
	seenPlatforms := map[string]bool{}
	n := 0
	for i := 0; i < len(p.Entries); i += checkStride {
		e := p.Entries[i]
		if e.Kind != KindError {
			continue
		}
		n++
		ev := decode(t, p, i, 0)
		seenPlatforms[ev["platform"].(string)] = true
		excs := ev["exception"].(map[string]any)["values"].([]any)
		if len(excs) < 1 || len(excs) > 3 {
			t.Fatalf("%d: %d exceptions", i, len(excs))
		}
		last := excs[len(excs)-1].(map[string]any)
		frames := last["stacktrace"].(map[string]any)["frames"].([]any)
		if len(frames) < 20 || len(frames) > 80 {
			t.Fatalf("%d: %d frames", i, len(frames))
		}
		inApp, lib := 0, 0
		for _, f := range frames {
			if f.(map[string]any)["in_app"] == true {
				inApp++
			} else {
				lib++
			}
		}
		if inApp == 0 || lib == 0 {
			t.Fatalf("%d: %d in-app, %d library frames", i, inApp, lib)
		}
		crumbs := ev["breadcrumbs"].(map[string]any)["values"].([]any)
		if len(crumbs) < 5 || len(crumbs) > 60 {
			t.Fatalf("%d: %d breadcrumbs", i, len(crumbs))
		}
		prev := 0.0
		for _, c := range crumbs {
			ts := c.(map[string]any)["timestamp"].(float64)
			if ts < prev || ts > ev["timestamp"].(float64) {
				t.Fatalf("%d: breadcrumb timestamps out of order", i)
			}
			prev = ts
		}
		req := ev["request"].(map[string]any)
		if req["headers"].(map[string]any)["User-Agent"] != e.UserAgent {
			t.Fatalf("%d: request User-Agent %v, entry %q", i, req["headers"].(map[string]any)["User-Agent"], e.UserAgent)
		}
		for _, k := range []string{"cookies", "query_string", "data", "url", "method"} {
			if req[k] == nil {
				t.Fatalf("%d: request without %s", i, k)
			}
		}
		for _, k := range []string{"user", "contexts", "tags", "release", "environment", "sdk", "timestamp", "level"} {
			if ev[k] == nil {
				t.Fatalf("%d: event without %s", i, k)
			}
		}
		ts := ev["timestamp"].(float64)
		if now := float64(testNow.Unix()); ts > now || ts < now-60 {
			t.Fatalf("%d: timestamp %v not in the minute before Now", i, ts)
		}
	}
	if n < 400/checkStride {
		t.Fatalf("only %d errors", n)
	}
	for _, pl := range []string{"javascript", "node", "python", "java", "go", "cocoa"} {
		if !seenPlatforms[pl] {
			t.Errorf("no %s errors", pl)
		}
	}
}

func TestSpanTrees(t *testing.T) {
	p := mixed(t)
	n := 0
	for i, e := range p.Entries {
		if e.Kind != KindTransaction {
			continue
		}
		n++
		tx := decode(t, p, i, 0)
		tr := tx["contexts"].(map[string]any)["trace"].(map[string]any)
		traceID, root := tr["trace_id"].(string), tr["span_id"].(string)
		if len(traceID) != 32 || len(root) != 16 {
			t.Fatalf("%d: trace %q span %q", i, traceID, root)
		}
		dsc := header(t, p, i)["trace"].(map[string]any)
		if dsc["trace_id"] != traceID || dsc["public_key"] != p.Options.Projects[e.Project].PublicKey {
			t.Fatalf("%d: DSC %v does not match trace %s / project key", i, dsc, traceID)
		}
		start, end := tx["start_timestamp"].(float64), tx["timestamp"].(float64)
		if !(start <= end) || end > float64(testNow.Unix()) {
			t.Fatalf("%d: transaction %v..%v", i, start, end)
		}
		type iv struct{ s, e float64 }
		times := map[string]iv{root: {start, end}}
		spans := tx["spans"].([]any)
		if len(spans) < 20 || len(spans) > 100 {
			t.Fatalf("%d: %d spans", i, len(spans))
		}
		for _, s := range spans {
			m := s.(map[string]any)
			id := m["span_id"].(string)
			if _, dup := times[id]; dup || len(id) != 16 {
				t.Fatalf("%d: bad or duplicate span id %q", i, id)
			}
			if m["trace_id"] != traceID {
				t.Fatalf("%d: span trace_id %v", i, m["trace_id"])
			}
			times[id] = iv{m["start_timestamp"].(float64), m["timestamp"].(float64)}
		}
		db := 0
		for _, s := range spans {
			m := s.(map[string]any)
			me := times[m["span_id"].(string)]
			par, ok := times[m["parent_span_id"].(string)]
			if !ok {
				t.Fatalf("%d: span %v has unknown parent %v", i, m["span_id"], m["parent_span_id"])
			}
			if !(me.s <= me.e && par.s <= me.s && me.e <= par.e) {
				t.Fatalf("%d: span %v [%v,%v] not within parent [%v,%v]", i, m["span_id"], me.s, me.e, par.s, par.e)
			}
			if op := m["op"].(string); op == "db" || op == "db.sql.query" {
				db++
				if !strings.Contains(m["description"].(string), "%s") && !strings.Contains(m["description"].(string), "$1") && !strings.Contains(m["description"].(string), "?") {
					t.Fatalf("%d: SQL without placeholders: %v", i, m["description"])
				}
			}
		}
		if db == 0 {
			t.Logf("%d: transaction without db spans", i)
		}
		if ms, ok := tx["measurements"].(map[string]any); ok {
			for k, v := range ms {
				m := v.(map[string]any)
				if _, ok := m["value"].(float64); !ok || m["unit"] == nil {
					t.Fatalf("%d: measurement %s = %v", i, k, v)
				}
			}
		}
	}
	if n < 250 {
		t.Fatalf("only %d transactions", n)
	}
}

func TestCheckInPairs(t *testing.T) {
	p := build(t, Options{Seed: 3, Size: 1001, Mix: Mix{KindCheckIn: 1, KindError: 1}})
	pairs, lone := 0, 0
	for i := 0; i < len(p.Entries); i++ {
		if p.Entries[i].Kind != KindCheckIn {
			continue
		}
		a := decode(t, p, i, 0)
		if a["status"] != "in_progress" {
			if i != len(p.Entries)-1 {
				t.Fatalf("%d: check-in %v without in_progress before it", i, a["status"])
			}
			lone++
			continue
		}
		if i+1 >= len(p.Entries) || p.Entries[i+1].Kind != KindCheckIn {
			t.Fatalf("%d: in_progress not followed by a check-in", i)
		}
		b := decode(t, p, i+1, 0)
		if b["check_in_id"] != a["check_in_id"] || b["monitor_slug"] != a["monitor_slug"] || p.Entries[i].Project != p.Entries[i+1].Project {
			t.Fatalf("%d: pair does not match: %v / %v", i, a, b)
		}
		if st := b["status"]; st != "ok" && st != "error" {
			t.Fatalf("%d: final status %v", i, st)
		}
		if d, _ := b["duration"].(float64); d <= 0 {
			t.Fatalf("%d: final without duration", i)
		}
		pairs++
		i++
	}
	if pairs < 200 || lone > 1 {
		t.Fatalf("%d pairs, %d lone", pairs, lone)
	}
}

func TestSessionWindows(t *testing.T) {
	p := mixed(t)
	now := testNow
	parse := func(s any) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s.(string))
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	single, agg := 0, 0
	for i, e := range p.Entries {
		if e.Kind != KindSession {
			continue
		}
		env, _ := envelope.Parse(p.Raw(i))
		for k, it := range env.Items {
			v := decode(t, p, i, k)
			attrs := v["attrs"].(map[string]any)
			if attrs["release"] == "" || attrs["user_agent"] != e.UserAgent {
				t.Fatalf("%d: attrs %v", i, attrs)
			}
			if it.Type == "session" {
				single++
				st, ts := parse(v["started"]), parse(v["timestamp"])
				if st.After(ts) || ts.After(now) || now.Sub(st) > 5*24*time.Hour {
					t.Fatalf("%d: session %v..%v outside window (now %v)", i, st, ts, now)
				}
				if v["init"] == true && v["seq"].(float64) != 0 {
					t.Fatalf("%d: init with seq %v", i, v["seq"])
				}
				switch v["status"] {
				case "ok", "exited", "errored", "crashed", "abnormal":
				default:
					t.Fatalf("%d: status %v", i, v["status"])
				}
				continue
			}
			agg++
			for _, b := range v["aggregates"].([]any) {
				st := parse(b.(map[string]any)["started"])
				if st.Second() != 0 || st.After(now) || now.Sub(st) > time.Hour {
					t.Fatalf("%d: bucket %v", i, st)
				}
			}
		}
	}
	if single < 100 || agg < 20 {
		t.Fatalf("%d session updates, %d aggregates", single, agg)
	}
}

// TestCanaries checks, with the same scanner fake-upstream uses, that every
// canary kind is planted exactly once in every envelope of the kind its
// Where names, with this envelope's index, and shows as leaked before Relay.
func TestCanaries(t *testing.T) {
	p := mixed(t)
	want := map[Kind][]canary.Kind{}
	for _, k := range canary.Kinds() {
		w := k.Where
		switch {
		case strings.HasPrefix(w, "error/transaction "):
			want[KindError] = append(want[KindError], k)
			want[KindTransaction] = append(want[KindTransaction], k)
		case strings.HasPrefix(w, "error "):
			want[KindError] = append(want[KindError], k)
		case strings.HasPrefix(w, "transaction "):
			want[KindTransaction] = append(want[KindTransaction], k)
		case strings.HasPrefix(w, "log "):
			want[KindLog] = append(want[KindLog], k)
		default:
			t.Fatalf("canary %s: Where %q names no kind pool builds", k.Name, w)
		}
	}
	for i, e := range p.Entries {
		found := map[string]int{}
		canary.Scan(p.Raw(i), func(f canary.Finding) {
			if f.Index != uint64(i) {
				t.Fatalf("%d: canary %s with index %d", i, f.Kind.Name, f.Index)
			}
			if f.Leaked != (f.Kind.Expect != canary.Kept) {
				t.Fatalf("%d: canary %s Leaked=%v before scrubbing", i, f.Kind.Name, f.Leaked)
			}
			found[f.Kind.Name]++
		})
		for _, k := range want[e.Kind] {
			if found[k.Name] != 1 {
				t.Fatalf("%d (%s): canary %s found %d times", i, e.Kind, k.Name, found[k.Name])
			}
			delete(found, k.Name)
		}
		if len(found) > 0 {
			t.Fatalf("%d (%s): unexpected canaries %v", i, e.Kind, found)
		}
	}
}

// TestCanaryPlaces checks the JSON paths of the canaries in error events,
// transactions and logs against canary.Kind.Where.
func TestCanaryPlaces(t *testing.T) {
	t.Parallel() // CPU-bound; reads the shared pool only
	p := mixed(t)
	byName := map[string]canary.Kind{}
	for _, k := range canary.Kinds() {
		byName[k.Name] = k
	}
	val := func(name string, i int) string { return byName[name].Value(uint64(i)) }
	get := func(v any, path ...string) any {
		for _, k := range path {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		}
		return v
	}
	checked := map[Kind]bool{}
	for i := 0; i < len(p.Entries); i += checkStride {
		e := p.Entries[i]
		switch e.Kind {
		case KindError:
			ev := decode(t, p, i, 0)
			eq := map[string]any{
				"request_password":     get(ev, "request", "data", "password"),
				"authorization_header": strings.TrimPrefix(get(ev, "request", "headers", "Authorization").(string), "Bearer "),
				"api_key_header":       get(ev, "request", "headers", "X-Api-Key"),
				"session_cookie":       get(ev, "request", "cookies", "sessionid"),
				"credentials_object":   get(ev, "extra", "credentials", "user"),
				"secret_value":         strings.TrimPrefix(get(ev, "user", "username").(string), "secret-"),
				"public_note":          get(ev, "extra", "public_note"),
			}
			for name, got := range eq {
				if got != val(name, i) {
					t.Fatalf("%d: %s = %v, want %q", i, name, got, val(name, i))
				}
			}
			has := map[string]string{
				"query_password": get(ev, "request", "query_string").(string),
				"url_password":   get(ev, "extra", "db_url").(string),
				"pem_key":        get(ev, "extra", "cert").(string),
				"credit_card":    get(ev, "extra", "payment_note").(string),
				"iban":           get(ev, "extra", "iban_note").(string),
				"us_ssn":         get(ev, "extra", "ssn_note").(string),
				"logentry_card":  get(ev, "logentry", "formatted").(string),
			}
			for name, got := range has {
				if !strings.Contains(got, val(name, i)) {
					t.Fatalf("%d: %s: %q does not contain %q", i, name, got, val(name, i))
				}
			}
			if !strings.Contains(has["query_password"], "password="+val("query_password", i)) ||
				!strings.Contains(has["url_password"], ":"+val("url_password", i)+"@") ||
				!strings.HasPrefix(has["pem_key"], "-----BEGIN PRIVATE KEY-----\n"+val("pem_key", i)) {
				t.Fatalf("%d: canary context wrong: %v", i, has)
			}
			// frame vars api_key and breadcrumb data.token
			var fv, bt int
			for _, x := range get(ev, "exception", "values").([]any) {
				for _, f := range get(x, "stacktrace", "frames").([]any) {
					if get(f, "vars", "api_key") == val("frame_var_api_key", i) {
						fv++
					}
				}
			}
			for _, b := range get(ev, "breadcrumbs", "values").([]any) {
				if get(b, "data", "token") == val("breadcrumb_token", i) {
					bt++
				}
			}
			if fv != 1 || bt != 1 {
				t.Fatalf("%d: frame var canaries %d, breadcrumb canaries %d", i, fv, bt)
			}
		case KindTransaction:
			tx := decode(t, p, i, 0)
			n := 0
			for _, s := range get(tx, "spans").([]any) {
				if get(s, "data", "password") == val("span_data_password", i) {
					n++
				}
			}
			if n != 1 || get(tx, "extra", "public_note") != val("public_note", i) {
				t.Fatalf("%d: span canaries %d, public_note %v", i, n, get(tx, "extra", "public_note"))
			}
		case KindLog:
			lg := decode(t, p, i, 0)
			var body, attr int
			for _, r := range get(lg, "items").([]any) {
				if strings.Contains(get(r, "body").(string), val("log_body_email", i)) {
					body++
				}
				if get(r, "attributes", "password", "value") == val("log_attribute_password", i) {
					attr++
				}
			}
			if body != 1 || attr != 1 {
				t.Fatalf("%d: log body canaries %d, attribute canaries %d", i, body, attr)
			}
		default:
			continue
		}
		checked[e.Kind] = true
	}
	if len(checked) != 3 {
		t.Fatalf("checked kinds %v", checked)
	}
}

func TestMixProportions(t *testing.T) {
	t.Parallel() // CPU-bound; reads the shared pool only
	size := 100_000
	m, err := ParseMix(DefaultMix)
	if err != nil {
		t.Fatal(err)
	}
	// The plan decides kinds; check its proportions on a large pool, and
	// that Build follows it on a smaller one.
	o := Options{Seed: 21, Size: size, Mix: m, Projects: testProjects(t, 3), Now: testNow}
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	got := map[Kind]int{}
	for _, s := range plan(&o) {
		got[s.kind]++
	}
	small := o
	small.Size = 2000
	p := build(t, small)
	for i, s := range plan(&small) {
		if p.Entries[i].Kind != s.kind {
			t.Fatalf("entry %d is %s, planned %s", i, p.Entries[i].Kind, s.kind)
		}
	}
	for k, f := range m.Fractions() {
		share := float64(got[k]) / float64(size)
		if math.Abs(share-f) > 0.02 {
			t.Errorf("%s: share %.3f, want %.3f ± 0.02", k, share, f)
		}
	}
	st := p.Stats()
	n := 0
	for _, e := range p.Entries {
		if e.Kind == KindError {
			n++
		}
	}
	if st.Entries != small.Size || st.ByKind[KindError].Entries != n {
		t.Fatalf("stats %+v", st)
	}
	only := build(t, Options{Seed: 1, Size: 300, Mix: Mix{KindError: 1}})
	for i, e := range only.Entries {
		if e.Kind != KindError {
			t.Fatalf("errors=1: entry %d is %s", i, e.Kind)
		}
	}
	onlyCheckIns := build(t, Options{Seed: 1, Size: 300, Mix: Mix{KindCheckIn: 1}})
	for i, e := range onlyCheckIns.Entries {
		if e.Kind != KindCheckIn {
			t.Fatalf("checkins=1: entry %d is %s", i, e.Kind)
		}
	}
}

func TestParseMix(t *testing.T) {
	good := []struct {
		in   string
		want Mix
	}{
		{"errors=1", Mix{KindError: 1}},
		{DefaultMix, Mix{KindError: 3, KindTransaction: 2, KindSession: 2, KindCheckIn: 1, KindLog: 2}},
		{" logs = 0.5 , sessions=0 ", Mix{KindLog: 0.5, KindSession: 0}},
	}
	for _, c := range good {
		m, err := ParseMix(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if len(m) != len(c.want) {
			t.Fatalf("%q: %v", c.in, m)
		}
		for k, v := range c.want {
			if m[k] != v {
				t.Fatalf("%q: %v", c.in, m)
			}
		}
	}
	for _, in := range []string{"", "errors", "error=1", "errors=-1", "errors=NaN", "errors=Inf", "errors=0", "errors=0,logs=0",
		"errors=1,errors=2", "errors=abc", "errors=1,", "spans=1", "errors=1e400"} {
		if _, err := ParseMix(in); err == nil {
			t.Errorf("ParseMix(%q) accepted", in)
		}
	}
	if err := (Mix{KindError: math.NaN()}).Validate(); err == nil {
		t.Error("NaN weight validated")
	}
	if err := (Mix{"spans": 1}).Validate(); err == nil {
		t.Error("unknown kind validated")
	}
}

func TestOptionsErrors(t *testing.T) {
	ps := testProjects(t, 3)
	bad := []Options{
		{Size: 0, Projects: ps},
		{Size: MaxSize + 1, Projects: ps},
		{Size: 10},
		{Size: 10, Projects: ps, ZipfS: 1},
		{Size: 10, Projects: ps, ZipfS: math.NaN()},
		{Size: 10, Projects: ps, Encoding: "lz4"},
		{Size: 10, Projects: ps, Mix: Mix{KindError: -1}},
		{Size: 10, Projects: ps, UserAgents: -1},
	}
	for i, o := range bad {
		if _, err := Build(context.Background(), o); err == nil {
			t.Errorf("options %d accepted: %+v", i, o)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Build(ctx, Options{Size: 1000, Projects: ps}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled build: %v", err)
	}
}

func TestZipfProjects(t *testing.T) {
	p := mixed(t)
	counts := make([]int, len(p.Options.Projects))
	for _, e := range p.Entries {
		counts[e.Project]++
	}
	top := 0
	for i, c := range counts {
		if c > counts[top] {
			top = i
		}
	}
	if top != 0 {
		t.Fatalf("most frequent project is %d, want 0: %v", top, counts)
	}
	// s = 1.1 over 20 projects: rank 1 gets ~25%, rank 20 ~1.5%.
	if counts[0] < 4*counts[len(counts)-1] || counts[0] < len(p.Entries)/6 {
		t.Fatalf("not skewed: %v", counts)
	}
	for i, c := range counts {
		if c == 0 {
			t.Fatalf("project %d never drawn: %v", i, counts)
		}
	}
}

func TestUserAgents(t *testing.T) {
	size := 20_000
	if testing.Short() {
		size = 4000
	}
	p := build(t, Options{Seed: 9, Size: size, UniqueUserAgents: true, Mix: Mix{KindSession: 1, KindCheckIn: 1}})
	seen := make(map[string]int, size)
	for i, e := range p.Entries {
		if j, dup := seen[e.UserAgent]; dup {
			t.Fatalf("entries %d and %d share agent %q", j, i, e.UserAgent)
		}
		seen[e.UserAgent] = i
	}
	q := build(t, Options{Seed: 9, Size: 3000, UserAgents: 50, Mix: Mix{KindSession: 1}})
	distinct := map[string]int{}
	for _, e := range q.Entries {
		distinct[e.UserAgent]++
	}
	if len(distinct) > 50 || len(distinct) < 30 {
		t.Fatalf("%d distinct agents from a table of 50", len(distinct))
	}
	r := build(t, Options{Seed: 9, Size: 3000, UserAgents: 5000, Mix: Mix{KindSession: 1}})
	distinct = map[string]int{}
	for _, e := range r.Entries {
		distinct[e.UserAgent]++
	}
	maxN := 0
	for _, n := range distinct {
		maxN = max(maxN, n)
	}
	if len(distinct) < 500 || maxN < 30 {
		t.Fatalf("agents not Zipf-distributed: %d distinct, top %d", len(distinct), maxN)
	}
}

func TestForwardedFor(t *testing.T) {
	p := mixed(t)
	v6 := 0
	reserved := []netip.Prefix{
		netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("192.0.0.0/24"), netip.MustParsePrefix("192.0.2.0/24"),
		netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("2001::/23"), netip.MustParsePrefix("2002::/16"),
	}
	for i, e := range p.Entries {
		a, err := netip.ParseAddr(e.ForwardedFor)
		if err != nil {
			t.Fatalf("%d: %q: %v", i, e.ForwardedFor, err)
		}
		if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() {
			t.Fatalf("%d: %s is not public", i, a)
		}
		for _, r := range reserved {
			if r.Contains(a) {
				t.Fatalf("%d: %s in %s", i, a, r)
			}
		}
		if a.Is6() {
			v6++
		}
	}
	if v6 == 0 || v6 > len(p.Entries)/3 {
		t.Fatalf("%d IPv6 of %d", v6, len(p.Entries))
	}
}

func TestEncodings(t *testing.T) {
	t.Parallel() // CPU-bound; reads the shared pool only
	dec := compression.NewDecoder(64 << 20)
	ps := testProjects(t, 5)
	for _, enc := range compression.Encodings() {
		p := build(t, Options{Seed: 4, Size: 120, Projects: ps, Encoding: enc})
		ref := build(t, Options{Seed: 4, Size: 120, Projects: ps})
		if p.Hash() != ref.Hash() {
			t.Fatalf("%s: raw pool differs from identity pool", enc)
		}
		st := p.Stats()
		if st.Encoding != string(enc) {
			t.Fatalf("stats encoding %q", st.Encoding)
		}
		for i, e := range p.Entries {
			out, err := dec.Decode(enc, e.Body, nil)
			if err != nil {
				t.Fatalf("%s %d: %v", enc, i, err)
			}
			if !bytes.Equal(out, p.Raw(i)) {
				t.Fatalf("%s %d: decoded body differs from Raw", enc, i)
			}
		}
		if enc == compression.Identity {
			if st.HeldBytes < st.RawBytes || st.EncodedBytes != st.RawBytes {
				t.Fatalf("identity stats %+v", st)
			}
		} else {
			ratio := float64(st.RawBytes) / float64(st.EncodedBytes)
			if st.HeldBytes < st.RawBytes+st.EncodedBytes || ratio < 3 || ratio > 12 {
				t.Fatalf("%s: stats %+v (ratio %.1f)", enc, st, ratio)
			}
			t.Logf("%s: compression ratio %.2f", enc, ratio)
		}
	}
}

func TestDump(t *testing.T) {
	dir := t.TempDir()
	p := build(t, Options{Seed: 2, Size: 60, Encoding: compression.Gzip})
	if err := p.Dump(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 60 || m.Hash != p.Hash() || m.Options.Seed != 2 {
		t.Fatalf("manifest: %d entries, hash %s", len(m.Entries), m.Hash)
	}
	for i, me := range m.Entries {
		e := p.Entries[i]
		raw, err := os.ReadFile(filepath.Join(dir, me.File))
		if err != nil || !bytes.Equal(raw, p.Raw(i)) {
			t.Fatalf("%d: raw file: %v", i, err)
		}
		body, err := os.ReadFile(filepath.Join(dir, me.BodyFile))
		if err != nil || !bytes.Equal(body, e.Body) || me.BodyFile == me.File {
			t.Fatalf("%d: body file %s: %v", i, me.BodyFile, err)
		}
		pr := p.Options.Projects[e.Project]
		if me.Kind != e.Kind || me.ProjectID != pr.ID || me.PublicKey != pr.PublicKey || me.UserAgent != e.UserAgent ||
			me.ForwardedFor != e.ForwardedFor || me.RawSize != e.RawSize || me.EncodedSize != len(e.Body) || me.Encoding != "gzip" ||
			me.EventID != e.EventID || !strings.HasSuffix(me.File, "-"+string(e.Kind)+".envelope") {
			t.Fatalf("%d: manifest entry %+v does not match %+v", i, me, e)
		}
	}
}

// TestMarshalRoundTrip holds pool's own framing (zero-copy path) to
// envelope.Marshal's: re-marshalling a parsed entry gives the same bytes.
func TestMarshalRoundTrip(t *testing.T) {
	p := mixed(t)
	for i := range p.Entries {
		env, err := envelope.Parse(p.Raw(i))
		if err != nil {
			t.Fatal(err)
		}
		for k := range env.Items {
			env.Items[k].Header = nil
		}
		if got := env.Marshal(); !bytes.Equal(got, p.Raw(i)) {
			t.Fatalf("%d: re-marshalled envelope differs:\n%.300s\n%.300s", i, got, p.Raw(i))
		}
	}
}

// TestEntriesDoNotOverlap: raw envelopes share chunks but never bytes, and
// none can grow into its neighbour.
func TestEntriesDoNotOverlap(t *testing.T) {
	p := mixed(t)
	for i := range p.Entries {
		r := p.Raw(i)
		if cap(r) != len(r) || cap(p.Entries[i].Body) != len(p.Entries[i].Body) {
			t.Fatalf("%d: capacity beyond the envelope", i)
		}
	}
	st := p.Stats()
	if st.HeldBytes < st.RawBytes || st.HeldBytes > st.RawBytes*11/10+int64(chunkSize)*int64(runtime.GOMAXPROCS(0)) {
		t.Fatalf("held %d for %d raw bytes", st.HeldBytes, st.RawBytes)
	}
}

// TestNoDuplicateKeys: no JSON object in any header or payload repeats a
// key (parsers disagree on which one wins).
func TestNoDuplicateKeys(t *testing.T) {
	t.Parallel() // CPU-bound; reads the shared pool only
	if checkDuplicateKeys(json.NewDecoder(strings.NewReader(`{"x":[{"a":1,"b":{"a":2},"a":3}]}`))) == nil {
		t.Fatal("checker misses a duplicate")
	}
	p := mixed(t)
	for i := 0; i < len(p.Entries); i += checkStride {
		env, err := envelope.Parse(p.Raw(i))
		if err != nil {
			t.Fatal(err)
		}
		docs := [][]byte{env.Header}
		for _, it := range env.Items {
			docs = append(docs, it.Header, it.Payload)
		}
		for _, d := range docs {
			if err := checkDuplicateKeys(json.NewDecoder(bytes.NewReader(d))); err != nil {
				t.Fatalf("%d (%s): %v", i, p.Entries[i].Kind, err)
			}
		}
	}
}

func checkDuplicateKeys(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			if seen[k.(string)] {
				return errors.New("duplicate key " + k.(string))
			}
			seen[k.(string)] = true
			if err := checkDuplicateKeys(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case json.Delim('['):
		for dec.More() {
			if err := checkDuplicateKeys(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	return err
}

// TestLogTimes: records ascend and never pass Now.
func TestLogTimes(t *testing.T) {
	p := build(t, Options{Seed: 8, Size: 300, Mix: Mix{KindLog: 1}})
	now := float64(testNow.Unix())
	for i := range p.Entries {
		prev := 0.0
		for _, r := range decode(t, p, i, 0)["items"].([]any) {
			ts := r.(map[string]any)["timestamp"].(float64)
			if ts < prev || ts > now || ts < now-60 {
				t.Fatalf("%d: log timestamp %v (prev %v, now %v)", i, ts, prev, now)
			}
			prev = ts
		}
	}
}

// TestAgentWhereRelayReadsIt: each entry's agent is where Relay reads a
// User-Agent for its kind (docs/protocol.md, What Relay checks in what blast
// sends): request.headers of errors
// and transactions, attrs.user_agent of every session item,
// user_agent.original of browser logs; and nowhere a different agent.
func TestAgentWhereRelayReadsIt(t *testing.T) {
	t.Parallel() // CPU-bound; reads the shared pool only
	p := mixed(t)
	seen := map[Kind]int{}
	for i := 0; i < len(p.Entries); i += checkStride {
		e := p.Entries[i]
		if e.UserAgent == "" {
			t.Fatalf("%d: no agent", i)
		}
		env, err := envelope.Parse(p.Raw(i))
		if err != nil {
			t.Fatal(err)
		}
		for k := range env.Items {
			v := decode(t, p, i, k)
			switch e.Kind {
			case KindError, KindTransaction:
				h, _ := v["request"].(map[string]any)["headers"].(map[string]any)
				if h["User-Agent"] != e.UserAgent {
					t.Fatalf("%d (%s): request.headers User-Agent %v, entry %q", i, e.Kind, h["User-Agent"], e.UserAgent)
				}
				seen[e.Kind]++
			case KindSession:
				if ua := v["attrs"].(map[string]any)["user_agent"]; ua != e.UserAgent {
					t.Fatalf("%d: attrs.user_agent %v, entry %q", i, ua, e.UserAgent)
				}
				seen[e.Kind]++
			case KindLog:
				n := 0
				for _, r := range v["items"].([]any) {
					a, ok := r.(map[string]any)["attributes"].(map[string]any)["user_agent.original"].(map[string]any)
					if !ok {
						continue
					}
					if a["value"] != e.UserAgent || a["type"] != "string" {
						t.Fatalf("%d: log user_agent.original %v, entry %q", i, a, e.UserAgent)
					}
					n++
				}
				if n > 0 {
					seen[e.Kind]++
				}
			}
		}
	}
	for _, k := range []Kind{KindError, KindTransaction, KindSession, KindLog} {
		if seen[k] < 20 {
			t.Errorf("%s: agent found in only %d items", k, seen[k])
		}
	}
}
