package capture

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/configerr"
)

// envelopeOf is a small envelope of n bytes or more, told apart by i.
func envelopeOf(i, n int) []byte {
	b := []byte(fmt.Sprintf("{}\n{\"type\":\"event\"}\n{\"i\":%d}\n", i))
	for len(b) < n {
		b = append(b, ' ')
	}
	return b
}

func newWriter(t *testing.T, cfg Config) *Writer {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "capture")
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// checkCapture checks that dir's manifest, its files and st agree, each
// file holding bodies[its number], and returns the manifest.
func checkCapture(t *testing.T, dir string, st Stats, bodies map[string][]byte) []Entry {
	t.Helper()
	entries, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.envelope"))
	var sum int64
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != e.Bytes {
			t.Errorf("%s: %d bytes, manifest says %d", e.File, len(b), e.Bytes)
		}
		if want, ok := bodies[e.File]; bodies != nil && (!ok || !bytes.Equal(b, want)) {
			t.Errorf("%s: %q, want %q", e.File, b, want)
		}
		sum += int64(len(b))
	}
	if int64(len(entries)) != st.Kept || len(files) != len(entries) || sum != st.KeptBytes {
		t.Errorf("%d manifest lines, %d files, %d bytes; stats %+v", len(entries), len(files), sum, st)
	}
	return entries
}

