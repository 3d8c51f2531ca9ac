package replay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/pool"
)

// FuzzReplayFile feeds one corpus file to the file parser and the patcher:
// what Load accepts must build entries that are valid envelopes with the
// same items, whose JSON items stay JSON and whose other items are
// unchanged, and whose copies keep their size.
func FuzzReplayFile(f *testing.F) {
	for _, dir := range []string{corpusDir, "testdata/bad"} {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.envelope"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(`{"sent_at":"2023-11-14T22:13:20Z"}` + "\n" + `{"type":"span"}` + "\n" + `[{"span_id":"ab","start_timestamp":1700000000,"timestamp":"2023-11-14T22:13:20.5+01:00"}]`))
	ps := testProjects(f, 4)
	now := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := analyze("f.envelope", b, meta{}, false)
		if err != nil {
			return
		}
		c := &Corpus{dir: "fuzz", files: []*file{fl}, bytes: int64(len(b))}
		p, err := Build(context.Background(), c, pool.Options{Seed: 3, Size: 2, Projects: ps, Now: now})
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		orig, err := envelope.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Entries {
			out, err := envelope.Parse(p.Raw(i))
			if err != nil {
				t.Fatalf("copy %d does not parse: %v\n%q\n%q", i, err, b, p.Raw(i))
			}
			if len(out.Items) != len(orig.Items) {
				t.Fatalf("copy %d: %d items, want %d", i, len(out.Items), len(orig.Items))
			}
			for k, it := range out.Items {
				o := orig.Items[k]
				if it.Type != o.Type {
					t.Fatalf("item %d: type %q, want %q", k, it.Type, o.Type)
				}
				span := fl.items[k]
				if span.first == span.last && !bytes.Equal(it.Payload, o.Payload) {
					t.Fatalf("item %d has nothing to patch but changed:\n%q\n%q", k, o.Payload, it.Payload)
				}
				if span.first < span.last && !walkJSON(it.Payload, func(*member) {}) {
					t.Fatalf("item %d: patched JSON is no longer JSON:\n%q", k, it.Payload)
				}
			}
		}
		if len(p.Raw(0)) != len(p.Raw(1)) {
			t.Fatalf("two copies of one file differ in size: %d, %d", len(p.Raw(0)), len(p.Raw(1)))
		}
	})
}
