package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/relayload/relayload/internal/capture"
	"github.com/relayload/relayload/internal/pool"
)

// DefaultMaxBytes bounds a corpus when Load is given no limit: the sum of
// its envelope files' sizes. The corpus is held in memory while a pool is
// built from it, next to the pool itself.
const DefaultMaxBytes = 1 << 30

// MaxKinds bounds the kinds of envelope one corpus may hold: blast counts
// requests per kind in fixed tables.
const MaxKinds = 256

// Suffix is the file name ending of the envelopes Load reads. A blast
// dump's encoded bodies (.envelope.gz and the like) do not end in it.
const Suffix = ".envelope"

// DumpManifest is the manifest a blast dump writes (pool.Dump).
const DumpManifest = "manifest.json"

// Corpus is a directory of recorded envelopes, read and checked, ready to
// build pools from (Build). It is not modified after Load and may be
// shared by concurrent builds.
type Corpus struct {
	dir      string
	manifest string // the manifest's file name, "" without one
	files    []*file
	bytes    int64
	only     []pool.Kind
}

// Summary describes a corpus for reports.
type Summary struct {
	Dir   string `json:"dir"`
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
	// Digest identifies the files' names and contents (sha256, shortened).
	Digest string `json:"digest"`
	// Manifest is the manifest the files' origins were read from
	// (manifest.jsonl of a capture, manifest.json of a blast dump), if any.
	Manifest string `json:"manifest,omitempty"`
	// ItemTypes counts the files' items by type; Kinds the files by kind.
	ItemTypes map[string]int    `json:"item_types"`
	Kinds     map[pool.Kind]int `json:"kinds"`
	// Only lists the kinds kept when the corpus was narrowed (Corpus.Only).
	Only []pool.Kind `json:"only,omitempty"`
}

// origin is where an envelope was first sent: its project's id and public
// key, either possibly unknown.
type origin struct {
	id  int64
	key string
}

// meta is what a manifest says about one file.
type meta struct {
	origin
	userAgent, forwardedFor string
}

// Load reads every *.envelope file of dir, in name order, and the
// manifest if there is one: a capture's manifest.jsonl (package capture)
// or a blast dump's manifest.json, which give each file's original
// project, key, User-Agent and X-Forwarded-For. A file that is not a valid
// envelope is refused with its name and the byte offset of the fault (the
// envelope package's error), as is an envelope without items. A directory
// without envelope files is an error, and so is one whose files add up to
// more than maxBytes (0: DefaultMaxBytes), which is checked before any is read.
func Load(dir string, maxBytes int64) (*Corpus, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	names, total, err := list(dir, maxBytes)
	if err != nil {
		return nil, err
	}
	metas, manifest, err := readManifest(dir, maxBytes)
	if err != nil {
		return nil, err
	}
	c := &Corpus{dir: dir, manifest: manifest, files: make([]*file, 0, len(names)), bytes: total}
	kinds := map[pool.Kind]bool{}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		if len(b) > math.MaxInt32 {
			return nil, fmt.Errorf("replay: %s: %d bytes: larger than one envelope may be here (2 GiB)", filepath.Join(dir, name), len(b))
		}
		m, hasMeta := metas[name]
		f, err := analyze(name, b, m, hasMeta)
		if err != nil {
			return nil, fmt.Errorf("replay: %s: %w", filepath.Join(dir, name), err)
		}
		kinds[f.kind] = true
		if len(kinds) > MaxKinds {
			return nil, fmt.Errorf("replay: %s: more than %d kinds of envelope in one corpus", dir, MaxKinds)
		}
		c.files = append(c.files, f)
	}
	return c, nil
}

// list returns the names of dir's envelope files, sorted, and their total
// size, refusing an empty or oversized corpus.
func list(dir string, maxBytes int64) ([]string, int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("replay: %w", err)
	}
	var names []string
	var total int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), Suffix) {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name())) // following links
		if err != nil {
			return nil, 0, fmt.Errorf("replay: %w", err)
		}
		if !st.Mode().IsRegular() {
			continue
		}
		names = append(names, e.Name())
		if total += st.Size(); total > maxBytes {
			return nil, 0, fmt.Errorf("replay: %s: the envelope files add up to more than %d bytes, the limit for a corpus held in memory", dir, maxBytes)
		}
	}
	if len(names) == 0 {
		return nil, 0, fmt.Errorf("replay: %s: no %s files", dir, Suffix)
	}
	return names, total, nil
}

