package replay

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/projects"
)

// defaultDSNOrigin is the origin of a replaced dsn whose own could not be read.
const defaultDSNOrigin = "http://localhost"

// Salts separate the hash streams of a build.
const (
	saltID  uint64 = 0x69647320 // new ids
	saltXFF uint64 = 0x78666620 // drawn X-Forwarded-For
)

// Build builds a pool of opts.Size entries from the corpus: entry i is
// file i mod n (n files), so a pool as large as the corpus sends each file
// once, in name order. Of opts, Seed, Size, Projects, Encoding and Now are
// used (as by pool.Build); Mix and the user-agent options must be unset.
//
// Each entry is re-targeted and made fresh (see the package
// documentation): it goes to the run's project its original project maps
// to, with that project's dsn and DSC public_key; its ids are new for each
// copy of the corpus (copy i / n) and shared where the corpus shares them;
// its timestamps are shifted so that its reference time is opts.Now. Every
// other byte is the file's.
func Build(ctx context.Context, c *Corpus, opts pool.Options) (*pool.Pool, error) {
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	opts.Now = opts.Now.UTC().Truncate(1e6)
	opts.Corpus = c.Summary().Digest
	plan := c.plan(opts)
	return pool.Assemble(ctx, opts, func() pool.Filler {
		p := &patcher{opts: &opts, plan: plan, now: opts.Now.UnixNano()}
		return p.fill
	})
}

// checkOptions refuses the options that do not apply to a replayed pool.
func checkOptions(opts pool.Options) error {
	switch {
	case opts.Mix != nil:
		return fmt.Errorf("replay: a mix does not apply to recorded envelopes")
	case opts.UserAgents != 0 || opts.UniqueUserAgents:
		return fmt.Errorf("replay: user agents are the recorded ones; the user-agent options do not apply")
	case len(opts.Projects) == 0:
		return fmt.Errorf("replay: no projects")
	}
	return nil
}

// plan is what every entry of one file shares in a build.
type plan struct {
	files   []*file
	project []int    // target project index per file
	xff     []string // X-Forwarded-For per file
	// seqShift moves every session seq that is a time alike (the latest
	// reference time of the corpus to Now), so that the seqs of one
	// session stay in order across its envelopes.
	seqShift int64
}

// plan maps each file to its target project and address.
func (c *Corpus) plan(opts pool.Options) *plan {
	pl := &plan{files: c.files, project: make([]int, len(c.files)), xff: make([]string, len(c.files))}
	byKey := projects.NewIndex(opts.Projects)
	var latest int64
	for _, f := range c.files {
		if f.hasRef && f.ref > latest {
			latest = f.ref
		}
	}
	if latest > 0 {
		pl.seqShift = opts.Now.UnixNano() - latest
	}
	for i, f := range c.files {
		pl.project[i] = target(f.origin, opts.Projects, byKey)
		pl.xff[i] = f.forwardedFor
		if pl.xff[i] == "" {
			pl.xff[i] = pool.PublicIP(rand.New(rand.NewPCG(opts.Seed^saltXFF, uint64(i))))
		}
	}
	return pl
}

// target is the run's project an original project maps to: itself if it
// is one of the run's (same key, and same id when known), else one chosen
// by a hash of its key (or of its id, without a key), so that one original
// project always lands on the same project of ours and the corpus's skew
// over projects survives. Envelopes of no known project share one.
func target(o origin, ps []projects.Project, byKey projects.Index) int {
	if i, ok := byKey[o.key]; ok && o.key != "" && (o.id == 0 || ps[i].ID == o.id) {
		return i
	}
	h := fnv.New64a()
	switch {
	case o.key != "":
		h.Write([]byte("key:" + o.key))
	case o.id != 0:
		h.Write([]byte("id:" + strconv.FormatInt(o.id, 10)))
	}
	return int(h.Sum64() % uint64(len(ps)))
}

// patcher writes entries; one per build goroutine.
type patcher struct {
	opts *pool.Options
	plan *plan
	now  int64
	vals []byte     // replacement bytes of the current entry
	reps [][2]int32 // reps[k]: site k's replacement, vals[reps[k][0]:reps[k][1]]
}

// fill is a pool.Filler.
func (p *patcher) fill(i int, e *pool.Entry, dst []byte) ([]byte, error) {
	n := len(p.plan.files)
	fi, cp := i%n, uint64(i/n)
	f := p.plan.files[fi]
	proj := p.plan.project[fi]
	var shift int64
	if f.hasRef {
		shift = p.now - f.ref
	}
	p.vals, p.reps = p.vals[:0], p.reps[:0]
	for _, s := range f.sites {
		start := int32(len(p.vals))
		if s.kind != siteLength { // written below, once the payload's are known
			p.vals = p.replacement(p.vals, f, s, cp, proj, shift)
		}
		p.reps = append(p.reps, [2]int32{start, int32(len(p.vals))})
	}
	for _, it := range f.items {
		if it.length < 0 {
			continue
		}
		size := int64(it.size)
		for k := it.first; k < it.last; k++ {
			r, s := p.reps[k], f.sites[k]
			size += int64(r[1]-r[0]) - int64(s.end-s.start)
		}
		start := int32(len(p.vals))
		p.vals = strconv.AppendInt(p.vals, size, 10)
		p.reps[it.length] = [2]int32{start, int32(len(p.vals))}
	}
	pos := int32(0)
	for k, s := range f.sites {
		dst = append(dst, f.data[pos:s.start]...)
		dst = append(dst, p.rep(k)...)
		pos = s.end
	}
	dst = append(dst, f.data[pos:]...)

	*e = pool.Entry{Kind: f.kind, Project: proj, UserAgent: f.userAgent, ForwardedFor: p.plan.xff[fi], Items: f.nItems}
	if f.eventID >= 0 {
		e.EventID = string(p.rep(int(f.eventID)))
	}
	return dst, nil
}

