package compression

import (
	"bytes"
	stdflate "compress/flate"
	stdgzip "compress/gzip"
	stdzlib "compress/zlib"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

const fuzzCap = 64 << 10

// refDecoder decodes with a different implementation (or, for brotli, the
// same library without this package's wrapper), reading at most limit bytes.
type refDecoder func(data []byte, limit int64) ([]byte, error)

func readLimited(r io.Reader, limit int64) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, limit))
}

func refGzip(data []byte, limit int64) ([]byte, error) {
	r, err := stdgzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return readLimited(r, limit)
}

// refDeflate follows this package's rule: zlib when the header says so,
// raw deflate otherwise or when zlib fails. The standard library does not
// reject bytes after the stream, so only successful decodes are compared.
func refDeflate(data []byte, limit int64) ([]byte, error) {
	if isZlibHeader(data) {
		if r, err := stdzlib.NewReader(bytes.NewReader(data)); err == nil {
			if out, err := readLimited(r, limit); err == nil {
				return out, nil
			}
		}
	}
	return readLimited(stdflate.NewReader(bytes.NewReader(data)), limit)
}

func refZstd(data []byte, limit int64) ([]byte, error) {
	r, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(zmaxOf(fuzzCap)), zstd.WithDecoderMaxWindow(zmaxOf(fuzzCap)))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readLimited(r, limit)
}

func refBrotli(data []byte, limit int64) ([]byte, error) {
	return readLimited(brotli.NewReader(bytes.NewReader(data)), limit)
}

// fuzzDecode checks, for any input: no panic; only ErrCorrupt or
// ErrTooLarge; never more than the cap returned; success agrees with the
// reference decoder; ErrTooLarge only when the reference also decodes past
// the cap; and the decoded bytes survive Encode→Decode.
func fuzzDecode(f *testing.F, enc Encoding, ref refDecoder) {
	e := NewEncoder()
	for i, n := range []int{0, 1, 100, 5000, fuzzCap + 1} {
		src := testBody(uint64(i), n)
		good, _ := e.Encode(enc, src, nil)
		f.Add(good)
		if len(good) > 2 {
			f.Add(good[:len(good)/2])
			f.Add(append(slices.Clone(good), 0))
		}
	}
	switch enc {
	case Gzip:
		f.Add(stdGzip(f, []byte("hello, hello, hello")))
	case Deflate:
		f.Add(stdZlib(f, []byte("hello, hello, hello")))
		f.Add(stdRawDeflate(f, []byte("hello, hello, hello"), 5))
		f.Add(append([]byte{0x78, 0x9c, 0x00, 0x63, 0xff}, make([]byte, 0x9c+2)...))
	case Zstd:
		f.Add(zstdStream(f, testBody(9, 3000), -1))
	}
	dec := NewDecoder(fuzzCap)
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := dec.Decode(enc, data, nil)
		if len(out) > fuzzCap {
			t.Fatalf("returned %d bytes, cap %d", len(out), fuzzCap)
		}
		want, rerr := ref(data, fuzzCap+1)
		switch {
		case err == nil:
			if rerr != nil {
				t.Fatalf("Decode accepted %d bytes the reference rejects: %v", len(data), rerr)
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("Decode and the reference disagree (%d vs %d bytes)", len(out), len(want))
			}
			again, err := e.Encode(enc, out, nil)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := dec.Decode(enc, again, nil); err != nil || !bytes.Equal(back, out) {
				t.Fatalf("re-encoded output does not round-trip: %v", err)
			}
		case errors.Is(err, ErrTooLarge):
			if errors.Is(err, ErrCorrupt) {
				t.Fatalf("both too large and corrupt: %v", err)
			}
			if len(want) <= fuzzCap && rerr == nil {
				t.Fatalf("ErrTooLarge, but the reference decodes it to %d bytes: %v", len(want), err)
			}
		case errors.Is(err, ErrCorrupt):
			if enc == Gzip && rerr == nil && len(want) <= fuzzCap {
				// The standard library is as strict as klauspost for gzip
				// (checksums, trailing garbage), so it must reject too.
				t.Fatalf("ErrCorrupt (%v), but the standard library decodes it", err)
			}
		default:
			t.Fatalf("error is neither ErrCorrupt nor ErrTooLarge: %v", err)
		}
	})
}

func FuzzDecodeGzip(f *testing.F)    { fuzzDecode(f, Gzip, refGzip) }
func FuzzDecodeDeflate(f *testing.F) { fuzzDecode(f, Deflate, refDeflate) }
func FuzzDecodeBrotli(f *testing.F)  { fuzzDecode(f, Brotli, refBrotli) }
func FuzzDecodeZstd(f *testing.F)    { fuzzDecode(f, Zstd, refZstd) }

func FuzzParseEncoding(f *testing.F) {
	for _, s := range []string{"", "gzip", "X-Gzip", " br ", "UTF-8", "zstd", "deflate", "identity", "gzip, br", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEncoding(s)
		if err != nil {
			if !errors.Is(err, ErrUnknownEncoding) {
				t.Fatalf("error does not wrap ErrUnknownEncoding: %v", err)
			}
			return
		}
		if !slices.Contains(Encodings(), e) {
			t.Fatalf("ParseEncoding(%q) = %q, not one of Encodings()", s, e)
		}
		if again, err := ParseEncoding(string(e)); err != nil || again != e {
			t.Fatalf("ParseEncoding(%q) = %q, but its token parses to %q, %v", s, e, again, err)
		}
	})
}

// FuzzParseContentEncoding: the answer depends on the list, not on how it
// is split into header lines; one element alone is what ParseEncoding says.
func FuzzParseContentEncoding(f *testing.F) {
	for _, s := range []string{"gzip", "gzip,zstd", " , br ,", "identity, gzip", "gzip, identity", "x-gzip,,", "compress, gzip", "UTF-8,deflate", ""} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(5))
	}
	f.Fuzz(func(t *testing.T, list string, cut uint8) {
		whole, werr := ParseContentEncoding([]string{list})
		// The same list over two lines, split at a comma.
		if i := strings.IndexByte(list, ','); i >= 0 && int(cut)%2 == 1 {
			split, serr := ParseContentEncoding([]string{list[:i], list[i+1:]})
			if split != whole || (serr == nil) != (werr == nil) {
				t.Fatalf("%q on one line = %q, %v; split at its first comma = %q, %v", list, whole, werr, split, serr)
			}
		}
		if werr != nil {
			if !errors.Is(werr, ErrUnknownEncoding) && !errors.Is(werr, ErrStackedEncodings) {
				t.Fatalf("%q: error wraps neither ErrUnknownEncoding nor ErrStackedEncodings: %v", list, werr)
			}
			return
		}
		if !slices.Contains(Encodings(), whole) {
			t.Fatalf("%q = %q, not one of Encodings()", list, whole)
		}
		if !strings.Contains(list, ",") {
			if one, err := ParseEncoding(list); err != nil || one != whole {
				t.Fatalf("%q: ParseContentEncoding %q, ParseEncoding %q, %v", list, whole, one, err)
			}
		}
		// Adding the same coding again stacks it (identity excepted).
		again, err := ParseContentEncoding([]string{list, string(whole)})
		if whole == Identity && (err != nil || again != Identity) || whole != Identity && !errors.Is(err, ErrStackedEncodings) {
			t.Fatalf("%q then %q = %q, %v", list, whole, again, err)
		}
	})
}