// readManifest reads dir's manifest, if any, into each file's meta.
func readManifest(dir string, maxBytes int64) (map[string]meta, string, error) {
	if st, err := os.Stat(filepath.Join(dir, capture.ManifestName)); err == nil && st.Size() > maxBytes {
		return nil, "", fmt.Errorf("replay: %s: larger than %d bytes", filepath.Join(dir, capture.ManifestName), maxBytes)
	}
	entries, capErr := capture.ReadManifest(dir)
	dumpPath := filepath.Join(dir, DumpManifest)
	st, dumpErr := os.Stat(dumpPath)
	switch {
	case capErr == nil && dumpErr == nil:
		return nil, "", fmt.Errorf("replay: %s holds both %s and %s: keep the one that describes its envelopes", dir, capture.ManifestName, DumpManifest)
	case capErr == nil:
		out := make(map[string]meta, len(entries))
		for _, e := range entries {
			out[e.File] = meta{origin: origin{id: e.ProjectID, key: e.PublicKey}, userAgent: e.UserAgent, forwardedFor: e.ForwardedFor}
		}
		return out, capture.ManifestName, nil
	case !errors.Is(capErr, fs.ErrNotExist):
		return nil, "", fmt.Errorf("replay: %s: %w", dir, capErr)
	case errors.Is(dumpErr, fs.ErrNotExist):
		return nil, "", nil
	case dumpErr != nil:
		return nil, "", fmt.Errorf("replay: %w", dumpErr)
	case st.Size() > maxBytes:
		return nil, "", fmt.Errorf("replay: %s: larger than %d bytes", dumpPath, maxBytes)
	}
	b, err := os.ReadFile(dumpPath)
	if err != nil {
		return nil, "", fmt.Errorf("replay: %w", err)
	}
	// Only the fields replay uses: the dump's options need not be this
	// version's.
	var m struct {
		Entries []struct {
			File         string `json:"file"`
			ProjectID    int64  `json:"project_id"`
			PublicKey    string `json:"public_key"`
			UserAgent    string `json:"user_agent"`
			ForwardedFor string `json:"forwarded_for"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, "", fmt.Errorf("replay: %s: %w", dumpPath, err)
	}
	out := make(map[string]meta, len(m.Entries))
	for i, e := range m.Entries {
		if e.File == "" || e.File != filepath.Base(e.File) {
			return nil, "", fmt.Errorf("replay: %s: entry %d: file %q: want a file name in the dump directory", dumpPath, i, e.File)
		}
		out[e.File] = meta{origin: origin{id: e.ProjectID, key: e.PublicKey}, userAgent: e.UserAgent, forwardedFor: e.ForwardedFor}
	}
	return out, DumpManifest, nil
}

// Len is the number of envelope files.
func (c *Corpus) Len() int { return len(c.files) }

// Kinds are the kinds of the corpus's envelopes: the pool's five kinds
// found, in pool.Kinds order, then other item types by name.
func (c *Corpus) Kinds() []pool.Kind {
	seen := map[pool.Kind]bool{}
	for _, f := range c.files {
		seen[f.kind] = true
	}
	var out []pool.Kind
	for _, k := range pool.Kinds() {
		if seen[k] {
			out = append(out, k)
			delete(seen, k)
		}
	}
	return append(out, slices.Sorted(maps.Keys(seen))...)
}

// Only returns the corpus narrowed to the envelopes of the given kinds, in
// the same order; it is an error if none is left.
func (c *Corpus) Only(kinds ...pool.Kind) (*Corpus, error) {
	out := &Corpus{dir: c.dir, manifest: c.manifest, only: slices.Clone(kinds)}
	for _, f := range c.files {
		if slices.Contains(kinds, f.kind) {
			out.files = append(out.files, f)
			out.bytes += int64(len(f.data))
		}
	}
	if len(out.files) == 0 {
		return nil, fmt.Errorf("replay: %s: no envelopes of kind %v", c.dir, kinds)
	}
	return out, nil
}

// Summary describes the corpus.
func (c *Corpus) Summary() Summary {
	s := Summary{Dir: c.dir, Files: len(c.files), Bytes: c.bytes, Digest: c.digest(), Manifest: c.manifest,
		ItemTypes: map[string]int{}, Kinds: map[pool.Kind]int{}, Only: c.only}
	for _, f := range c.files {
		s.Kinds[f.kind]++
		for _, t := range f.types {
			s.ItemTypes[t]++
		}
	}
	return s
}

// digest identifies the files by name and content, so that two processes
// replaying the same corpus (shards of one schedule) agree on it wherever
// it lies.
func (c *Corpus) digest() string {
	h := sha256.New()
	for _, f := range c.files {
		h.Write([]byte(f.name))
		h.Write([]byte{0})
		h.Write(f.sum[:])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:12])
}

// String names the corpus: its directory and digest.
func (c *Corpus) String() string { return c.dir + " (" + c.digest() + ")" }

// FormatCounts writes counts by name as "event 10, transaction 5", the
// largest first (ties by name), for one-line descriptions.
func FormatCounts(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + strconv.Itoa(m[k])
	}
	return strings.Join(parts, ", ")
}