func TestKeep(t *testing.T) {
	w := newWriter(t, Config{})
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	bodies := map[string][]byte{}
	for i := range 3 {
		b := envelopeOf(i, 0)
		bodies[fmt.Sprintf("%08d.envelope", i)] = b
		w.Keep(Entry{File: "ignored", Route: "envelope", ReceivedAt: at, ProjectID: int64(i), PublicKey: "k", Encoding: "gzip",
			Items: map[string]int{"event": 1}, Bytes: 999, WireBytes: 10}, b)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Kept != 3 || st.Errors != 0 || st.SkippedMax != 0 || st.SkippedEvery != 0 || st.LastError != "" {
		t.Errorf("stats %+v", st)
	}
	entries := checkCapture(t, w.Dir(), st, bodies)
	for i, e := range entries {
		if e.File != fmt.Sprintf("%08d.envelope", i) || e.ProjectID != int64(i) || !e.ReceivedAt.Equal(at) || e.Encoding != "gzip" ||
			e.WireBytes != 10 || e.Items["event"] != 1 || e.Route != "envelope" || e.PublicKey != "k" {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	for _, name := range []string{ManifestName, entries[0].File} {
		fi, err := os.Stat(filepath.Join(w.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&^0o644 != 0 {
			t.Errorf("%s: mode %v, want at most 0644", name, fi.Mode())
		}
	}
	if got := w.Summary(); !strings.HasPrefix(got, "kept 3 envelopes (") || !strings.Contains(got, " in "+w.Dir()+", skipped 0") {
		t.Errorf("Summary %q", got)
	}
}

// TestBounds: Every thins first, then MaxCount and MaxBytes bound what is
// kept; the first envelope that does not fit ends the capture.
func TestBounds(t *testing.T) {
	tests := []struct {
		name                string
		cfg                 Config
		sizes               []int
		kept                []int // indexes of the envelopes kept
		skippedMax, skEvery int64
	}{
		{"all", Config{}, []int{10, 10, 10}, []int{0, 1, 2}, 0, 0},
		{"count", Config{MaxCount: 2}, []int{10, 10, 10, 10}, []int{0, 1}, 2, 0},
		{"bytes exactly", Config{MaxBytes: 300}, []int{100, 200, 1}, []int{0, 1}, 1, 0},
		{"bytes: a smaller one later is not kept", Config{MaxBytes: 250}, []int{100, 200, 50, 50}, []int{0}, 3, 0},
		{"every 3", Config{Every: 3}, []int{10, 10, 10, 10, 10, 10, 10}, []int{0, 3, 6}, 0, 4},
		{"every 3, count 2", Config{Every: 3, MaxCount: 2}, []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10}, []int{0, 3}, 2, 6},
		{"first too large", Config{MaxBytes: 50}, []int{100, 10}, nil, 2, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWriter(t, tc.cfg)
			want := map[string][]byte{}
			for i, n := range tc.sizes {
				b := envelopeOf(i, n)[:n]
				w.Keep(Entry{Route: "envelope"}, b)
				for k, j := range tc.kept {
					if j == i {
						want[fmt.Sprintf("%08d.envelope", k)] = b
					}
				}
			}
			w.Close()
			st := w.Stats()
			if st.Kept != int64(len(tc.kept)) || st.SkippedMax != tc.skippedMax || st.SkippedEvery != tc.skEvery || st.Errors != 0 {
				t.Errorf("stats %+v, want kept %d, skipped_max %d, skipped_every %d", st, len(tc.kept), tc.skippedMax, tc.skEvery)
			}
			checkCapture(t, w.Dir(), st, want)
		})
	}
}

func TestNewRefuses(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, nil, 0o644)
	withManifest := filepath.Join(tmp, "old")
	os.Mkdir(withManifest, 0o755)
	os.WriteFile(filepath.Join(withManifest, ManifestName), nil, 0o644)
	withFiles := filepath.Join(tmp, "files")
	os.Mkdir(withFiles, 0o755)
	os.WriteFile(filepath.Join(withFiles, "00000007.envelope"), nil, 0o644)
	tests := []struct {
		cfg   Config
		field string
		says  string
	}{
		{Config{}, "Dir", "empty"},
		{Config{Dir: file}, "Dir", "is a file"},
		{Config{Dir: filepath.Join(file, "sub")}, "Dir", "not a directory"},
		{Config{Dir: withManifest}, "Dir", "already holds a capture (manifest.jsonl)"},
		{Config{Dir: withFiles}, "Dir", "already holds envelope files (00000007.envelope)"},
		{Config{Dir: tmp, MaxCount: -1}, "MaxCount", "want 1 or more"},
		{Config{Dir: tmp, MaxBytes: -1}, "MaxBytes", "want 1 or more"},
		{Config{Dir: tmp, Every: -2}, "Every", "want 1 or more"},
	}
	for _, tc := range tests {
		_, err := New(tc.cfg)
		var ce *configerr.Error
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("New(%+v) = %v, want a configerr on %s saying %q", tc.cfg, err, tc.field, tc.says)
		}
	}
	// A directory made by New, and another capture's kept directory.
	dir := filepath.Join(tmp, "a", "b")
	w, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, err := ReadManifest(dir); err != nil || len(entries) != 0 {
		t.Errorf("closed with nothing kept: %v, %v; want an empty manifest", entries, err)
	}
	if _, err := New(Config{Dir: dir}); err == nil {
		t.Error("New on a finished capture: no error")
	}
}

// TestNothingLeftBeforeFirstKeep: a Writer that is never used or closed
// (its program failed to start) leaves no manifest, so the same directory
// can be given again.
func TestNothingLeftBeforeFirstKeep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	if _, err := New(Config{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dir: dir}); err != nil {
		t.Errorf("second New: %v", err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("left %v behind", names)
	}
}

// TestConcurrentKeep: envelopes kept from many goroutines each get their
// own file and exactly one whole manifest line.
func TestConcurrentKeep(t *testing.T) {
	w := newWriter(t, Config{MaxCount: 300})
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				w.Keep(Entry{Route: "envelope", ProjectID: int64(g)}, envelopeOf(g*each+i, 10+i))
			}
		}()
	}
	wg.Wait()
	w.Close()
	st := w.Stats()
	if st.Kept != 300 || st.SkippedMax != goroutines*each-300 || st.Errors != 0 {
		t.Errorf("stats %+v", st)
	}
	entries := checkCapture(t, w.Dir(), st, nil)
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.File] {
			t.Errorf("%s listed twice", e.File)
		}
		seen[e.File] = true
	}
}

