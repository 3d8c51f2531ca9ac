package pool

import (
	"context"
	"math/rand/v2"

	"github.com/relayload/relayload/internal/compression"
)

// Filler writes entry i of a pool that Assemble builds: it appends the raw
// envelope to dst and returns the extended slice, and sets e's Kind,
// Project, EventID, UserAgent, ForwardedFor and Items (Assemble sets the
// sizes, the body and the raw bytes). A Filler is used by one goroutine.
type Filler func(i int, e *Entry, dst []byte) ([]byte, error)

// Assemble builds a pool of opts.Size entries whose envelopes come from a
// Filler instead of the generators: package replay makes pools of recorded
// envelopes with it. Each of the build's goroutines gets its own Filler
// from newFiller, so a Filler may keep scratch space. Envelopes are stored
// and encoded as Build stores them, so the pool sends, dumps and reports
// its memory like a generated one. Of opts, Size, Projects, Encoding and
// Now are checked and filled as by Build; Mix, ZipfS and the user-agent
// options are not used and stay as given.
func Assemble(ctx context.Context, opts Options, newFiller func() Filler) (*Pool, error) {
	if err := opts.normalizeCommon(); err != nil {
		return nil, err
	}
	p := &Pool{Options: opts, Entries: make([]Entry, opts.Size)}
	enc := compression.NewEncoder()
	held, err := buildParallel(ctx, opts.Size, func() worker {
		a := &assembler{fill: newFiller(), raws: chunks{}, bodies: chunks{size: bodyChunk}}
		return worker{
			build: func(i int) error { return a.build(i, &p.Entries[i], opts.Encoding, enc) },
			held: func() int64 {
				h := a.raws.held + a.bodies.held
				a.raws.held, a.bodies.held = 0, 0
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

// assembler is one Assemble goroutine's state.
type assembler struct {
	fill         Filler
	scratch      []byte
	encBuf       []byte
	raws, bodies chunks
}

func (a *assembler) build(i int, e *Entry, encoding compression.Encoding, enc *compression.Encoder) error {
	out, err := a.fill(i, e, a.scratch[:0])
	if err != nil {
		return err
	}
	a.scratch = out
	raw := a.raws.put(out)
	e.raw, e.Body, e.RawSize = raw, raw, len(raw)
	if encoding != compression.Identity {
		b, err := enc.Encode(encoding, raw, a.encBuf)
		if err != nil {
			return err
		}
		a.encBuf = b
		e.Body = a.bodies.put(b)
	}
	return nil
}

// PublicIP returns a public unicast address drawn from r as the generated
// pool draws Entry.ForwardedFor, for envelopes that come without one.
func PublicIP(r *rand.Rand) string { return publicIP(r) }
