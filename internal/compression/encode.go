package compression

import (
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// Compression levels. Each matches what produces the traffic being modelled:
//
//   - zstd: SpeedFastest, klauspost's equivalent of zstd level 1, the level
//     Relay uses for forwarded envelopes (docs/protocol.md, Forwarded envelopes).
//   - gzip and zlib: the libraries' default level (flate level 5 in
//     klauspost/compress), close to what SDKs produce with zlib's default.
//   - brotli: level 4, what sentry-python uses for br. It is encoded with
//     andybalholm/brotli's matchfinder writer (NewWriterV2), not the
//     c2go-translated Writer: that Writer's Reset keeps state (ring buffer
//     and hash tables) that changes the output of later streams, so pooled
//     Writers are not deterministic (TestEncodeDeterministic caught it), and
//     a fresh Writer per call allocates its large tables each time. The
//     matchfinder writer resets fully, is faster here (BenchmarkEncode),
//     and its output on event JSON is as small.
const (
	ZstdLevel   = zstd.SpeedFastest
	GzipLevel   = gzip.DefaultCompression
	ZlibLevel   = zlib.DefaultCompression
	BrotliLevel = 4
)

// Encoder compresses bodies. It is safe for concurrent use, and its output
// for a given input and Encoding is always the same (no timestamps, names or
// goroutine-dependent framing).
type Encoder struct {
	zstd *zstd.Encoder
	gzip sync.Pool // *streamWriter around a *gzip.Writer
	zlib sync.Pool // *streamWriter around a *zlib.Writer
	br   sync.Pool // *streamWriter around a brotli *matchfinder.Writer
}

// appendWriter is an io.Writer appending to a slice the caller owns.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// resetWriter is what the gzip, zlib and brotli writers have in common.
type resetWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// streamWriter is a pooled stream compressor writing into out.
type streamWriter struct {
	out appendWriter
	w   resetWriter
}

// encodeStream compresses src with a writer from p, appending to dst.
func encodeStream(p *sync.Pool, enc Encoding, src, dst []byte) ([]byte, error) {
	s := p.Get().(*streamWriter)
	defer p.Put(s)
	s.out.b = dst
	s.w.Reset(&s.out)
	_, err := s.w.Write(src)
	return s.out.finish(enc, s.w, err)
}

// NewEncoder returns an Encoder using the levels above.
func NewEncoder() *Encoder {
	// EncodeAll takes one of the encoder's WithEncoderConcurrency internal
	// encoders per call; allow one per CPU so concurrent callers do not queue.
	// Concurrency does not change EncodeAll's output, which is one frame made
	// by one internal encoder.
	ze, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(ZstdLevel),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithZeroFrames(true), // empty input still yields a valid frame
	)
	if err != nil {
		panic("compression: zstd.NewWriter: " + err.Error())
	}
	e := &Encoder{zstd: ze}
	e.gzip.New = func() any {
		g := new(streamWriter)
		w, err := gzip.NewWriterLevel(&g.out, GzipLevel)
		if err != nil {
			panic("compression: gzip.NewWriterLevel: " + err.Error())
		}
		g.w = w
		return g
	}
	e.zlib.New = func() any {
		z := new(streamWriter)
		w, err := zlib.NewWriterLevel(&z.out, ZlibLevel)
		if err != nil {
			panic("compression: zlib.NewWriterLevel: " + err.Error())
		}
		z.w = w
		return z
	}
	e.br.New = func() any {
		b := new(streamWriter)
		b.w = brotli.NewWriterV2(&b.out, BrotliLevel)
		return b
	}
	return e
}

// Encode compresses src with enc, appending the result to dst[:0]. The only
// error is an unknown Encoding (wrapping ErrUnknownEncoding).
func (e *Encoder) Encode(enc Encoding, src, dst []byte) ([]byte, error) {
	dst = dst[:0]
	switch enc {
	case Identity:
		return append(dst, src...), nil
	case Zstd:
		return e.zstd.EncodeAll(src, dst), nil
	case Gzip:
		return encodeStream(&e.gzip, enc, src, dst)
	case Deflate:
		return encodeStream(&e.zlib, enc, src, dst)
	case Brotli:
		return encodeStream(&e.br, enc, src, dst)
	}
	return dst, fmt.Errorf("%w: %q", ErrUnknownEncoding, string(enc))
}

// finish closes the stream w wrote into o and hands back the output,
// dropping o's reference to it. Writes to an appendWriter cannot fail, so
// errors here are bugs in the codec; they are returned rather than hidden.
func (o *appendWriter) finish(enc Encoding, w io.Closer, err error) ([]byte, error) {
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	out := o.b
	o.b = nil
	return out, wrapEncode(enc, err)
}

func wrapEncode(enc Encoding, err error) error {
	if err != nil {
		return fmt.Errorf("compression: encode %s: %w", enc, err)
	}
	return nil
}
