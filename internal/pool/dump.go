package pool

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/relayload/relayload/internal/compression"
)

// DumpBatch is how many envelopes DumpStream builds before it writes them
// and lets them go: what it holds at once, whatever the pool's size.
const DumpBatch = 256

// DumpStream writes the pool opts describes as Dump writes a built one
// (the same files, the same manifest.json, hash included), but builds and
// writes it DumpBatch envelopes at a time, so its memory does not grow
// with opts.Size: a pool too large to hold can still be dumped. It
// returns the number of envelopes written. The manifest's Stats.HeldBytes
// is what the batches allocated for envelope bytes.
func DumpStream(ctx context.Context, opts Options, dir string) (int, error) {
	if err := opts.normalize(); err != nil {
		return 0, err
	}
	cs, err := loadCanaries()
	if err != nil {
		return 0, err
	}
	w, err := newDumpWriter(dir, opts)
	if err != nil {
		return 0, err
	}
	defer w.abort()
	agents := newAgentTable(&opts)
	enc := compression.NewEncoder()
	pl := newPlanner(&opts)
	batch := make([]Entry, min(DumpBatch, opts.Size))
	slots := make([]slot, 0, DumpBatch+1)
	var gens []*gen
	var held int64
	for start := 0; start < opts.Size; start += len(batch) {
		n := min(DumpBatch, opts.Size-start)
		slots = pl.next(slots, start, n)
		k := 0
		var mu sync.Mutex // newWorker runs on each worker's goroutine
		h, err := buildParallel(ctx, n, func() worker {
			mu.Lock()
			if k == len(gens) {
				gens = append(gens, newGen(&opts, agents, cs))
			}
			g := gens[k]
			k++
			mu.Unlock()
			return worker{
				build: func(i int) error { return g.build(start+i, slots[i], &batch[i], enc) },
				held: func() int64 {
					h := g.raws.held + g.bodies.held
					g.raws.held, g.bodies.held = 0, 0
					return h
				},
			}
		})
		if err != nil {
			return 0, err
		}
		held += h
		for i := range n {
			if err := w.add(start+i, &batch[i]); err != nil {
				return 0, err
			}
		}
		// The batch is written: its bytes may be overwritten by the next.
		clear(batch)
		for _, g := range gens {
			g.raws.buf, g.bodies.buf = g.raws.buf[:0], g.bodies.buf[:0]
		}
		if len(batch) > n {
			batch = batch[:n]
		}
	}
	if err := w.finish(held); err != nil {
		return 0, err
	}
	return opts.Size, nil
}

// planner hands out the plan's slots in order, a range at a time, holding
// only the check-in pair that straddles two ranges: the same slots plan
// returns, without the whole plan in memory.
type planner struct {
	o       *Options
	p       picker
	pending *slot // the second half of a pair begun at the previous range's end
	i       int   // the next index to draw
}

func newPlanner(o *Options) *planner { return &planner{o: o, p: newPicker(o.Mix)} }

// next returns slots start..start+n−1 in dst (reused); ranges must be
// asked for in order, each right after the previous one.
func (pl *planner) next(dst []slot, start, n int) []slot {
	dst = dst[:0]
	if pl.pending != nil {
		dst = append(dst, *pl.pending)
		pl.pending = nil
	}
	for len(dst) < n {
		i := pl.i
		u := stream(pl.o.Seed, saltPlan, uint64(i)).Float64()
		k := pl.p.pick(u)
		switch {
		case k != KindCheckIn:
			dst = append(dst, slot{kind: k, base: i})
			pl.i++
		case i+1 < pl.o.Size:
			dst = append(dst, slot{kind: KindCheckIn, role: 1, base: i})
			second := slot{kind: KindCheckIn, role: 2, base: i}
			if len(dst) < n {
				dst = append(dst, second)
			} else {
				pl.pending = &second
			}
			pl.i += 2
		default:
			// The last slot cannot hold a pair: another kind, or a lone final check-in.
			if k2, ok := pl.p.pickNot(u, KindCheckIn); ok {
				dst = append(dst, slot{kind: k2, base: i})
			} else {
				dst = append(dst, slot{kind: KindCheckIn, role: 0, base: i})
			}
			pl.i++
		}
	}
	return dst
}

// dumpWriter writes a dump entry by entry: each envelope's files at once,
// its manifest entry to a temporary file, and at the end manifest.json
// with the hash and stats that need every entry first.
type dumpWriter struct {
	dir     string
	opts    Options
	tmp     *os.File
	entries *bufio.Writer
	hash    hash.Hash
	stats   Stats
	n       int
}

// manifestTmp holds a dump's manifest entries until manifest.json is written.
const manifestTmp = "manifest.json.entries"

