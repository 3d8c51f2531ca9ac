package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/configerr"
)

// Defaults for Config fields left zero.
const (
	DefaultMaxCount = 100000
	DefaultMaxBytes = 1 << 30
)

// Config configures a Writer.
type Config struct {
	// Dir is the capture directory, created if missing. It must not hold a
	// capture already (a manifest or .envelope files): two captures never
	// mix.
	Dir string
	// MaxCount bounds the envelopes kept and MaxBytes their decoded bytes
	// (defaults DefaultMaxCount and DefaultMaxBytes). The first envelope
	// that does not fit ends the capture, so that what is kept is the
	// start of the stream rather than its smaller envelopes.
	MaxCount int
	MaxBytes int64
	// Every keeps one envelope of every Every offered, the first of each
	// run (default 1: all).
	Every int
}

// Stats counts what a Writer did with the envelopes offered to it. Every
// envelope offered is counted once: kept, skipped or an error; Kept − Lost
// envelopes are in the capture directory. The prom and help tags name its
// series in the fake upstream's Prometheus form.
type Stats struct {
	Kept      int64 `json:"kept" prom:"capture_kept_total" help:"Envelopes kept by the capture."`
	KeptBytes int64 `json:"kept_bytes" prom:"capture_kept_bytes_total" help:"Decoded bytes of the envelopes kept by the capture."` // decoded bytes of the kept envelopes
	// SkippedMax: offered once the capture was full; SkippedEvery: left
	// out by Config.Every.
	SkippedMax   int64 `json:"skipped_max" prom:"capture_skipped_total,reason=max" help:"Envelopes the capture did not keep, by why: over its bounds (max) or thinned out (every)."`
	SkippedEvery int64 `json:"skipped_every" prom:"capture_skipped_total,reason=every"`
	// Errors are envelopes not kept because writing them failed (a full
	// disk, a directory gone); LastError is the latest such error.
	Errors int64 `json:"errors" prom:"capture_errors_total" help:"Envelopes the capture failed to write."`
	// Lost are envelopes kept, then gone with the capture directory or its
	// manifest (removed, moved or replaced during the capture).
	Lost      int64  `json:"lost" prom:"capture_lost_total" help:"Envelopes the capture kept, then lost with its directory or manifest (removed or replaced during the capture)."`
	LastError string `json:"last_error"`
}

// Writer keeps envelopes in a capture directory: each in its own file,
// named %08d.envelope by the order they were taken in, and a manifest line
// for each once its file is whole. It buffers nothing beyond the envelope
// being written, and a failed write is counted, never returned: the caller
// (a server answering a request) carries on, and the failed envelope's
// number is left unused. Safe for concurrent use; files are written in
// parallel, manifest lines one at a time.
//
// Files are opened relative to the directory New opened, never by path: a
// directory removed (or moved, or replaced) during the capture takes no
// more files, and once the writer sees that Config.Dir is no longer that
// directory, or the manifest no longer in it, every envelope it had kept
// is counted as lost, and the rest as errors: Stats never claim envelopes
// that are not in Config.Dir.
type Writer struct {
	cfg     Config
	root    *os.Root    // the capture directory, opened by New
	dirInfo os.FileInfo // its identity

	mu       sync.Mutex // guards the fields below
	offered  int64
	next     int   // number of the next file
	reserved int   // envelopes kept or being written
	resBytes int64 // their bytes
	full     bool
	closed   bool
	lost     error // set once Dir or the manifest is found gone
	st       Stats

	mmu      sync.Mutex  // guards the manifest fields below, held while appending
	manifest *os.File    // nil until the first keep
	mInfo    os.FileInfo // its identity
	mSize    int64       // length of the manifest's whole lines
	mClosed  bool
	mBroken  error // a failed append that could not be undone
}

// New checks cfg and returns a Writer for cfg.Dir, creating the directory
// if needed. The manifest is created with the first envelope kept (or by
// Close), so a program that fails to start leaves no capture behind.
func New(cfg Config) (*Writer, error) {
	if cfg.Dir == "" {
		return nil, configerr.New("Dir", "empty: want a directory")
	}
	if cfg.MaxCount < 0 {
		return nil, configerr.Errorf("MaxCount", "%d: want 1 or more envelopes (0: the default)", cfg.MaxCount)
	}
	if cfg.MaxBytes < 0 {
		return nil, configerr.Errorf("MaxBytes", "%d: want 1 or more bytes (0: the default)", cfg.MaxBytes)
	}
	if cfg.Every < 0 {
		return nil, configerr.Errorf("Every", "%d: want 1 or more (0: the default, 1)", cfg.Every)
	}
	if cfg.MaxCount == 0 {
		cfg.MaxCount = DefaultMaxCount
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Every == 0 {
		cfg.Every = 1
	}
	if err := checkDir(cfg.Dir); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(cfg.Dir)
	if err != nil {
		return nil, configerr.Wrap("Dir", err)
	}
	fi, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, configerr.Wrap("Dir", err)
	}
	return &Writer{cfg: cfg, root: root, dirInfo: fi}, nil
}

