package pool

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/useragent"
)

// gen builds entries; one per worker goroutine (it owns scratch buffers).
type gen struct {
	o      *Options
	agents *agentTable
	w      jw     // payload scratch
	hdr    jw     // envelope header scratch
	encBuf []byte // compression scratch
	now    float64
	r      *rand.Rand
	pcg    *rand.PCG
	fixed  *rand.PCG  // per-function streams (library source lines)
	fixedR *rand.Rand // over fixed

	sa       []byte // string arena block
	canaries canarySet
	lb       []byte // line scratch
	pre      []byte // envelope + item header scratch
	host     string // the event's web origin
	bundle   string // the event's JS bundle hash / iOS app container
	raws     chunks // raw envelopes
	bodies   chunks // encoded bodies
}

func newGen(o *Options, agents *agentTable, cs canarySet) *gen {
	pcg, fixed := rand.NewPCG(0, 0), rand.NewPCG(0, 0)
	return &gen{fixed: fixed, fixedR: rand.New(fixed), o: o, agents: agents, now: float64(o.Now.UnixMilli()) / 1000, pcg: pcg, r: rand.New(pcg), canaries: cs,
		bodies: chunks{size: bodyChunk}}
}

// seed points g.r at the content stream of index i.
func (g *gen) seed(i int) {
	g.pcg.Seed(splitmix64(g.o.Seed^saltBody), splitmix64(uint64(i)^saltBody<<32))
}

// ctx is what every kind's builder needs to know about its entry.
type ctx struct {
	index   int
	project int
	agent   useragent.Agent
	ip      string
}

func (g *gen) build(i int, s slot, e *Entry, enc *compression.Encoder) error {
	// Shared fields of a check-in pair come from the pair's first index.
	g.seed(s.base)
	c := ctx{index: i}
	c.project = g.zipf(len(g.o.Projects))
	// A check-in pair shares its drawn agent, but a unique agent is per
	// entry (drawn from its own stream, so the pair's other draws agree).
	c.agent = g.agents.pick(g, i)
	c.ip = publicIP(g.r)

	var env envelope.Envelope
	var items int
	var eventID string
	switch s.kind {
	case KindError:
		eventID, items = g.errorEnvelope(&c, &env)
	case KindTransaction:
		eventID, items = g.transactionEnvelope(&c, &env)
	case KindSession:
		items = g.sessionEnvelope(&c, &env)
	case KindCheckIn:
		items = g.checkInEnvelope(&c, s, &env)
	case KindLog:
		items = g.logEnvelope(&c, &env)
	}
	raw := g.assemble(&env)
	*e = Entry{
		Kind: s.kind, Project: c.project, EventID: strings.Clone(eventID), UserAgent: c.agent.UA, ForwardedFor: c.ip,
		RawSize: len(raw), Items: items, raw: raw, Body: raw,
	}
	if g.o.Encoding != compression.Identity {
		out, err := enc.Encode(g.o.Encoding, raw, g.encBuf)
		if err != nil {
			return err
		}
		g.encBuf = out
		e.Body = g.bodies.put(out)
	}
	return nil
}

// zipf draws a rank in [0, n) with exponent ZipfS: rank 0 is the most frequent.
func (g *gen) zipf(n int) int {
	if n <= 1 {
		return 0
	}
	return int(rand.NewZipf(g.r, g.o.ZipfS, 1, uint64(n-1)).Uint64())
}

// header writes the envelope header: event_id (if any), sent_at, sdk, and
// extra fields from fn.
func (g *gen) header(eventID string, sdkName, sdkVersion string, fn func(w *jw)) []byte {
	w := &g.hdr
	w.b = w.b[:0]
	w.comma = false
	w.open()
	if eventID != "" {
		w.kstr("event_id", eventID)
	}
	w.kstr("sent_at", g.o.Now.Format("2006-01-02T15:04:05.000Z"))
	w.obj("sdk")
	w.kstr("name", sdkName)
	w.kstr("version", sdkVersion)
	w.close()
	if fn != nil {
		fn(w)
	}
	w.close()
	return w.b // aliases scratch; env.Marshal copies it
}

// Envelope bytes live in large per-worker chunks instead of one allocation
// per entry: a per-entry copy plus allocation was a noticeable share of the
// build time (BenchmarkBuild20k). The payload is written straight into the
// chunk after a gap of headroom bytes; the envelope and item headers are
// then copied into the end of the gap, so the raw envelope is contiguous
// without copying the payload. The gaps are a small share of the pool's
// memory (Stats.HeldBytes counts them).
const (
	chunkSize  = 8 << 20   // raw envelopes; encoded bodies use bodyChunk
	headroom   = 640       // ≥ envelope header + item header of single-item envelopes
	maxPayload = 256 << 10 // payload room guaranteed before a new chunk is started
)

// chunks hands out byte ranges of large chunks; the ranges it returns are
// never written again.
type chunks struct {
	buf  []byte
	size int   // chunk size; 0 = chunkSize
	held int64 // bytes of all chunks allocated
}

// bodyChunk is smaller than chunkSize: bodies are small and need no payload
// room, and a worker's last, partly used chunk is wasted.
const bodyChunk = 1 << 20

// room makes sure n more bytes fit in the current chunk.
func (c *chunks) room(n int) {
	if cap(c.buf)-len(c.buf) < n {
		size := c.size
		if size == 0 {
			size = chunkSize
		}
		c.buf = make([]byte, 0, max(size, n))
		c.held += int64(cap(c.buf))
	}
}

