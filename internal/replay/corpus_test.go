package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/pool"
)

const corpusDir = "testdata/corpus"

func loadFixture(t testing.TB) *Corpus {
	t.Helper()
	c, err := Load(corpusDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func buildFixture(t testing.TB, c *Corpus, size int, nProjects int) *pool.Pool {
	t.Helper()
	p, err := Build(context.Background(), c, pool.Options{Seed: 9, Size: size, Projects: testProjects(t, nProjects), Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFixture(t *testing.T) {
	c := loadFixture(t)
	s := c.Summary()
	if s.Files != 9 || s.Manifest != "manifest.jsonl" || !strings.HasPrefix(s.Digest, "sha256:") || s.Dir != corpusDir {
		t.Errorf("summary %+v", s)
	}
	var total int64
	for _, f := range c.files {
		total += int64(len(f.data))
	}
	if s.Bytes != total {
		t.Errorf("bytes %d, files add up to %d", s.Bytes, total)
	}
	wantTypes := map[string]int{"event": 1, "attachment": 1, "transaction": 1, "session": 2, "check_in": 2, "log": 1, "client_report": 1, "feedback": 1}
	if !mapsEqual(s.ItemTypes, wantTypes) {
		t.Errorf("item types %v, want %v", s.ItemTypes, wantTypes)
	}
	wantKinds := []pool.Kind{pool.KindError, pool.KindTransaction, pool.KindSession, pool.KindCheckIn, pool.KindLog, "client_report", "feedback"}
	if got := c.Kinds(); !slices.Equal(got, wantKinds) {
		t.Errorf("kinds %v, want %v", got, wantKinds)
	}
	only, err := c.Only(pool.KindSession, "feedback")
	if err != nil || only.Len() != 3 || only.Summary().Digest == s.Digest || !slices.Equal(only.Summary().Only, []pool.Kind{pool.KindSession, "feedback"}) {
		t.Errorf("Only: %v, %+v", err, only.Summary())
	}
	if _, err := c.Only("nothing"); err == nil {
		t.Error("Only of an absent kind: no error")
	}
	p := buildFixture(t, c, 9, 10)
	items := map[pool.Kind]int{}
	for _, e := range p.Entries {
		items[e.Kind] += e.Items
	}
	// The log container counts its two records, the event envelope its event and attachment.
	want := map[pool.Kind]int{pool.KindError: 2, pool.KindTransaction: 1, pool.KindSession: 2, pool.KindCheckIn: 2, pool.KindLog: 2, "client_report": 1, "feedback": 1}
	if !mapsEqual(items, want) {
		t.Errorf("items by kind %v, want %v", items, want)
	}
}

func mapsEqual[K comparable](a, b map[K]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Envelopes of foreign projects arrive under the run's: one original
// project always on the same one of ours, with our dsn and DSC key, and
// the manifest's agent and address, else the event's agent.
func TestRetarget(t *testing.T) {
	c := loadFixture(t)
	p := buildFixture(t, c, 18, 50)
	ps := p.Options.Projects
	byName := map[string][]int{}
	for i := range p.Entries {
		byName[c.files[i%c.Len()].name] = append(byName[c.files[i%c.Len()].name], i)
	}
	proj := func(name string) int { return p.Entries[byName[name][0]].Project }
	// 01 names its project in the dsn, 02 only in the DSC: the same key.
	if proj("01-event.envelope") != proj("02-transaction.envelope") {
		t.Errorf("the same original project went to %d and %d", proj("01-event.envelope"), proj("02-transaction.envelope"))
	}
	if proj("05-checkin-start.envelope") != proj("06-checkin-end.envelope") {
		t.Error("the manifest's project 777 went to two projects")
	}
	for name, idx := range byName {
		for _, i := range idx {
			if p.Entries[i].Project != proj(name) {
				t.Errorf("%s: copies on projects %d and %d", name, p.Entries[i].Project, proj(name))
			}
		}
	}
	raw := p.Raw(byName["01-event.envelope"][0])
	env, err := envelope.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	target := ps[proj("01-event.envelope")]
	wantDSN, _ := target.DSN("https://o1.ingest.sentry.io")
	if env.DSN != wantDSN {
		t.Errorf("dsn %q, want %q", env.DSN, wantDSN)
	}
	var hdr struct {
		Trace struct {
			PublicKey string `json:"public_key"`
		} `json:"trace"`
	}
	if err := json.Unmarshal(env.Header, &hdr); err != nil || hdr.Trace.PublicKey != target.PublicKey {
		t.Errorf("DSC public_key %q (%v), want %q", hdr.Trace.PublicKey, err, target.PublicKey)
	}
	if bytes.Contains(raw, []byte("e12d836b15bb49d7bbf99e64295d995b")) {
		t.Error("the original key is still in the envelope")
	}
	for _, tc := range []struct{ name, ua, xff string }{
		{"01-event.envelope", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0", ""},
		{"02-transaction.envelope", "curl/8.4.0", ""},
		{"05-checkin-start.envelope", "sentry-python-cron/2.0", "203.0.113.77"},
		{"03-session-init.envelope", "", ""},
	} {
		e := p.Entries[byName[tc.name][0]]
		if e.UserAgent != tc.ua || tc.xff != "" && e.ForwardedFor != tc.xff || e.ForwardedFor == "" {
			t.Errorf("%s: agent %q, address %q; want %q, %q", tc.name, e.UserAgent, e.ForwardedFor, tc.ua, tc.xff)
		}
	}
}

// timeValue matches the values of the time keys replay shifts.
var timeValue = regexp.MustCompile(`"(timestamp|start_timestamp|end_timestamp|started|sent_at|received|seq)":("[^"]*"|[0-9.]+)`)

// lengthValue matches item lengths; dsnValue and keyValue the re-targeted values.
var (
	lengthValue = regexp.MustCompile(`"length":[0-9]+`)
	dsnValue    = regexp.MustCompile(`"(dsn|public_key)":"[^"]*"`)
)

func maskAll(b []byte) []byte {
	b = maskIDs(b)
	b = timeValue.ReplaceAll(b, []byte(`"$1":T`))
	b = lengthValue.ReplaceAll(b, []byte(`"length":N`))
	return dsnValue.ReplaceAll(b, []byte(`"$1":"K"`))
}

// Two copies of a file differ in every id; within a copy, ids the corpus
// shares stay shared; timestamps land at Now, the envelope's shape kept;
// every other byte is the file's.
func TestFreshness(t *testing.T) {
	c := loadFixture(t)
	n := c.Len()
	p := buildFixture(t, c, 2*n, 10)
	idsOf := func(i int) map[string][]string {
		out := map[string][]string{}
		for _, m := range idValue.FindAllSubmatch(jsonParts(t, p.Raw(i)), -1) {
			out[string(m[1])] = append(out[string(m[1])], string(m[0]))
		}
		return out
	}
	for fi, f := range c.files {
		a, b := p.Raw(fi), p.Raw(fi+n)
		if _, err := envelope.Parse(a); err != nil {
			t.Fatalf("%s: replayed envelope does not parse: %v", f.name, err)
		}
		if ma, mf := maskAll(a), maskAll(f.data); !bytes.Equal(ma, mf) {
			t.Errorf("%s: differs from the file beyond ids, times, lengths and keys:\n%s", f.name, firstDiff(mf, ma))
		}
		checkItems(t, f, a, b)
		ia, ib := idsOf(fi), idsOf(fi+n)
		for k, va := range ia {
			for _, v := range va {
				if slices.Contains(ib[k], v) {
					t.Errorf("%s: both copies hold %s", f.name, v)
				}
			}
		}
		if e := p.Entries[fi]; e.EventID != "" && (e.EventID == p.Entries[fi+n].EventID || !bytes.Contains(a, []byte(`"event_id":"`+e.EventID+`"`))) {
			t.Errorf("%s: Entry.EventID %q", f.name, e.EventID)
		}
		checkTimes(t, f.name, a)
	}
	// The session's seq stays in order across its two envelopes.
	seqOf := func(i int) int64 {
		m := regexp.MustCompile(`"seq":([0-9]+)`).FindSubmatch(p.Raw(i))
		v, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return v
	}
	if seqOf(2) >= seqOf(3) {
		t.Errorf("session seq %d (init), then %d (update)", seqOf(2), seqOf(3))
	}
	// Shared within a copy: the session's sid, the check-in's id, the trace.
	for _, pair := range [][2]int{{2, 3}, {4, 5}, {0, 1}, {0, 6}} {
		for _, cp := range []int{0, n} {
			x, y := idsOf(pair[0]+cp), idsOf(pair[1]+cp)
			for _, k := range []string{"sid", "check_in_id", "trace_id"} {
				if len(x[k]) > 0 && len(y[k]) > 0 && x[k][0] != y[k][0] {
					t.Errorf("files %d and %d of copy %d: %s %s and %s", pair[0], pair[1], cp/n, k, x[k][0], y[k][0])
				}
			}
		}
	}
}

// jsonParts is an envelope's header and items but its attachments, which
// replay leaves as they are.
func jsonParts(t *testing.T, raw []byte) []byte {
	env, err := envelope.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Clone(env.Header)
	for _, it := range env.Items {
		if it.Type != "attachment" {
			out = append(append(out, '\n'), it.Payload...)
		}
	}
	return out
}

// checkItems checks that the copies a and b of file f keep no old id in
// their JSON items, and their attachments byte for byte.
func checkItems(t *testing.T, f *file, a, b []byte) {
	t.Helper()
	orig, err := envelope.Parse(f.data)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range [][]byte{a, b} {
		env, err := envelope.Parse(cp)
		if err != nil || len(env.Items) != len(orig.Items) {
			t.Fatalf("%s: %v, %d items", f.name, err, len(env.Items))
		}
		if m := idValue.Find(env.Header); m != nil && bytes.Contains(orig.Header, m) {
			t.Errorf("%s: header keeps %s", f.name, m)
		}
		for k, it := range env.Items {
			if it.Type == "attachment" {
				if !bytes.Equal(it.Payload, orig.Items[k].Payload) {
					t.Errorf("%s: attachment changed", f.name)
				}
				continue
			}
			for _, m := range idValue.FindAll(orig.Items[k].Payload, -1) {
				if bytes.Contains(it.Payload, m) {
					t.Errorf("%s: item %d keeps %s", f.name, k, m)
				}
			}
		}
	}
}

// checkTimes checks every time value of a replayed envelope: within the
// last 10 minutes before fixedNow, sent_at at it (to the precision written).
func checkTimes(t *testing.T, name string, raw []byte) {
	t.Helper()
	for _, m := range timeValue.FindAllSubmatch(raw, -1) {
		key, v := string(m[1]), string(m[2])
		var at time.Time
		switch {
		case key == "seq":
			ms, _ := strconv.ParseInt(v, 10, 64)
			at = time.UnixMilli(ms)
		case v[0] == '"':
			var err error
			if at, err = time.Parse(time.RFC3339Nano, strings.Trim(v, `"`)); err != nil {
				t.Errorf("%s: %s %s: %v", name, key, v, err)
				continue
			}
		default:
			f, _ := strconv.ParseFloat(v, 64)
			at = time.Unix(0, int64(f*1e9))
		}
		if at.Before(fixedNow.Add(-10*time.Minute)) || at.After(fixedNow.Add(time.Second)) {
			t.Errorf("%s: %s %s is not near %s", name, key, v, fixedNow)
		}
		if key == "sent_at" && at.Sub(fixedNow).Abs() >= time.Second {
			t.Errorf("%s: sent_at %s, want %s", name, v, fixedNow)
		}
	}
}

func TestBadFiles(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(corpusDir, "01-event.envelope"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		rule envelope.Rule
	}{
		{"crlf.envelope", envelope.RuleMissingNewline},
		{"length.envelope", envelope.RuleUnexpectedEOF},
		{"header.envelope", envelope.RuleHeaderInvalid},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata/bad", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			writeFile(t, dir, "a.envelope", good)
			writeFile(t, dir, "b-"+tc.file, b)
			_, err = Load(dir, 0)
			var perr *envelope.ParseError
			if !errors.As(err, &perr) || perr.Rule != tc.rule {
				t.Fatalf("Load: %v, want a %q parse error", err, tc.rule)
			}
			if want := filepath.Join(dir, "b-"+tc.file) + ": envelope: offset " + strconv.Itoa(perr.Offset); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRefuses(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(corpusDir, "01-event.envelope"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		max   int64
		want  string
	}{
		{"empty dir", func(t *testing.T, dir string) {}, 0, "no .envelope files"},
		{"only encoded bodies", func(t *testing.T, dir string) {
			writeFile(t, dir, "000000-errors.envelope.zst", good)
			writeFile(t, dir, "notes.txt", good)
		}, 0, "no .envelope files"},
		{"too large", func(t *testing.T, dir string) {
			writeFile(t, dir, "a.envelope", good)
			writeFile(t, dir, "b.envelope", good)
		}, int64(len(good)) + 1, "more than"},
		{"no items", func(t *testing.T, dir string) { writeFile(t, dir, "a.envelope", []byte("{}\n")) }, 0, "without items"},
		{"two manifests", func(t *testing.T, dir string) {
			writeFile(t, dir, "a.envelope", good)
			writeFile(t, dir, "manifest.jsonl", nil)
			writeFile(t, dir, "manifest.json", []byte(`{"entries":[]}`))
		}, 0, "both"},
		{"bad dump manifest", func(t *testing.T, dir string) {
			writeFile(t, dir, "a.envelope", good)
			writeFile(t, dir, "manifest.json", []byte(`{"entries":[{"file":"../x.envelope"}]}`))
		}, 0, "want a file name"},
		{"bad capture manifest", func(t *testing.T, dir string) {
			writeFile(t, dir, "a.envelope", good)
			writeFile(t, dir, "manifest.jsonl", []byte("{\n"))
		}, 0, "manifest line 1"},
		{"missing dir", func(t *testing.T, dir string) { os.Remove(dir) }, 0, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "corpus")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			_, err := Load(dir, tc.max)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestBuildRefusesGeneratorOptions(t *testing.T) {
	c := loadFixture(t)
	ps := testProjects(t, 3)
	for _, o := range []pool.Options{
		{Size: 5, Projects: ps, Mix: pool.Mix{pool.KindError: 1}},
		{Size: 5, Projects: ps, UserAgents: 10},
		{Size: 5, Projects: ps, UniqueUserAgents: true},
		{Size: 5},
		{Size: 0, Projects: ps},
	} {
		if _, err := Build(context.Background(), c, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// Estimate is close to what a built pool holds, with and without encoding.
func TestEstimate(t *testing.T) {
	_, dir := dumpPool(t, 400, compression.Identity)
	c, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []compression.Encoding{compression.Identity, compression.Zstd} {
		opts := pool.Options{Seed: 1, Size: 1000, Projects: testProjects(t, 20), Encoding: enc, Now: fixedNow}
		est, err := Estimate(context.Background(), c, opts)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Build(context.Background(), c, opts)
		if err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		if est.HeldBytes < st.RawBytes+st.EncodedBytes*int64(map[bool]int{true: 0, false: 1}[enc == compression.Identity]) ||
			float64(est.EncodedBytes) < 0.8*float64(st.EncodedBytes) || float64(est.EncodedBytes) > 1.25*float64(st.EncodedBytes) ||
			est.EntryBytes < c.Summary().Bytes {
			t.Errorf("%s: estimate %+v, built %+v", enc, est, st)
		}
	}
}

// Timestamps keep their shape; a zero shift writes the same bytes.
func TestTimeFormats(t *testing.T) {
	for _, tc := range []struct {
		in    string
		shift time.Duration
		want  string
	}{
		{"2023-11-14T22:13:20Z", 0, "2023-11-14T22:13:20Z"},
		{"2023-11-14T22:13:20.123456Z", time.Hour, "2023-11-14T23:13:20.123456Z"},
		{"2023-11-14 22:13:20.1+02:00", 30 * time.Minute, "2023-11-14 22:43:20.1+02:00"},
		{"2023-11-14T23:59:59.999-0130", time.Millisecond, "2023-11-15T00:00:00.000-0130"},
		{"2023-11-14T22:13:20.1234567891234", time.Nanosecond, "2023-11-14T22:13:20.1234567901234"},
		{"2023-11-14T22:13:20", -24 * time.Hour, "2023-11-13T22:13:20"},
	} {
		ts, ok := parseTimeString([]byte(tc.in))
		if !ok {
			t.Errorf("%s: not parsed", tc.in)
			continue
		}
		out, ok := ts.appendShifted(nil, int64(tc.shift))
		if !ok || string(out) != tc.want {
			t.Errorf("%s + %s = %s, want %s", tc.in, tc.shift, out, tc.want)
		}
	}
	for _, bad := range []string{"2023-02-30T00:00:00Z", "2023-11-14T22:13:20", "1800-01-01T00:00:00Z", "2023-11-14T22:13:20+2", "yesterday", "2023-11-14T25:00:00Z"} {
		if _, ok := parseTimeString([]byte(bad)); ok && bad != "2023-11-14T22:13:20" {
			t.Errorf("%s parsed", bad)
		}
	}
	for _, tc := range []struct {
		in    string
		shift time.Duration
		want  string
	}{
		{"1700000000.1", 0, "1700000000.1"},
		{"1700000000.123456", 1500 * time.Millisecond, "1700000001.623456"},
		{"1700000000", -time.Second, "1699999999"},
		{"1700000000.000", 999 * time.Microsecond, "1700000000.000"},
	} {
		tn, ok := parseTimeNumber([]byte(tc.in))
		if !ok {
			t.Errorf("%s: not parsed", tc.in)
			continue
		}
		out, ok := tn.appendShifted(nil, int64(tc.shift))
		if !ok || string(out) != tc.want {
			t.Errorf("%s + %s = %s, want %s", tc.in, tc.shift, out, tc.want)
		}
	}
	for _, bad := range []string{"12.5", "1e9", "-1700000000", "99999999999", "1700000000."} {
		if _, ok := parseTimeNumber([]byte(bad)); ok {
			t.Errorf("%s parsed as epoch seconds", bad)
		}
	}
}

func TestNewIDShape(t *testing.T) {
	for _, old := range []string{"9ec79c33ec9942ab8353589fcb2e04dc", "7C7B6585-F901-4351-BF8D-DC7ED4E9C3FE", "1111222233334444", "user-1"} {
		a := string(appendNewID(nil, []byte(old), 1, 0))
		b := string(appendNewID(nil, []byte(old), 1, 1))
		c := string(appendNewID(nil, []byte(old), 2, 0))
		if a == old || a == b || a == c || a != string(appendNewID(nil, []byte(old), 1, 0)) {
			t.Errorf("%s: copies %s %s, other seed %s", old, a, b, c)
		}
		if len(a) != len(old) || strings.Count(a, "-") != strings.Count(old, "-") ||
			strings.ContainsAny(old, "ABCDEF") != strings.ContainsAny(a, "ABCDEF") {
			t.Errorf("%s became %s: another shape", old, a)
		}
		if len(old) >= 12 && strings.Trim(a, "0123456789-") == "" {
			t.Errorf("%s became all digits: %s", old, a)
		}
	}
}
