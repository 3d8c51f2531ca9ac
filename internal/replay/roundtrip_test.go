package replay

import (
	"bytes"
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/projects"
)

// fixedNow anchors the pools of these tests.
var fixedNow = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

func testProjects(t testing.TB, n int) []projects.Project {
	t.Helper()
	ps, err := projects.Generate(1, n)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// dumpPool builds a generated pool and dumps it into a new directory.
func dumpPool(t testing.TB, size int, enc compression.Encoding) (*pool.Pool, string) {
	t.Helper()
	p, err := pool.Build(context.Background(), pool.Options{Seed: 5, Size: size, Projects: testProjects(t, 20), Encoding: enc, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := p.Dump(dir); err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// A dump replayed at the same options is the same pool but for its ids:
// entry by entry the same kind, project, agent, address, items and size,
// and the same bytes once ids are masked.
func TestDumpRoundTrip(t *testing.T) {
	for _, enc := range []compression.Encoding{compression.Identity, compression.Zstd} {
		t.Run(string(enc), func(t *testing.T) {
			orig, dir := dumpPool(t, 300, enc)
			c, err := Load(dir, 0)
			if err != nil {
				t.Fatal(err)
			}
			if c.Len() != 300 {
				t.Fatalf("loaded %d files, want 300 (the .envelope%s bodies skipped)", c.Len(), map[bool]string{true: "", false: ".zst"}[enc == compression.Identity])
			}
			rp, err := Build(context.Background(), c, pool.Options{Seed: 5, Size: 300, Projects: orig.Options.Projects, Encoding: enc, Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			compareStats(t, orig.Stats(), rp.Stats())
			for i := range orig.Entries {
				a, b := orig.Entries[i], rp.Entries[i]
				if a.Kind != b.Kind || a.Project != b.Project || a.UserAgent != b.UserAgent || a.ForwardedFor != b.ForwardedFor ||
					a.Items != b.Items || a.RawSize != b.RawSize || (a.EventID == "") != (b.EventID == "") {
					t.Fatalf("entry %d: generated %+v, replayed %+v", i, meta4(a), meta4(b))
				}
				if a.EventID != "" && a.EventID == b.EventID {
					t.Errorf("entry %d: event_id %s not made fresh", i, a.EventID)
				}
				ra, rb := orig.Raw(i), rp.Raw(i)
				if bytes.Equal(ra, rb) && hasIDs(ra) {
					t.Errorf("entry %d: replayed byte for byte, ids and all", i)
				}
				if ma, mb := maskIDs(ra), maskIDs(rb); !bytes.Equal(ma, mb) {
					t.Fatalf("entry %d differs beyond its ids:\n%s\n%s", i, firstDiff(ma, mb), "")
				}
			}
		})
	}
}

func meta4(e pool.Entry) []any {
	return []any{e.Kind, e.Project, e.UserAgent, e.ForwardedFor, e.Items, e.RawSize, e.EventID}
}

func compareStats(t *testing.T, a, b pool.Stats) {
	t.Helper()
	if a.Entries != b.Entries || a.RawBytes != b.RawBytes || len(a.ByKind) != len(b.ByKind) {
		t.Errorf("stats: generated %+v, replayed %+v", a, b)
	}
	for k, ka := range a.ByKind {
		kb := b.ByKind[k]
		if ka.Entries != kb.Entries || ka.Items != kb.Items || ka.RawBytes != kb.RawBytes || ka.MinRaw != kb.MinRaw || ka.MaxRaw != kb.MaxRaw {
			t.Errorf("kind %s: generated %+v, replayed %+v", k, ka, kb)
		}
	}
}

// idValue matches the values of the id keys replay renews, independently
// of its scanner.
var idValue = regexp.MustCompile(`"(event_id|trace_id|span_id|parent_span_id|segment_id|sid|check_in_id|replay_id|profile_id|profiler_id)":"[^"]*"`)

func maskIDs(b []byte) []byte { return idValue.ReplaceAll(b, []byte(`"$1":"ID"`)) }

func hasIDs(b []byte) bool { return idValue.Match(b) }

// firstDiff shows where two byte strings part.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return "at " + itoa(i) + ":\n" + string(a[lo:min(len(a), i+80)]) + "\n" + string(b[lo:min(len(b), i+80)])
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}