// put copies b into the chunk and returns the copy (capacity clipped).
func (c *chunks) put(b []byte) []byte {
	c.room(len(b))
	start := len(c.buf)
	c.buf = append(c.buf, b...)
	return c.buf[start:len(c.buf):len(c.buf)]
}

// payload resets the payload writer to write into the raw chunk, after the
// header gap.
func (g *gen) payload() *jw {
	g.raws.room(headroom + maxPayload)
	start := len(g.raws.buf) + headroom
	g.w.b = g.raws.buf[start:start]
	g.w.comma = false
	return &g.w
}

// assemble returns the raw envelope. A single item whose payload is still
// where payload() put it gets its headers copied in front (zero-copy path);
// anything else is marshalled by envelope/ and copied into the chunk.
func (g *gen) assemble(env *envelope.Envelope) []byte {
	if len(env.Items) == 1 {
		it := &env.Items[0]
		p := it.Payload
		buf := g.raws.buf
		start := len(buf) + headroom
		if len(p) > 0 && start+len(p) < cap(buf) && &buf[start : start+1][0] == &p[0] {
			pre := append(g.pre[:0], env.Header...)
			pre = append(pre, '\n')
			pre = appendItemHeader(pre, it, len(p))
			pre = append(pre, '\n')
			g.pre = pre
			if len(pre) <= headroom {
				end := start + len(p) + 1
				buf = buf[:end]
				buf[end-1] = '\n'
				copy(buf[start-len(pre):start], pre)
				g.raws.buf = buf
				return buf[start-len(pre) : end : end]
			}
		}
	}
	return g.raws.put(env.Marshal())
}

// appendItemHeader writes an item header exactly as envelope.Marshal does
// (TestMarshalRoundTrip holds the two together).
func appendItemHeader(b []byte, it *envelope.Item, length int) []byte {
	b = append(b, `{"type":`...)
	b = envelope.AppendJSONString(b, it.Type)
	b = append(b, `,"length":`...)
	b = strconv.AppendInt(b, int64(length), 10)
	if it.ContentType != "" {
		b = append(b, `,"content_type":`...)
		b = envelope.AppendJSONString(b, it.ContentType)
	}
	if it.ItemCount != 0 {
		b = append(b, `,"item_count":`...)
		b = strconv.AppendInt(b, int64(it.ItemCount), 10)
	}
	return append(b, '}')
}

// take returns the payload written since payload(). It aliases the scratch
// buffer: valid until the next payload(); env.Marshal copies it.
func (g *gen) take() []byte { return g.w.b }

// takeCopy is take for envelopes with several payloads.
func (g *gen) takeCopy() []byte { return append([]byte(nil), g.w.b...) }

// hexID returns n random lowercase hex chars (n ≤ 32), in the string arena.
func (g *gen) hexID(n int) string {
	b := g.grow(n)
	x, y := g.r.Uint64(), g.r.Uint64()
	for j := 0; j < n; j++ {
		v := x
		if j >= 16 {
			v = y
		}
		b = append(b, hexDigits[(v>>(4*(j%16)))&0xf])
	}
	// An all-digit id of 15–16 chars can look like a card number to
	// Relay's scrubber (about 1 in 20,000 span ids): give it a letter.
	if n >= 12 && !hasHexLetter(b) {
		b[n-1] = 'a' + byte(x%6)
	}
	return g.done(b)
}

func hasHexLetter(b []byte) bool {
	for _, c := range b {
		if c >= 'a' {
			return true
		}
	}
	return false
}

// The string arena holds the short-lived strings an entry is made of
// (identifiers, paths, numbers): one 64 KiB allocation instead of hundreds
// of small ones per entry. Bytes are only ever appended, never rewritten, so
// a string handed out stays valid (and keeps its block alive) as long as it
// is referenced; strings kept beyond the entry (Entry.EventID) are cloned.
const arenaBlock = 64 << 10

// grow returns the arena's tail with room for n more bytes; pass the
// appended slice to done.
func (g *gen) grow(n int) []byte {
	if cap(g.sa)-len(g.sa) < n {
		g.sa = make([]byte, 0, max(arenaBlock, n))
	}
	return g.sa[len(g.sa):len(g.sa)]
}

// done turns the bytes appended to grow's result into a string.
func (g *gen) done(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if n := len(g.sa); n+len(b) <= cap(g.sa) && &b[0] == &g.sa[:cap(g.sa)][n] {
		g.sa = g.sa[:n+len(b)]
		return unsafe.String(&b[0], len(b))
	}
	return string(b) // append outgrew the block: b is a private copy
}

// s concatenates parts into the arena.
func (g *gen) s(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := g.grow(n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return g.done(b)
}

// itoa formats n into the arena.
func (g *gen) itoa(n int) string {
	return g.done(strconv.AppendInt(g.grow(20), int64(n), 10))
}

func (g *gen) uuid() string { return g.hexID(32) }

// rfc3339 formats t (seconds since epoch) with milliseconds.
func rfc3339(t float64) string {
	return time.UnixMilli(int64(t * 1000)).UTC().Format("2006-01-02T15:04:05.000Z")
}

func (g *gen) pickS(list []string) string { return list[g.r.IntN(len(list))] }
