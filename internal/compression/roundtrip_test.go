package compression

import (
	"bytes"
	stdflate "compress/flate"
	stdgzip "compress/gzip"
	stdzlib "compress/zlib"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// sizes are the body sizes of the round-trip tables. Under -race, where the
// codecs run 10–20× slower and the point is concurrency, 1 MB becomes 64 KB.
var sizes = func() []int {
	if raceEnabled {
		return []int{0, 1, 10 << 10, 64 << 10}
	}
	return []int{0, 1, 10 << 10, 1 << 20}
}()

func TestParseEncoding(t *testing.T) {
	tests := []struct {
		in   string
		want Encoding
		err  bool
	}{
		{"", Identity, false},
		{"identity", Identity, false},
		{"IDENTITY", Identity, false},
		{"UTF-8", Identity, false}, // Relay ignores it (sentry.java.android)
		{"utf-8", Identity, false},
		{"  ", Identity, false},
		{"gzip", Gzip, false},
		{"GZip", Gzip, false},
		{"x-gzip", Gzip, false},
		{"X-GZIP", Gzip, false},
		{" gzip ", Gzip, false},
		{"deflate", Deflate, false},
		{"Deflate", Deflate, false},
		{"br", Brotli, false},
		{"BR", Brotli, false},
		{"zstd", Zstd, false},
		{"ZSTD", Zstd, false},
		{"compress", "", true},
		{"x-compress", "", true},
		{"lz4", "", true},
		{"gzip, br", "", true},
		{"gzip;q=1", "", true},
		{"utf8", "", true},
		{"brotli", "", true},
	}
	for _, tt := range tests {
		got, err := ParseEncoding(tt.in)
		if tt.err {
			if !errors.Is(err, ErrUnknownEncoding) {
				t.Errorf("ParseEncoding(%q) = %q, %v; want ErrUnknownEncoding", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseEncoding(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	// Every Encoding parses from its own token.
	for _, e := range Encodings() {
		if got, err := ParseEncoding(e.String()); err != nil || got != e {
			t.Errorf("ParseEncoding(%q) = %q, %v", e, got, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseEncoding("Zstd") }); n != 0 {
		t.Errorf("ParseEncoding allocates %v times", n)
	}
}

func TestParseContentEncoding(t *testing.T) {
	tests := []struct {
		lines []string
		want  Encoding
		err   error
	}{
		{nil, Identity, nil},
		{[]string{""}, Identity, nil},
		{[]string{"gzip"}, Gzip, nil},
		{[]string{" , Gzip ,"}, Gzip, nil},
		{[]string{"identity", "zstd"}, Zstd, nil},
		{[]string{"br", ""}, Brotli, nil},
		{[]string{"UTF-8, deflate"}, Deflate, nil},
		{[]string{"gzip, zstd"}, "", ErrStackedEncodings},
		{[]string{"gzip", "zstd"}, "", ErrStackedEncodings},
		{[]string{"zstd", "identity", "gzip"}, "", ErrStackedEncodings},
		{[]string{"gzip", "gzip"}, "", ErrStackedEncodings},
		{[]string{"gzip", "compress"}, "", ErrUnknownEncoding},
		{[]string{"gzip;q=1"}, "", ErrUnknownEncoding},
	}
	for _, tt := range tests {
		got, err := ParseContentEncoding(tt.lines)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("ParseContentEncoding(%q) = %q, %v; want %v", tt.lines, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseContentEncoding(%q) = %q, %v; want %q", tt.lines, got, err, tt.want)
		}
	}
	lines := []string{"zstd"}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseContentEncoding(lines) }); n != 0 {
		t.Errorf("ParseContentEncoding allocates %v times", n)
	}
}

func TestRoundTrip(t *testing.T) {
	enc := NewEncoder()
	dec := NewDecoder(4 << 20)
	for _, e := range Encodings() {
		for _, n := range sizes {
			for _, body := range []struct {
				name string
				src  []byte
			}{{"text", testBody(uint64(n), n)}, {"random", randomBytes(uint64(n), n)}} {
				name := fmt.Sprintf("%s/%d/%s", e, n, body.name)
				src := body.src
				comp, err := enc.Encode(e, src, nil)
				if err != nil {
					t.Fatalf("%s: Encode: %v", name, err)
				}
				if e != Identity && n >= 10<<10 && body.name == "text" && len(comp) >= len(src)/2 {
					t.Errorf("%s: encoded %d bytes, expected real compression", name, len(comp))
				}
				if e == Identity && !bytes.Equal(comp, src) {
					t.Errorf("%s: identity encoding changed the body", name)
				}
				got, err := dec.Decode(e, comp, nil)
				if err != nil {
					t.Fatalf("%s: Decode: %v", name, err)
				}
				if !bytes.Equal(got, src) {
					t.Fatalf("%s: round trip mismatch (%d vs %d bytes)", name, len(got), len(src))
				}
				// A reused buffer with old content and room to spare.
				buf := append(make([]byte, 0, 2*n+64), "old content"...)
				got, err = dec.Decode(e, comp, buf)
				if err != nil || !bytes.Equal(got, src) {
					t.Fatalf("%s: Decode into reused buffer: %v", name, err)
				}
				// A reused buffer that is too small.
				got, err = dec.Decode(e, comp, make([]byte, 3, 5))
				if err != nil || !bytes.Equal(got, src) {
					t.Fatalf("%s: Decode into small buffer: %v", name, err)
				}
				// Encode into a dirty buffer.
				comp2, err := enc.Encode(e, src, append(make([]byte, 0, 8), "garbage"...))
				if err != nil || !bytes.Equal(comp2, comp) {
					t.Fatalf("%s: Encode into reused buffer differs: %v", name, err)
				}
			}
		}
	}
}

// TestStdlibDecodesOurs checks our gzip and deflate output with independent
// decoders from the standard library.
func TestStdlibDecodesOurs(t *testing.T) {
	enc := NewEncoder()
	for _, n := range sizes {
		src := testBody(7, n)
		gz, _ := enc.Encode(Gzip, src, nil)
		r, err := stdgzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatalf("gzip/%d: stdlib header: %v", n, err)
		}
		if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("gzip/%d: stdlib decode: %v", n, err)
		}
		zl, _ := enc.Encode(Deflate, src, nil)
		zr, err := stdzlib.NewReader(bytes.NewReader(zl))
		if err != nil {
			t.Fatalf("deflate/%d: stdlib zlib header: %v", n, err)
		}
		if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("deflate/%d: stdlib zlib decode: %v", n, err)
		}
	}
}

// TestDecodesStdlib decodes what independent encoders made: the standard
// library for gzip, zlib and raw deflate; klauspost's stream encoder (frames
// without a declared size, several blocks) for zstd.
func TestDecodesStdlib(t *testing.T) {
	dec := NewDecoder(4 << 20)
	for _, n := range sizes {
		src := testBody(11, n)
		cases := map[string]struct {
			enc  Encoding
			data []byte
		}{
			"gzip":        {Gzip, stdGzip(t, src)},
			"zlib":        {Deflate, stdZlib(t, src)},
			"raw-deflate": {Deflate, stdRawDeflate(t, src, stdflate.DefaultCompression)},
			"raw-stored":  {Deflate, stdRawDeflate(t, src, stdflate.NoCompression)},
			"zstd-stream": {Zstd, zstdStream(t, src, -1)},
			"zstd-sized":  {Zstd, zstdStream(t, src, int64(len(src)))},
		}
		for name, c := range cases {
			got, err := dec.Decode(c.enc, c.data, nil)
			if err != nil || !bytes.Equal(got, src) {
				t.Errorf("%s/%d: Decode: %v (got %d bytes)", name, n, err, len(got))
			}
		}
	}
}

// TestDeflateRawLookingLikeZlib decodes a raw deflate stream whose first two
// bytes pass the zlib header check. Real encoders never make one (the first
// byte would have to be a non-final stored block with non-zero padding bits),
// so it is built by hand: a stored block 78 9c 00 63 ff (header byte 0x78
// whose padding bits are 01111, LEN 0x009c, NLEN 0xff63), 156 bytes, and an
// empty final fixed block 03 00. As zlib it fails (LEN/NLEN mismatch in what
// follows the "header"), so Decode must fall back to raw deflate.
func TestDeflateRawLookingLikeZlib(t *testing.T) {
	payload := testBody(21, 0x9c)
	raw := append([]byte{0x78, 0x9c, 0x00, 0x63, 0xff}, payload...)
	raw = append(raw, 0x03, 0x00)
	if !isZlibHeader(raw) {
		t.Fatal("hand-made stream does not look like zlib; test proves nothing")
	}
	// An independent decoder agrees this is valid raw deflate.
	want, err := io.ReadAll(stdflate.NewReader(bytes.NewReader(raw)))
	if err != nil || !bytes.Equal(want, payload) {
		t.Fatalf("stdlib flate: %v", err)
	}
	got, err := NewDecoder(1<<20).Decode(Deflate, raw, nil)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("Decode: %v, %d bytes", err, len(got))
	}
	// With a cap below its size the fallback still reports ErrTooLarge
	// rather than the zlib attempt's corruption.
	if _, err := NewDecoder(100).Decode(Deflate, raw, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Decode with cap 100: %v", err)
	}
}

func TestGzipMultiMember(t *testing.T) {
	a, b := testBody(1, 5000), testBody(2, 7000)
	enc := NewEncoder()
	ga, _ := enc.Encode(Gzip, a, nil)
	gb, _ := enc.Encode(Gzip, b, nil)
	got, err := NewDecoder(1<<20).Decode(Gzip, append(append([]byte{}, ga...), gb...), nil)
	if err != nil || !bytes.Equal(got, append(append([]byte{}, a...), b...)) {
		t.Fatalf("two members: %v, %d bytes", err, len(got))
	}
	// The cap applies to the whole body, not per member.
	if _, err := NewDecoder(10000).Decode(Gzip, append(append([]byte{}, ga...), gb...), nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("two members over the cap: %v", err)
	}
}

func TestZstdFrames(t *testing.T) {
	a, b := testBody(1, 5000), testBody(2, 7000)
	enc := NewEncoder()
	za, _ := enc.Encode(Zstd, a, nil)
	zb := zstdStream(t, b, -1)
	// A skippable frame (magic 0x184D2A50, 4-byte size, payload) between them.
	skip := []byte{0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'}
	body := append(append(append([]byte{}, za...), skip...), zb...)
	want := append(append([]byte{}, a...), b...)
	got, err := NewDecoder(1<<20).Decode(Zstd, body, nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("frames: %v, %d bytes", err, len(got))
	}
	// The cap applies to the sum of frames, each of which is under it.
	for _, max := range []int64{6000, 11999} {
		got, err := NewDecoder(max).Decode(Zstd, body, nil)
		if !errors.Is(err, ErrTooLarge) || int64(len(got)) > max {
			t.Fatalf("cap %d: %v, %d bytes", max, err, len(got))
		}
	}
	if got, err := NewDecoder(12000).Decode(Zstd, body, nil); err != nil || len(got) != 12000 {
		t.Fatalf("exactly at the cap: %v", err)
	}
}

func TestTooLarge(t *testing.T) {
	enc := NewEncoder()
	for _, max := range []int64{1, 1000, 1 << 16} {
		dec := NewDecoder(max)
		for _, e := range Encodings() {
			for _, n := range []int64{max + 1, 2 * max, max + 20000} {
				src := testBody(3, int(n))
				comp, _ := enc.Encode(e, src, nil)
				bodies := [][]byte{comp}
				if e == Zstd {
					bodies = append(bodies, zstdStream(t, src, -1)) // no declared size
				}
				for _, body := range bodies {
					for _, dst := range [][]byte{nil, make([]byte, 0, 4*n)} {
						got, err := dec.Decode(e, body, dst)
						if !errors.Is(err, ErrTooLarge) {
							t.Errorf("%s: %d bytes with cap %d: err = %v, want ErrTooLarge", e, n, max, err)
						}
						if errors.Is(err, ErrCorrupt) {
							t.Errorf("%s: error is both too large and corrupt: %v", e, err)
						}
						if int64(len(got)) > max {
							t.Errorf("%s: returned %d bytes > cap %d", e, len(got), max)
						}
					}
				}
			}
			src := testBody(3, int(max))
			ok, _ := enc.Encode(e, src, nil)
			if got, err := dec.Decode(e, ok, nil); err != nil || !bytes.Equal(got, src) {
				t.Errorf("%s: exactly the cap (%d): %d bytes, %v", e, max, len(got), err)
			}
		}
	}
}

func TestDefaultCap(t *testing.T) {
	if got := NewDecoder(0).MaxDecoded(); got != DefaultMaxDecoded {
		t.Fatalf("NewDecoder(0).MaxDecoded() = %d", got)
	}
	if got := NewDecoder(-5).MaxDecoded(); got != DefaultMaxDecoded {
		t.Fatalf("NewDecoder(-5).MaxDecoded() = %d", got)
	}
}

func TestCorrupt(t *testing.T) {
	enc := NewEncoder()
	dec := NewDecoder(1 << 20)
	src := testBody(5, 20000)
	for _, e := range Encodings() {
		if e == Identity {
			continue
		}
		good, _ := enc.Encode(e, src, nil)
		cases := map[string][]byte{
			"empty":         {},
			"one byte":      good[:1],
			"header only":   good[:min(10, len(good)-1)],
			"truncated":     good[:len(good)/2],
			"last byte cut": good[:len(good)-1],
			"trailing byte": append(append([]byte{}, good...), 0),
			"trailing junk": append(append([]byte{}, good...), "hello world"...),
			"not encoded":   src,
			"random":        randomBytes(9, 500),
		}
		switch e {
		case Gzip: // CRC32 then ISIZE at the end
			cases["bad checksum"] = flip(good, len(good)-8)
			cases["bad size"] = flip(good, len(good)-1)
			cases["bad magic"] = flip(good, 0)
		case Deflate: // Adler-32 at the end
			cases["bad checksum"] = flip(good, len(good)-1)
			cases["bad header"] = flip(good, 1)
		case Zstd:
			cases["bad magic"] = flip(good, 0)
			cases["bad checksum"] = flip(good, len(good)-1) // XXH64 low 4 bytes (encoder writes one)
		case Brotli:
			cases["bad last byte"] = flip(good, len(good)-1)
		}
		cases["flipped middle"] = flip(good, len(good)/2)
		for name, body := range cases {
			got, err := dec.Decode(e, body, nil)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s/%s: err = %v, want ErrCorrupt", e, name, err)
			}
			if len(got) > 1<<20 {
				t.Errorf("%s/%s: %d bytes", e, name, len(got))
			}
		}
	}
}

func TestUnknownEncoding(t *testing.T) {
	if _, err := NewDecoder(10).Decode("lzw", []byte("x"), nil); !errors.Is(err, ErrUnknownEncoding) {
		t.Errorf("Decode: %v", err)
	}
	if _, err := NewEncoder().Encode("lzw", []byte("x"), nil); !errors.Is(err, ErrUnknownEncoding) {
		t.Errorf("Encode: %v", err)
	}
}

// TestEncodeDeterministic checks that output depends only on the input: the
// same across calls, across Encoders, and whatever a pooled writer encoded
// before (random data, a large body, a tiny one).
func TestEncodeDeterministic(t *testing.T) {
	history := [][]byte{randomBytes(1, sizes[len(sizes)-1]), testBody(2, sizes[len(sizes)-1]), testBody(3, 100), {}}
	for _, e := range Encodings() {
		for _, n := range sizes {
			src := testBody(13, n)
			want, _ := NewEncoder().Encode(e, src, nil)
			for i, prev := range history {
				enc := NewEncoder()
				enc.Encode(e, prev, nil)
				got, _ := enc.Encode(e, src, nil)
				if !bytes.Equal(got, want) {
					t.Errorf("%s/%d: output after encoding history[%d] differs from a fresh encoder's", e, n, i)
				}
				again, _ := enc.Encode(e, src, nil)
				if !bytes.Equal(again, want) {
					t.Errorf("%s/%d: second call differs", e, n)
				}
			}
		}
	}
}

// TestConcurrent shares one Decoder and one Encoder between goroutines doing
// mixed work; run with -race.
func TestConcurrent(t *testing.T) {
	enc := NewEncoder()
	dec := NewDecoder(64 << 10)
	type job struct {
		e    Encoding
		raw  []byte
		comp []byte
	}
	var jobs []job
	for i, e := range Encodings() {
		for _, n := range []int{0, 100, 10 << 10, 40 << 10} {
			raw := testBody(uint64(i*100+n), n)
			comp, _ := enc.Encode(e, raw, nil)
			jobs = append(jobs, job{e, raw, comp})
		}
	}
	big := testBody(99, 70<<10) // over the cap
	goroutines, iterations := 8, 150
	if raceEnabled {
		goroutines, iterations = 4, 50
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range goroutines {
		wg.Go(func() {
			var buf, ebuf []byte
			r := rand.New(rand.NewPCG(uint64(g), 0))
			for range iterations {
				j := jobs[r.IntN(len(jobs))]
				var err error
				switch r.IntN(4) {
				case 0: // encode, compare with the precomputed result
					ebuf, err = enc.Encode(j.e, j.raw, ebuf)
					if err == nil && !bytes.Equal(ebuf, j.comp) {
						err = fmt.Errorf("%s: concurrent Encode differs", j.e)
					}
				case 1: // over the cap
					ebuf, _ = enc.Encode(j.e, big, ebuf)
					buf, err = dec.Decode(j.e, ebuf, buf)
					if errors.Is(err, ErrTooLarge) && len(buf) <= 64<<10 {
						err = nil
					} else {
						err = fmt.Errorf("%s: over the cap: %v, %d bytes", j.e, err, len(buf))
					}
				case 2: // corrupt
					if j.e == Identity || len(j.comp) < 2 {
						continue
					}
					buf, err = dec.Decode(j.e, j.comp[:len(j.comp)-1], buf)
					if errors.Is(err, ErrCorrupt) {
						err = nil
					} else {
						err = fmt.Errorf("%s: truncated: %v", j.e, err)
					}
				default:
					buf, err = dec.Decode(j.e, j.comp, buf)
					if err == nil && !bytes.Equal(buf, j.raw) {
						err = fmt.Errorf("%s: concurrent Decode differs", j.e)
					}
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDecodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	enc := NewEncoder()
	dec := NewDecoder(1 << 20)
	raw := eventJSON(1, 10<<10)
	for _, e := range Encodings() {
		comp, _ := enc.Encode(e, raw, nil)
		buf := make([]byte, 0, 64<<10)
		buf, _ = dec.Decode(e, comp, buf) // warm the pools
		n := testing.AllocsPerRun(50, func() {
			var err error
			buf, err = dec.Decode(e, comp, buf)
			if err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%s: %.1f allocs per Decode into a reused buffer", e, n)
		if (e == Identity || e == Zstd) && n != 0 {
			t.Errorf("%s: %.1f allocs per Decode, want 0", e, n)
		}
		if n > 4 {
			t.Errorf("%s: %.1f allocs per Decode", e, n)
		}
	}
}

func TestEventJSONCompressesLikeAnEvent(t *testing.T) {
	raw := eventJSON(1, 10<<10)
	if !bytes.Equal(raw, eventJSON(1, 10<<10)) {
		t.Fatal("eventJSON is not deterministic")
	}
	for _, e := range Encodings()[1:] {
		comp, _ := NewEncoder().Encode(e, raw, nil)
		ratio := float64(len(raw)) / float64(len(comp))
		t.Logf("%s: %d → %d bytes (%.1f×)", e, len(raw), len(comp), ratio)
		if ratio < 3.5 || ratio > 9 {
			t.Errorf("%s: ratio %.1f, want a realistic 4–8×", e, ratio)
		}
	}
}

// --- helpers ---

// testBody returns n bytes of JSON-like text, deterministic for seed.
func testBody(seed uint64, n int) []byte {
	if n == 0 {
		return []byte{}
	}
	b := eventJSON(seed, min(n, 12<<10))
	for len(b) < n {
		b = append(b, eventJSON(seed+uint64(len(b)), 12<<10)...)
	}
	return b[:n]
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func flip(b []byte, i int) []byte {
	c := append([]byte{}, b...)
	c[i] ^= 0x55
	return c
}

func stdGzip(t testing.TB, src []byte) []byte {
	var buf bytes.Buffer
	w := stdgzip.NewWriter(&buf)
	w.Write(src)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func stdZlib(t testing.TB, src []byte) []byte {
	var buf bytes.Buffer
	w := stdzlib.NewWriter(&buf)
	w.Write(src)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func stdRawDeflate(t testing.TB, src []byte, level int) []byte {
	var buf bytes.Buffer
	w, err := stdflate.NewWriter(&buf, level)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(src)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zstdStream encodes src with klauspost's stream encoder; size < 0 leaves
// the frame content size undeclared.
func zstdStream(t testing.TB, src []byte, size int64) []byte {
	var buf bytes.Buffer
	w, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	w.ResetContentSize(&buf, size)
	w.Write(src)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestCorruptZstdDoesNotGrow checks that junk or early-broken zstd input
// fails without growing the output buffer towards the cap: growth is only
// for output that reached the buffer's end.
func TestCorruptZstdDoesNotGrow(t *testing.T) {
	dec := NewDecoder(64 << 20)
	good, _ := NewEncoder().Encode(Zstd, testBody(4, 10<<10), nil)
	stream := zstdStream(t, testBody(4, 10<<10), -1)
	bodies := map[string][]byte{
		"bad magic":        flip(good, 0),
		"random":           randomBytes(3, 3000),
		"truncated":        good[:len(good)/2],
		"stream truncated": stream[:len(stream)/2],
		"stream flipped":   flip(stream, len(stream)/2),
		"bad checksum":     flip(good, len(good)-1),
	}
	for name, body := range bodies {
		buf := make([]byte, 0, 64<<10)
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, err := dec.Decode(Zstd, body, buf)
		runtime.ReadMemStats(&m1)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
		// Structural errors (magic, checksum, truncation) never grow the
		// buffer; a broken sequence may look like lack of room and grow it
		// once past one block (128 KiB), never towards the 64 MiB cap.
		limit := uint64(64 << 10)
		if name == "stream flipped" {
			limit = 1 << 20
		}
		if a := m1.TotalAlloc - m0.TotalAlloc; a > limit {
			t.Errorf("%s: allocated %d bytes to reject a %d-byte body", name, a, len(body))
		}
	}
}