func newDumpWriter(dir string, opts Options) (*dumpWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pool: dump: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, manifestTmp))
	if err != nil {
		return nil, fmt.Errorf("pool: dump: %w", err)
	}
	return &dumpWriter{dir: dir, opts: opts, tmp: f, entries: bufio.NewWriter(f), hash: sha256.New(),
		stats: Stats{Encoding: string(opts.Encoding), ByKind: map[Kind]KindStats{}}}, nil
}

// add writes entry i.
func (w *dumpWriter) add(i int, e *Entry) error {
	pr := w.opts.Projects[e.Project]
	name := fmt.Sprintf("%06d-%s.envelope", i, e.Kind)
	if err := os.WriteFile(filepath.Join(w.dir, name), e.raw, 0o644); err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	body := name
	if ext, ok := encodingExt[w.opts.Encoding]; ok {
		body = name + ext
		if err := os.WriteFile(filepath.Join(w.dir, body), e.Body, 0o644); err != nil {
			return fmt.Errorf("pool: dump: %w", err)
		}
	}
	b, err := json.MarshalIndent(ManifestEntry{
		Index: i, File: name, BodyFile: body, Kind: e.Kind, ProjectID: pr.ID, PublicKey: pr.PublicKey,
		EventID: e.EventID, UserAgent: e.UserAgent, ForwardedFor: e.ForwardedFor,
		RawSize: e.RawSize, EncodedSize: len(e.Body), Encoding: string(w.opts.Encoding), Items: e.Items,
	}, "  ", " ")
	if err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	sep := ",\n  "
	if w.n == 0 {
		sep = "  "
	}
	w.entries.WriteString(sep)
	w.entries.Write(b)
	hashEntry(w.hash, e)
	w.stats.add(e)
	w.n++
	return nil
}

// finish writes manifest.json as json.MarshalIndent(Manifest, "", " ")
// would, and removes the temporary file.
func (w *dumpWriter) finish(held int64) error {
	if err := w.entries.Flush(); err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	w.stats.HeldBytes = held
	opts, err := json.MarshalIndent(w.opts, " ", " ")
	if err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	stats, err := json.MarshalIndent(w.stats, " ", " ")
	if err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	hashJSON, _ := json.Marshal(hex.EncodeToString(w.hash.Sum(nil)))
	f, err := os.Create(filepath.Join(w.dir, "manifest.json"))
	if err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	defer f.Close()
	out := bufio.NewWriter(f)
	fmt.Fprintf(out, "{\n \"options\": %s,\n \"hash\": %s,\n \"stats\": %s,\n \"entries\": [\n", opts, hashJSON, stats)
	if _, err := w.tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	if _, err := io.Copy(out, w.tmp); err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	out.WriteString("\n ]\n}\n")
	if err := out.Flush(); err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("pool: dump: %w", err)
	}
	w.abort()
	return nil
}

// abort closes and removes the temporary file (a no-op once done).
func (w *dumpWriter) abort() {
	if w.tmp != nil {
		w.tmp.Close()
		os.Remove(w.tmp.Name())
		w.tmp = nil
	}
}

// hashEntry adds e to a pool's Hash.
func hashEntry(h hash.Hash, e *Entry) {
	var n [8]byte
	for _, s := range []string{string(e.Kind), e.EventID, e.UserAgent, e.ForwardedFor} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	binary.LittleEndian.PutUint64(n[:], uint64(e.Project))
	h.Write(n[:])
	binary.LittleEndian.PutUint64(n[:], uint64(len(e.raw)))
	h.Write(n[:])
	h.Write(e.raw)
}

// add counts e in s.
func (s *Stats) add(e *Entry) {
	ks := s.ByKind[e.Kind]
	if ks.Entries == 0 || e.RawSize < ks.MinRaw {
		ks.MinRaw = e.RawSize
	}
	ks.MaxRaw = max(ks.MaxRaw, e.RawSize)
	ks.Entries++
	ks.Items += e.Items
	ks.RawBytes += int64(e.RawSize)
	ks.EncodedBytes += int64(len(e.Body))
	s.ByKind[e.Kind] = ks
	s.Entries++
	s.RawBytes += int64(e.RawSize)
	s.EncodedBytes += int64(len(e.Body))
}

// DumpHeld is what DumpStream holds at once of a pool whose Estimate is e:
// one batch of its entries and each build goroutine's chunks.
func (e Estimate) DumpHeld() int64 {
	n := int64(max(e.Entries, 1))
	workers := int64(min(runtime.GOMAXPROCS(0), DumpBatch/64+1))
	return e.Total()/n*min(n, DumpBatch) + workers*(chunkSize+bodyChunk)
}
