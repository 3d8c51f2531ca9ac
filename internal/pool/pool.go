package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/useragent"
	"github.com/relayload/relayload/projects"
)

// MaxSize bounds Options.Size. The default mix averages ~14 KB raw plus
// ~3 KB zstd per entry, so a pool this size holds ~17 GB; Build allocates it
// all up front.
const MaxSize = 1_000_000

// DefaultUserAgents is the number of distinct agents when Options.UserAgents is 0.
const DefaultUserAgents = 1000

// DefaultZipfS is the Zipf exponent when Options.ZipfS is 0.
const DefaultZipfS = 1.1

// Options says what pool to build. Build fills defaults into the pool's copy.
type Options struct {
	Seed     uint64             `json:"seed"`
	Size     int                `json:"size"`
	Mix      Mix                `json:"mix"`    // nil = DefaultMix
	Projects []projects.Project `json:"-"`      // at least one
	ZipfS    float64            `json:"zipf_s"` // > 1; 0 = DefaultZipfS
	// UserAgents is the number of distinct agents entries draw from (with
	// Zipf, exponent ZipfS); 0 = DefaultUserAgents. Ignored when
	// UniqueUserAgents is set: then every entry has an agent no other entry has.
	UserAgents       int  `json:"user_agents"`
	UniqueUserAgents bool `json:"unique_user_agents"`
	// Agents, when given, replace the generated agents, and UserAgents
	// becomes their number: entries draw them with Zipf (exponent ZipfS,
	// rank = order) or, when they have weights, in proportion to the
	// weights. With UniqueUserAgents entry i takes Agents[i mod
	// len(Agents)] instead: every entry its own when there are as many
	// agents as entries. Each agent is classified (useragent.Classify) so
	// that the payloads fit it.
	Agents []useragent.Weighted `json:"agents,omitempty"`
	// AgentsFrom names where Agents came from (a file), for reports.
	AgentsFrom string               `json:"agents_from,omitempty"`
	Encoding   compression.Encoding `json:"encoding"` // "" = identity
	// Now anchors every timestamp; sent_at = Now. Zero = time.Now() at Build.
	Now time.Time `json:"now"`
	// Corpus names the recorded envelopes a pool was assembled from
	// (package replay) instead of generated; empty for a generated pool.
	// Mix, ZipfS, UserAgents and UniqueUserAgents do not apply to such a pool.
	Corpus string `json:"corpus,omitempty"`
}

// Entry is one pre-built envelope and what to send with it.
type Entry struct {
	Kind         Kind   `json:"kind"`
	Project      int    `json:"project"`       // index into Options.Projects
	EventID      string `json:"event_id"`      // envelope header event_id ("" for kinds without one)
	UserAgent    string `json:"user_agent"`    // HTTP User-Agent to send (also inside the payload)
	ForwardedFor string `json:"forwarded_for"` // X-Forwarded-For to send: a public IPv4 or IPv6 address
	Body         []byte `json:"-"`             // encoded with Options.Encoding: what goes on the wire
	RawSize      int    `json:"raw_size"`      // uncompressed envelope size
	Items        int    `json:"items"`         // items; a log container counts its records
	raw          []byte
}

// Pool is a built pool. Entries and their bytes must not be modified.
type Pool struct {
	Options Options
	Entries []Entry
	held    int64 // bytes of the chunks holding raw envelopes and bodies
}

// KindStats are per-kind counts and sizes.
type KindStats struct {
	Entries      int   `json:"entries"`
	Items        int   `json:"items"`
	RawBytes     int64 `json:"raw_bytes"`
	EncodedBytes int64 `json:"encoded_bytes"`
	MinRaw       int   `json:"min_raw"`
	MaxRaw       int   `json:"max_raw"`
}

// Stats describes the pool and the memory it holds.
type Stats struct {
	Entries      int    `json:"entries"`
	Encoding     string `json:"encoding"`
	RawBytes     int64  `json:"raw_bytes"`     // sum of uncompressed envelopes
	EncodedBytes int64  `json:"encoded_bytes"` // sum of bodies as sent
	// HeldBytes is the memory allocated for envelope bytes: the chunks that
	// hold raw envelopes and (unless identity, where Body is Raw) encoded
	// bodies, including the slack between entries (a few percent).
	HeldBytes int64              `json:"held_bytes"`
	ByKind    map[Kind]KindStats `json:"by_kind"`
}