// checkDir creates dir if missing and refuses a file, a directory that
// holds a capture, and one it cannot write in.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return configerr.Wrap("Dir", err)
		}
	case err != nil:
		return configerr.Wrap("Dir", err)
	case !fi.IsDir():
		return configerr.Errorf("Dir", "%s is a file: want a directory", dir)
	}
	if _, err := os.Lstat(filepath.Join(dir, ManifestName)); err == nil {
		return configerr.Errorf("Dir", "%s already holds a capture (%s): give a new directory", dir, ManifestName)
	}
	if name, err := anEnvelopeFile(dir); err != nil {
		return configerr.Wrap("Dir", err)
	} else if name != "" {
		return configerr.Errorf("Dir", "%s already holds envelope files (%s): give a new directory", dir, name)
	}
	f, err := os.CreateTemp(dir, ".capture-probe-*")
	if err != nil {
		return configerr.Wrap("Dir", err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// anEnvelopeFile returns the name of a .envelope file in dir, or "".
func anEnvelopeFile(dir string) (string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(256)
		for _, n := range names {
			if strings.HasSuffix(n, ".envelope") {
				return n, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
	}
}

// Dir is the capture directory.
func (w *Writer) Dir() string { return w.cfg.Dir }

// Clipping bounds a manifest line whatever a client sends: header values
// and item types are the client's, and item types are at most one per item.
const (
	maxFieldLen    = 1024
	maxItemTypeLen = 100
	maxItemTypes   = 1000
)

// Keep keeps decoded, the envelope meta describes, unless Config.Every
// skips it or the capture is full. It sets meta's File and Bytes (and
// ReceivedAt if zero) itself; what happened is counted in Stats.
func (w *Writer) Keep(meta Entry, decoded []byte) {
	n, ok := w.reserve(int64(len(decoded)))
	if !ok {
		return
	}
	meta.File = fmt.Sprintf("%08d.envelope", n)
	meta.Bytes = len(decoded)
	if meta.ReceivedAt.IsZero() {
		meta.ReceivedAt = time.Now()
	}
	if strings.EqualFold(meta.Encoding, "identity") {
		meta.Encoding = "" // identity is no coding
	}
	clipEntry(&meta)
	err := w.write(&meta, decoded)
	if err != nil {
		w.checkPlace()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lost != nil {
		err = w.lost // not written, or written where Dir no longer leads
	}
	if err != nil {
		w.reserved--
		w.resBytes -= int64(len(decoded))
		w.st.Errors++
		w.st.LastError = err.Error()
		return
	}
	w.st.Kept++
	w.st.KeptBytes += int64(len(decoded))
}

// reserve decides whether an envelope of size bytes is kept and takes its
// file number and share of the bounds.
func (w *Writer) reserve(size int64) (n int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.st.Errors++
		w.st.LastError = "capture: closed"
		return 0, false
	}
	if w.lost != nil {
		w.offered++
		w.st.Errors++
		w.st.LastError = w.lost.Error()
		return 0, false
	}
	w.offered++
	if (w.offered-1)%int64(w.cfg.Every) != 0 {
		w.st.SkippedEvery++
		return 0, false
	}
	if w.full || w.reserved >= w.cfg.MaxCount || w.resBytes+size > w.cfg.MaxBytes {
		w.full = true
		w.st.SkippedMax++
		return 0, false
	}
	w.reserved++
	w.resBytes += size
	n = w.next
	w.next++
	return n, true
}

// write writes the envelope's file, then its manifest line; on failure it
// leaves neither behind.
func (w *Writer) write(meta *Entry, decoded []byte) error {
	line, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if len(line) > MaxManifestLine {
		return fmt.Errorf("capture: %s: manifest line of %d bytes, over %d", meta.File, len(line), MaxManifestLine)
	}
	f, err := w.root.OpenFile(meta.File, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	_, err = f.Write(decoded)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.appendLine(append(line, '\n'))
	}
	if err != nil {
		w.root.Remove(meta.File)
		return fmt.Errorf("capture: %s: %w", meta.File, err)
	}
	return nil
}

// appendLine appends one whole line to the manifest, creating it first if
// need be. A failed write is cut off again so that later lines do not
// follow half a line.
func (w *Writer) appendLine(line []byte) error {
	w.mmu.Lock()
	defer w.mmu.Unlock()
	if err := w.openManifestLocked(); err != nil {
		return err
	}
	if _, err := w.manifest.Write(line); err != nil {
		if terr := w.manifest.Truncate(w.mSize); terr != nil {
			w.mBroken = fmt.Errorf("manifest left with a partial line: %w", terr)
		}
		return fmt.Errorf("manifest: %w", err)
	}
	w.mSize += int64(len(line))
	return nil
}

// openManifestLocked creates the manifest unless it is open; w.mmu is held.
func (w *Writer) openManifestLocked() error {
	switch {
	case w.mBroken != nil:
		return w.mBroken
	case w.mClosed:
		return errors.New("closed")
	case w.manifest != nil:
		return nil
	}
	f, err := w.root.OpenFile(ManifestName, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		w.root.Remove(ManifestName)
		return fmt.Errorf("manifest: %w", err)
	}
	w.manifest, w.mInfo = f, fi
	return nil
}

// checkPlace checks that Config.Dir is still the directory New opened and
// the manifest, once created, still in it; if not, every envelope kept is
// counted as an error from now on (see Writer).
func (w *Writer) checkPlace() {
	w.mmu.Lock()
	mInfo := w.mInfo
	w.mmu.Unlock()
	w.checkPlaceOf(mInfo)
}

// checkPlaceOf is checkPlace with the manifest's identity given (nil: not
// created), for callers holding w.mmu.
func (w *Writer) checkPlaceOf(mInfo os.FileInfo) {
	var gone error
	if fi, err := os.Stat(w.cfg.Dir); err != nil || !os.SameFile(fi, w.dirInfo) {
		gone = fmt.Errorf("capture: %s was removed or replaced during the capture", w.cfg.Dir)
	} else if mInfo != nil {
		if fi, err := w.root.Lstat(ManifestName); err != nil || !os.SameFile(fi, mInfo) {
			gone = fmt.Errorf("capture: %s was removed or replaced during the capture", filepath.Join(w.cfg.Dir, ManifestName))
		}
	}
	if gone == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lost != nil {
		return
	}
	w.lost = gone
	w.st.Lost = w.st.Kept // later envelopes are errors
	w.st.LastError = w.lost.Error()
}

// clipEntry clips the client's strings so that a manifest line stays far
// under MaxManifestLine.
func clipEntry(e *Entry) {
	e.Route, e.PublicKey, e.Encoding = clip(e.Route, maxFieldLen), clip(e.PublicKey, maxFieldLen), clip(e.Encoding, maxFieldLen)
	e.UserAgent, e.ForwardedFor = clip(e.UserAgent, maxFieldLen), clip(e.ForwardedFor, maxFieldLen)
	long := len(e.Items) > maxItemTypes
	for t := range e.Items {
		if len(t) > maxItemTypeLen {
			long = true
		}
	}
	if !long {
		return
	}
	items := make(map[string]int, min(len(e.Items), maxItemTypes))
	for t, n := range e.Items {
		t = clip(t, maxItemTypeLen)
		if _, ok := items[t]; !ok && len(items) >= maxItemTypes {
			t = "other"
		}
		items[t] += n
	}
	e.Items = items
}

// clip cuts s to at most n bytes, on a UTF-8 boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ItemCounts counts an envelope's items by type, from its scan summary.
func ItemCounts(items []envelope.ItemSummary) map[string]int {
	m := make(map[string]int, len(items))
	for i := range items {
		m[clip(string(items[i].Type), maxItemTypeLen)]++
	}
	return m
}

// Stats returns the counts so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// Close ends the capture: later envelopes are counted as errors, and the
// manifest (created empty if nothing was kept) is synced and closed.
// Envelopes still being written when it is called are not kept. It checks
// that Config.Dir and its manifest are still those written to, and
// returns an error, with every envelope kept counted as lost, if not.
func (w *Writer) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.mmu.Lock()
	defer w.mmu.Unlock()
	if w.mClosed {
		return nil
	}
	defer w.root.Close()
	err := w.openManifestLocked()
	w.mClosed = true
	if err != nil {
		w.checkPlaceOf(w.mInfo)
		return fmt.Errorf("capture: %w", err)
	}
	err = w.manifest.Sync()
	if cerr := w.manifest.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("capture: manifest: %w", err)
	}
	w.checkPlaceOf(w.mInfo)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

// Summary says in one line what the capture kept, e.g. "kept 120
// envelopes (1.5 MiB) in DIR, skipped 30 (2 over the bounds, 28 thinned
// out)"; a capture whose directory or manifest went away says so and
// counts nothing kept.
func (w *Writer) Summary() string {
	st := w.Stats()
	kept, keptBytes := st.Kept, st.KeptBytes
	if st.Lost > 0 {
		// Everything kept is lost with the directory or manifest.
		kept, keptBytes = st.Kept-st.Lost, 0
	}
	s := fmt.Sprintf("kept %d envelopes (%s) in %s, skipped %d", kept, fmtBytes(keptBytes), w.cfg.Dir, st.SkippedMax+st.SkippedEvery)
	if st.SkippedMax+st.SkippedEvery > 0 {
		s += fmt.Sprintf(" (%d over the bounds, %d thinned out)", st.SkippedMax, st.SkippedEvery)
	}
	w.mu.Lock()
	lost := w.lost
	w.mu.Unlock()
	switch {
	case lost != nil:
		s += fmt.Sprintf(", %d lost and %d not written (%v)", st.Lost, st.Errors, lost)
	case st.Errors > 0:
		s += fmt.Sprintf(", %d not written (last: %s)", st.Errors, st.LastError)
	}
	return s
}

// fmtBytes writes n in B, KiB, MiB or GiB.
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