func (p *patcher) rep(k int) []byte { return p.vals[p.reps[k][0]:p.reps[k][1]] }

// replacement appends site s's new value.
func (p *patcher) replacement(dst []byte, f *file, s site, cp uint64, proj int, shift int64) []byte {
	old := f.data[s.start:s.end]
	switch s.kind {
	case siteID:
		return appendNewID(dst, old, p.opts.Seed, cp)
	case siteTimeString:
		if t, ok := parseTimeString(old); ok {
			if out, ok := t.appendShifted(dst, shift); ok {
				return out
			}
		}
	case siteTimeNumber:
		if t, ok := parseTimeNumber(old); ok {
			if out, ok := t.appendShifted(dst, shift); ok {
				return out
			}
		}
	case siteSeq:
		if ms, ok := parseSeq(old); ok {
			return strconv.AppendInt(dst, ms+floorDiv(p.plan.seqShift, 1e6), 10)
		}
	case siteDSN:
		return envelope.AppendJSONEscaped(dst, p.dsn(proj, f.dsnOrigin))
	case siteKey:
		return envelope.AppendJSONEscaped(dst, p.opts.Projects[proj].PublicKey)
	}
	return append(dst, old...)
}

// dsn is project proj's DSN at origin.
func (p *patcher) dsn(proj int, origin string) string {
	if origin == "" {
		origin = defaultDSNOrigin
	}
	pr := p.opts.Projects[proj]
	d, err := pr.DSN(origin)
	if err != nil {
		d, _ = pr.DSN(defaultDSNOrigin)
	}
	return d
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// appendNewID appends the id that old becomes in copy cp: the same shape
// (length, dashes and other non-hex characters, letter case), new hex
// digits from a hash of (seed, cp, old). The same old id gets the same new
// one within a copy and another in every other copy.
func appendNewID(dst, old []byte, seed, cp uint64) []byte {
	h := fnv.New64a()
	h.Write(old)
	state := splitmix64(seed^saltID) ^ splitmix64(cp+saltID) ^ h.Sum64()
	upper := false
	for _, c := range old {
		if c >= 'a' && c <= 'f' {
			upper = false
			break
		}
		if c >= 'A' && c <= 'F' {
			upper = true
		}
	}
	digitsBase := "0123456789abcdef"
	if upper {
		digitsBase = "0123456789ABCDEF"
	}
	start := len(dst)
	var word uint64
	nib, hexes, letter := 0, 0, false
	for _, c := range old {
		if !isHex(c) {
			dst = append(dst, c)
			continue
		}
		if nib == 0 {
			state = splitmix64(state)
			word, nib = state, 16
		}
		d := word & 0xf
		word >>= 4
		nib--
		hexes++
		letter = letter || d >= 10
		dst = append(dst, digitsBase[d])
	}
	// An all-digit id of 12 or more digits can look like a card number to
	// Relay's scrubber: give it a letter, as the generated pool does.
	if hexes >= 12 && !letter {
		for k := len(dst) - 1; k >= start; k-- {
			if isHex(dst[k]) {
				dst[k] = digitsBase[10+state%6]
				break
			}
		}
	}
	return dst
}

// splitmix64 scrambles x (the pool's mixer).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Estimate is what a pool of opts built from the corpus will hold, for a
// memory check before Build (blast.CheckMemory): the raw envelopes exactly
// (each file's size times the entries that replay it), the encoded bodies
// from a sample of files encoded with opts.Encoding, and the corpus itself,
// held while the pool is built.
func Estimate(ctx context.Context, c *Corpus, opts pool.Options) (pool.Estimate, error) {
	if err := checkOptions(opts); err != nil {
		return pool.Estimate{}, err
	}
	if opts.Size < 1 || opts.Size > pool.MaxSize {
		return pool.Estimate{}, fmt.Errorf("replay: pool size %d out of range 1..%d", opts.Size, pool.MaxSize)
	}
	n := len(c.files)
	var raw, sites int64
	for i, f := range c.files {
		times := int64(opts.Size / n)
		if i < opts.Size%n {
			times++
		}
		raw += times * int64(len(f.data))
		sites += int64(len(f.sites)) * 12
	}
	encoded := raw // identity: the bodies are the raw envelopes
	if opts.Encoding != "" && opts.Encoding != compression.Identity {
		enc := compression.NewEncoder()
		const sample = 64
		var sRaw, sEnc int64
		var buf []byte
		for k := range min(sample, n) {
			if ctx.Err() != nil {
				return pool.Estimate{}, ctx.Err()
			}
			f := c.files[k*n/min(sample, n)]
			out, err := enc.Encode(opts.Encoding, f.data, buf)
			if err != nil {
				return pool.Estimate{}, fmt.Errorf("replay: %w", err)
			}
			buf = out
			sRaw += int64(len(f.data))
			sEnc += int64(len(out))
		}
		encoded = int64(float64(raw) * float64(sEnc) / float64(max(sRaw, 1)))
	}
	est := pool.EstimateOf(opts, raw, encoded, int64(opts.Size)*36)
	est.EntryBytes += c.bytes + sites // the corpus, held while building
	return est, nil
}