// TestWriteError: a write that fails is counted with its error; once the
// directory is found removed, the envelopes kept before count as errors
// too, and nothing more is kept, even in a new directory of the same name.
func TestWriteError(t *testing.T) {
	w := newWriter(t, Config{})
	w.Keep(Entry{}, envelopeOf(0, 0))
	if err := os.RemoveAll(w.Dir()); err != nil {
		t.Fatal(err)
	}
	w.Keep(Entry{}, envelopeOf(1, 0))
	st := w.Stats()
	if st.Kept != 1 || st.Lost != 1 || st.Errors != 1 || !strings.Contains(st.LastError, "was removed or replaced during the capture") {
		t.Errorf("after removing the directory: %+v", st)
	}
	if s := w.Summary(); !strings.Contains(s, "kept 0 envelopes") || !strings.Contains(s, "1 lost and 1 not written (capture: ") {
		t.Errorf("Summary %q", s)
	}
	os.Mkdir(w.Dir(), 0o755)
	w.Keep(Entry{}, envelopeOf(2, 0))
	if st := w.Stats(); st.Kept != 1 || st.Lost != 1 || st.Errors != 2 {
		t.Errorf("after restoring the directory: %+v", st)
	}
	if files, _ := filepath.Glob(filepath.Join(w.Dir(), "*")); len(files) != 0 {
		t.Errorf("the new directory holds %v", files)
	}
}

// TestReadOnlyDir: a directory made read-only after start makes each keep
// an error, not a panic; root ignores the mode, so the test skips then.
func TestReadOnlyDir(t *testing.T) {
	w := newWriter(t, Config{})
	if err := os.Chmod(w.Dir(), 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(w.Dir(), 0o755)
	if f, err := os.Create(filepath.Join(w.Dir(), "probe")); err == nil {
		f.Close()
		t.Skip("a read-only directory is writable here (running as root?)")
	}
	for i := range 3 {
		w.Keep(Entry{}, envelopeOf(i, 0))
	}
	if st := w.Stats(); st.Kept != 0 || st.Errors != 3 || !strings.Contains(st.LastError, "permission denied") {
		t.Errorf("stats %+v", st)
	}
}

func TestKeepAfterClose(t *testing.T) {
	w := newWriter(t, Config{})
	w.Keep(Entry{}, envelopeOf(0, 0))
	w.Close()
	w.Keep(Entry{}, envelopeOf(1, 0))
	if st := w.Stats(); st.Kept != 1 || st.Errors != 1 || st.LastError != "capture: closed" {
		t.Errorf("stats %+v", st)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checkCapture(t, w.Dir(), Stats{Kept: 1, KeptBytes: int64(len(envelopeOf(0, 0)))}, nil)
}

// TestManifestLinesBounded: whatever the client's strings, a manifest
// line stays under MaxManifestLine and keeps its envelope.
func TestManifestLinesBounded(t *testing.T) {
	w := newWriter(t, Config{})
	long := strings.Repeat("é", 100000)
	items := map[string]int{}
	for i := range 3000 {
		items[fmt.Sprintf("%s%d", long[:300], i)] = 1
	}
	w.Keep(Entry{UserAgent: long, ForwardedFor: long, PublicKey: long, Route: long, Encoding: long, Items: items}, envelopeOf(0, 0))
	w.Close()
	entries := checkCapture(t, w.Dir(), w.Stats(), nil)
	if len(entries) != 1 {
		t.Fatalf("%d entries", len(entries))
	}
	e := entries[0]
	if len(e.UserAgent) > maxFieldLen || !strings.HasPrefix(long, e.UserAgent) || len(e.Items) > maxItemTypes {
		t.Errorf("user agent %d bytes, %d item types", len(e.UserAgent), len(e.Items))
	}
	total := 0
	for typ, n := range e.Items {
		total += n
		if len(typ) > maxItemTypeLen {
			t.Errorf("item type of %d bytes", len(typ))
		}
	}
	if total != 3000 {
		t.Errorf("items add up to %d, want 3000", total)
	}
}

func TestItemCounts(t *testing.T) {
	raw := []byte("{}\n{\"type\":\"event\"}\n{}\n{\"type\":\"attachment\"}\nab\n{\"type\":\"attachment\"}\ncd\n")
	var sum envelope.Summary
	if err := envelope.Scan(raw, &sum); err != nil {
		t.Fatal(err)
	}
	got := ItemCounts(sum.Items)
	if len(got) != 2 || got["event"] != 1 || got["attachment"] != 2 {
		t.Errorf("ItemCounts = %v", got)
	}
}

func TestFmtBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 << 20: "3.0 MiB", 5 << 30: "5.0 GiB"} {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