func (o *Options) normalize() error {
	if err := o.normalizeCommon(); err != nil {
		return err
	}
	if o.Mix == nil {
		m, err := ParseMix(DefaultMix)
		if err != nil {
			return err
		}
		o.Mix = m
	}
	if err := o.Mix.Validate(); err != nil {
		return err
	}
	if o.ZipfS == 0 {
		o.ZipfS = DefaultZipfS
	}
	if !(o.ZipfS > 1) || math.IsInf(o.ZipfS, 0) {
		return fmt.Errorf("pool: zipf exponent %v must be a finite number > 1", o.ZipfS)
	}
	if len(o.Agents) > 0 {
		if err := CheckAgents(o.Agents); err != nil {
			return fmt.Errorf("pool: agents: %w", err)
		}
		o.UserAgents = len(o.Agents)
	}
	if o.UserAgents == 0 {
		o.UserAgents = DefaultUserAgents
	}
	if o.UserAgents < 1 || o.UserAgents > MaxSize {
		return fmt.Errorf("pool: user agents %d out of range 1..%d", o.UserAgents, MaxSize)
	}
	return nil
}

// normalizeCommon checks and fills what every pool needs, generated or
// assembled: size, projects, encoding and Now.
func (o *Options) normalizeCommon() error {
	if o.Size < 1 || o.Size > MaxSize {
		return fmt.Errorf("pool: size %d out of range 1..%d", o.Size, MaxSize)
	}
	if len(o.Projects) == 0 {
		return errors.New("pool: no projects")
	}
	if o.Encoding == "" {
		o.Encoding = compression.Identity
	}
	if _, err := compression.ParseEncoding(string(o.Encoding)); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	o.Now = o.Now.UTC().Truncate(time.Millisecond)
	return nil
}

// Salts separate the random streams drawn for one index.
const (
	saltPlan uint64 = 0x706c616e // kind plan
	saltBody uint64 = 0x626f6479 // envelope content
	saltUA   uint64 = 0x75736572 // user-agent table
)

// splitmix64 scrambles an index so neighbouring PCG streams share nothing.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// stream returns the PCG generator for (seed, salt, index).
func stream(seed, salt, i uint64) *rand.Rand {
	return rand.New(rand.NewPCG(splitmix64(seed^salt), splitmix64(i^salt<<32)))
}

// slot is one planned entry.
type slot struct {
	kind Kind
	// check-in pairs: role 1 = in_progress (base = own index), role 2 = the
	// final update of the pair started at base; role 0 = a lone final check-in.
	role int8
	base int
}

// plan assigns kinds. Each index draws from its own stream, so the plan is
// the same whatever the build parallelism; check-in pairs make it sequential.
func plan(o *Options) []slot {
	return newPlanner(o).next(make([]slot, 0, o.Size), 0, o.Size)
}

// Build builds the pool. It uses GOMAXPROCS goroutines; the result does not
// depend on their number or scheduling.
func Build(ctx context.Context, opts Options) (*Pool, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	p := &Pool{Options: opts, Entries: make([]Entry, opts.Size)}
	slots := plan(&opts)
	cs, err := loadCanaries()
	if err != nil {
		return nil, err
	}
	agents := newAgentTable(&opts)
	enc := compression.NewEncoder()
	held, err := buildParallel(ctx, opts.Size, func() worker {
		g := newGen(&opts, agents, cs)
		return worker{
			build: func(i int) error { return g.build(i, slots[i], &p.Entries[i], enc) },
			held: func() int64 {
				h := g.raws.held + g.bodies.held
				g.raws.held, g.bodies.held = 0, 0
				return h
			},
		}
	})
	if err != nil {
		return nil, err
	}
	p.held = held
	return p, nil
}

// worker is one build goroutine's work: build makes entry i; held returns
// the chunk bytes allocated since it was last called.
type worker struct {
	build func(i int) error
	held  func() int64
}

// buildParallel builds entries 0..n-1 on GOMAXPROCS goroutines (fewer for
// small pools), each with its own worker from newWorker, taking indexes in
// chunks of 64. It returns the chunk bytes the workers allocated, or the
// first error (entry errors name the entry).
func buildParallel(ctx context.Context, n int, newWorker func() worker) (int64, error) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n/64+1 {
		workers = n/64 + 1
	}
	const chunk = 64
	var next, held atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := newWorker()
			for {
				if ctx.Err() != nil {
					fail(ctx.Err())
					return
				}
				start := int(next.Add(chunk)) - chunk
				if start >= n {
					return
				}
				end := min(start+chunk, n)
				for i := start; i < end; i++ {
					if err := wk.build(i); err != nil {
						fail(fmt.Errorf("pool: entry %d: %w", i, err))
						return
					}
				}
				held.Add(wk.held())
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return held.Load(), nil
}

// Raw returns the uncompressed envelope i. The caller must not modify it.
func (p *Pool) Raw(i int) []byte { return p.Entries[i].raw }

