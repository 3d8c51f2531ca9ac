package capture

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirReplacedDuringCapture (issue 33, row 5): whatever happens to the
// capture directory or its manifest during a capture, what Stats and
// Summary claim kept is what Dir holds at the end, and every envelope
// offered is counted once. A directory removed and made again used to be
// summed up as 200 kept and no error while it held 100 files and no
// manifest.
func TestDirReplacedDuringCapture(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disturb func(t *testing.T, dir string)
		lost    bool // Close reports the capture lost
	}{
		{"removed and made again", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"removed", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"moved away and replaced", func(t *testing.T, dir string) {
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"manifest removed", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, ManifestName)); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"left alone", func(*testing.T, string) {}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWriter(t, Config{})
			const half = 100
			for i := range half {
				w.Keep(Entry{}, envelopeOf(i, 0))
			}
			tc.disturb(t, w.Dir())
			for i := half; i < 2*half; i++ {
				w.Keep(Entry{}, envelopeOf(i, 0))
			}
			err := w.Close()
			st := w.Stats()
			if st.Kept+st.Errors != 2*half || st.Lost > st.Kept {
				t.Errorf("kept %d (lost %d) + errors %d, want %d envelopes counted", st.Kept, st.Lost, st.Errors, 2*half)
			}
			if tc.lost != (err != nil) || err != nil && !strings.Contains(err.Error(), "was removed or replaced during the capture") {
				t.Errorf("Close: %v, want an error: %v", err, tc.lost)
			}
			// What is at Dir: the manifest's lines whose files are there.
			entries, rerr := ReadManifest(w.Dir())
			if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				t.Fatal(rerr)
			}
			var there int64
			for _, e := range entries {
				if _, err := os.Stat(filepath.Join(w.Dir(), e.File)); err == nil {
					there++
				}
			}
			if st.Kept-st.Lost != there {
				t.Errorf("stats claim %d kept and %d lost, %s holds %d (manifest: %v); summary %q", st.Kept, st.Lost, w.Dir(), there, rerr, w.Summary())
			}
			if sum := w.Summary(); tc.lost && (st.Lost+st.Errors != 2*half || !strings.Contains(sum, "kept 0 envelopes (0 B)") ||
				!strings.Contains(sum, "was removed or replaced during the capture")) {
				t.Errorf("summary %q, want nothing kept, every envelope lost or not written, and why", sum)
			}
		})
	}
}
