package compression

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

var sizes = []int{0, 1, 10 << 10, 1 << 20}

func TestRoundTrip(t *testing.T) {
	enc := NewEncoder()
	dec := NewDecoder(4 << 20)
	for _, e := range Encodings() {
		for _, n := range sizes {
			src := testBody(uint64(n), n)
			comp, err := enc.Encode(e, src, nil)
			if err != nil {
				t.Fatalf("%s/%d: Encode: %v", e, n, err)
			}
			if e != Identity && n >= 10<<10 && len(comp) >= len(src) {
				t.Errorf("%s/%d: encoded %d bytes, not smaller", e, n, len(comp))
			}
			got, err := dec.Decode(e, comp, nil)
			if err != nil {
				t.Fatalf("%s/%d: Decode: %v", e, n, err)
			}
			if !bytes.Equal(got, src) {
				t.Fatalf("%s/%d: round trip mismatch (%d vs %d bytes)", e, n, len(got), len(src))
			}
			// Reusing a buffer that has room and old content.
			buf := make([]byte, 7, 2*n+64)
			got, err = dec.Decode(e, comp, buf)
			if err != nil || !bytes.Equal(got, src) {
				t.Fatalf("%s/%d: Decode into reused buffer: %v", e, n, err)
			}
		}
	}
}

// TestStdlibDecodes checks our gzip and deflate output against independent
// decoders from the standard library.
func TestStdlibDecodes(t *testing.T) {
	enc := NewEncoder()
	for _, n := range sizes {
		src := testBody(7, n)
		gz, _ := enc.Encode(Gzip, src, nil)
		r, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatalf("gzip/%d: stdlib header: %v", n, err)
		}
		if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("gzip/%d: stdlib decode: %v", n, err)
		}
		zl, _ := enc.Encode(Deflate, src, nil)
		zr, err := zlib.NewReader(bytes.NewReader(zl))
		if err != nil {
			t.Fatalf("deflate/%d: stdlib zlib header: %v", n, err)
		}
		if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("deflate/%d: stdlib zlib decode: %v", n, err)
		}
	}
}

func TestTooLargeSmall(t *testing.T) {
	enc := NewEncoder()
	dec := NewDecoder(1000)
	src := testBody(3, 1001)
	for _, e := range Encodings() {
		comp, _ := enc.Encode(e, src, nil)
		got, err := dec.Decode(e, comp, nil)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: 1001 bytes with cap 1000: err = %v, want ErrTooLarge", e, err)
		}
		if len(got) > 1000 {
			t.Errorf("%s: returned %d bytes > cap", e, len(got))
		}
		ok, _ := enc.Encode(e, src[:1000], nil)
		if got, err := dec.Decode(e, ok, nil); err != nil || len(got) != 1000 {
			t.Errorf("%s: exactly cap: %d bytes, %v", e, len(got), err)
		}
	}
}

// testBody returns n bytes of JSON-like text, deterministic for seed.
func testBody(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"event_id", "timestamp", "platform", "python", "level", "error", "exception", "values", "stacktrace", "frames", "filename", "lineno", "function", "in_app", "true", "false", "null"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(`"` + words[r.IntN(len(words))] + `":`)
		if r.IntN(3) == 0 {
			b.WriteString(`"`)
			for range 8 {
				b.WriteByte("0123456789abcdef"[r.IntN(16)])
			}
			b.WriteString(`",`)
		} else {
			b.WriteString(`{`)
		}
	}
	return b.Bytes()[:n]
}