// Hash is a hex sha256 over every entry's metadata and raw envelope, in order.
func (p *Pool) Hash() string {
	h := sha256.New()
	for i := range p.Entries {
		hashEntry(h, &p.Entries[i])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Stats counts entries, items and bytes per kind.
func (p *Pool) Stats() Stats {
	s := Stats{Encoding: string(p.Options.Encoding), ByKind: map[Kind]KindStats{}}
	for i := range p.Entries {
		s.add(&p.Entries[i])
	}
	s.HeldBytes = p.held
	return s
}

// ManifestEntry describes one dumped envelope.
type ManifestEntry struct {
	Index        int    `json:"index"`
	File         string `json:"file"`      // raw envelope, relative to the dump dir
	BodyFile     string `json:"body_file"` // encoded body as sent (same as File for identity)
	Kind         Kind   `json:"kind"`
	ProjectID    int64  `json:"project_id"`
	PublicKey    string `json:"public_key"`
	EventID      string `json:"event_id,omitempty"`
	UserAgent    string `json:"user_agent"`
	ForwardedFor string `json:"forwarded_for"`
	RawSize      int    `json:"raw_size"`
	EncodedSize  int    `json:"encoded_size"`
	Encoding     string `json:"encoding"`
	Items        int    `json:"items"`
}

// Manifest is manifest.json of a dump.
type Manifest struct {
	Options Options         `json:"options"`
	Hash    string          `json:"hash"`
	Stats   Stats           `json:"stats"`
	Entries []ManifestEntry `json:"entries"`
}

// encodingExt is the file suffix for encoded bodies.
var encodingExt = map[compression.Encoding]string{
	compression.Gzip: ".gz", compression.Deflate: ".zlib", compression.Brotli: ".br", compression.Zstd: ".zst",
}

// Dump writes every raw envelope as <index>-<kind>.envelope, the encoded
// body next to it (suffix .gz/.zlib/.br/.zst) unless the encoding is
// identity, and manifest.json. dir is created if needed. The manifest's
// entries are written as the envelopes are, not held (DumpStream dumps a
// generated pool without building it whole).
func (p *Pool) Dump(dir string) error {
	w, err := newDumpWriter(dir, p.Options)
	if err != nil {
		return err
	}
	defer w.abort()
	for i := range p.Entries {
		if err := w.add(i, &p.Entries[i]); err != nil {
			return err
		}
	}
	return w.finish(p.held)
}

// estimateSample is how many entries Estimate builds to measure a pool.
const estimateSample = 512

// Estimate is what a pool of some options is expected to hold.
type Estimate struct {
	Entries int
	// HeldBytes is the memory the envelope bytes take (Stats.HeldBytes),
	// EncodedBytes the bodies as sent among them (Stats.EncodedBytes).
	HeldBytes, EncodedBytes int64
	// EntryBytes is the memory of the entries' other fields (the Entry
	// values, their strings) and of the build's plan.
	EntryBytes int64
}

// Total is HeldBytes plus EntryBytes: the memory of the built pool.
func (e Estimate) Total() int64 { return e.HeldBytes + e.EntryBytes }

// EstimateSize builds the first entries of the pool opts describes (at most
// 512) and scales what they hold to opts.Size, before a pool too large for
// the machine is built: Build allocates all of it. The entries drawn first
// follow the same mix, projects and user agents as the rest.
func EstimateSize(ctx context.Context, opts Options) (Estimate, error) {
	if err := opts.normalize(); err != nil {
		return Estimate{}, err
	}
	sample := opts
	sample.Size = min(opts.Size, estimateSample)
	p, err := Build(ctx, sample)
	if err != nil {
		return Estimate{}, err
	}
	st := p.Stats()
	scale := func(v int64) int64 { return int64(float64(v) / float64(sample.Size) * float64(opts.Size)) }
	var strs int64
	for _, e := range p.Entries {
		strs += int64(len(e.EventID) + len(e.ForwardedFor))
		if opts.UniqueUserAgents && len(opts.Agents) == 0 {
			strs += int64(len(e.UserAgent)) // else shared by the entries
		}
	}
	est := EstimateOf(opts, scale(st.RawBytes), scale(st.EncodedBytes), scale(strs))
	est.EntryBytes += int64(unsafe.Sizeof(slot{})) * int64(opts.Size) // the build's plan
	return est, nil
}

// EstimateOf is the Estimate of a pool of opts.Size entries (built by
// Build or Assemble) whose raw envelopes sum to raw bytes, whose bodies as
// sent sum to encoded bytes, and whose entries' own strings (event ids,
// addresses, unshared agents) sum to strs bytes.
func EstimateOf(opts Options, raw, encoded, strs int64) Estimate {
	// The envelope bytes, the small gaps between them and each
	// worker's last chunks, partly used.
	bytes := raw
	if opts.Encoding != "" && opts.Encoding != compression.Identity {
		bytes += encoded
	}
	workers := int64(min(runtime.GOMAXPROCS(0), opts.Size/64+1))
	held := bytes*21/20 + workers*(chunkSize+bodyChunk)
	per := int64(unsafe.Sizeof(Entry{}))
	return Estimate{Entries: opts.Size, HeldBytes: held, EncodedBytes: encoded,
		EntryBytes: strs + per*int64(opts.Size)}
}
