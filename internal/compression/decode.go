package compression

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// DefaultMaxDecoded is the cap NewDecoder uses when given maxDecoded <= 0:
// 100 MiB, Relay's default limits.max_envelope_size.
const DefaultMaxDecoded = 100 << 20

// zstdSlack is extra capacity given to zstd output buffers so the decoder's
// fast path, which may over-write up to 32 bytes, stays enabled for the last
// block (klauspost/compress zstd compressedBlockOverAlloc).
const zstdSlack = 32

// minBuf is the smallest output buffer Decode starts with.
const minBuf = 512

// Decoder decodes request bodies with a cap on the decoded size. It is safe
// for concurrent use; its codec state is shared (zstd) or pooled (the rest).
type Decoder struct {
	max  int64
	zstd *zstd.Decoder

	gzip  sync.Pool // *gzipReader
	zlib  sync.Pool // *zlibReader
	flate sync.Pool // *flateReader
	br    sync.Pool // *brotliReader
}

type gzipReader struct {
	src bytes.Reader
	r   gzip.Reader
}

type zlibReader struct {
	src bytes.Reader
	r   io.ReadCloser // also a zlib.Resetter
}

type flateReader struct {
	src bytes.Reader
	r   io.ReadCloser // also a flate.Resetter
}

type brotliReader struct {
	src bytes.Reader
	r   brotli.Reader
}

// emptyZlib is a complete zlib stream of no data; zlib.NewReader needs a
// valid header to build a reader that is then re-armed with Reset.
var emptyZlib = []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01}

// NewDecoder returns a Decoder that refuses bodies decoding to more than
// maxDecoded bytes; maxDecoded <= 0 selects DefaultMaxDecoded.
func NewDecoder(maxDecoded int64) *Decoder {
	if maxDecoded <= 0 {
		maxDecoded = DefaultMaxDecoded
	}
	// The hard bound on zstd output is WithDecodeAllCapLimit: DecodeAll stops
	// once its output passes cap(dst), and decodeZstd never hands it more
	// than maxDecoded plus one block of capacity. The decoder's own size
	// limit, which also bounds the declared window (klauspost clamps the
	// window to it), is kept at least 8 MiB, the window the zstd format says
	// every decoder should support: in DecodeAll the window is the output
	// buffer itself, so a large declared window costs nothing, and a small
	// cap must not refuse small frames that merely declare a 1 KiB+ window.
	zmax := zmaxOf(maxDecoded)
	zd, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0), // GOMAXPROCS concurrent DecodeAll calls
		zstd.WithDecoderMaxMemory(zmax),
		zstd.WithDecoderMaxWindow(zmax),
		zstd.WithDecodeAllCapLimit(true),
	)
	if err != nil {
		// Only reachable with invalid options, which the clamps above exclude.
		panic("compression: zstd.NewReader: " + err.Error())
	}
	d := &Decoder{max: maxDecoded, zstd: zd}
	d.gzip.New = func() any { return new(gzipReader) }
	d.zlib.New = func() any {
		r, err := zlib.NewReader(bytes.NewReader(emptyZlib))
		if err != nil {
			panic("compression: zlib.NewReader on a valid stream: " + err.Error())
		}
		return &zlibReader{r: r}
	}
	d.flate.New = func() any { return &flateReader{r: flate.NewReader(bytes.NewReader(nil))} }
	d.br.New = func() any { return new(brotliReader) }
	return d
}

// MaxDecoded returns the cap on the decoded size of one body.
func (d *Decoder) MaxDecoded() int64 { return d.max }

// Decode decodes src, encoded with enc, appending the result to dst[:0].
//
// Errors wrap ErrTooLarge (the body decodes to more than MaxDecoded bytes;
// decoding stops at the cap), ErrCorrupt or ErrUnknownEncoding. On error the
// returned slice holds at most MaxDecoded bytes of partial output; it is
// returned so that callers can keep its capacity for the next call.
func (d *Decoder) Decode(enc Encoding, src, dst []byte) ([]byte, error) {
	dst = dst[:0]
	switch enc {
	case Identity:
		if int64(len(src)) > d.max {
			return dst, fmt.Errorf("%w: identity body of %d bytes > %d", ErrTooLarge, len(src), d.max)
		}
		return append(dst, src...), nil
	case Zstd:
		return d.decodeZstd(src, dst)
	case Gzip:
		return d.decodeGzip(src, dst)
	case Deflate:
		return d.decodeDeflate(src, dst)
	case Brotli:
		return d.decodeBrotli(src, dst)
	}
	return dst, fmt.Errorf("%w: %q", ErrUnknownEncoding, string(enc))
}

func errEmpty(enc Encoding) error {
	return fmt.Errorf("%w: %s: empty body", ErrCorrupt, enc)
}

func (d *Decoder) tooLarge(enc Encoding) error {
	return fmt.Errorf("%w: %s body decodes to more than %d bytes", ErrTooLarge, enc, d.max)
}

// zstdBlock is the most one zstd block can decode to (128 KiB) plus the
// decoder's over-write slack: how far past a buffer's end a block may need.
const zstdBlock = 128<<10 + zstdSlack

// decodeZstd runs the shared decoder's DecodeAll with WithDecodeAllCapLimit,
// so output never goes past cap(dst), and never hands it a buffer larger than
// max+zstdBlock. dst is sized from the first frame's declared content size
// when there is one; otherwise (Relay's streaming encoder declares none) it
// starts from cap(dst) or a guess and grows 4× at a time, decoding again, while DecodeAll
// fails near the end of the buffer. With the cap limit, klauspost reports a
// block that does not fit either as ErrDecoderSizeExceeded or as an "output
// bigger than max block size" error, so an error that is not structural
// corruption, within one block of the buffer's end, is treated as "may need
// more room" until the buffer is at its largest; only then is it ErrTooLarge
// or ErrCorrupt. Callers that pass a
// reused dst with enough capacity decode once, with no allocations.
func (d *Decoder) decodeZstd(src, dst []byte) ([]byte, error) {
	if len(src) == 0 {
		return dst, errEmpty(Zstd)
	}
	limit := int(d.max) + zstdBlock
	want := cap(dst)
	var h zstd.Header
	if err := h.Decode(src); err == nil && h.HasFCS && !h.Skippable {
		if h.FrameContentSize > uint64(d.max) {
			return dst, fmt.Errorf("%w: zstd frame declares %d bytes, limit %d", ErrTooLarge, h.FrameContentSize, d.max)
		}
		want = max(want, int(h.FrameContentSize)+zstdSlack)
	} else if err == nil && !h.SingleSegment && h.WindowSize > zmaxOf(d.max) {
		return dst, fmt.Errorf("%w: zstd frame declares a %d-byte window, limit %d", ErrTooLarge, h.WindowSize, zmaxOf(d.max))
	} else {
		want = max(want, min(16*len(src), limit), 4<<10)
	}
	want = min(want, limit)
	if cap(dst) > limit {
		dst = dst[:0:limit] // the capacity is the limit DecodeAll obeys
	}
	for {
		if cap(dst) < want {
			dst = slices.Grow(dst[:0], want)
		}
		out, err := d.zstd.DecodeAll(src, dst[:0])
		if err == nil {
			if int64(len(out)) > d.max {
				return out[:d.max], d.tooLarge(Zstd)
			}
			return out, nil
		}
		if cap(out) > cap(dst) && cap(out) <= limit {
			dst = out // keep a larger buffer the decoder made
		}
		sizeErr := errors.Is(err, zstd.ErrDecoderSizeExceeded)
		// Growing is worth it only if the failing block may simply not
		// have fit: the error is not one of klauspost's structural ones,
		// and the output reached within one block of the buffer's end. So
		// junk input fails at once, and growth follows real progress.
		roomErr := !sizeErr && !zstdCorruption(err) && cap(dst)-len(out) < zstdBlock
		if (sizeErr || roomErr) && cap(dst) < limit {
			want = min(4*cap(dst), limit) // each retry decodes again: grow fast
			continue
		}
		switch {
		case sizeErr, int64(len(out)) > d.max:
			return truncate(out, d.max), d.tooLarge(Zstd)
		}
		return truncate(out, d.max), fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
	}
}

// zstdCorruption reports whether err is one of the zstd errors that mean
// the input is malformed whatever the buffer size.
func zstdCorruption(err error) bool {
	for _, e := range []error{
		zstd.ErrMagicMismatch, zstd.ErrReservedBlockType, zstd.ErrCompressedSizeTooBig,
		zstd.ErrBlockTooSmall, zstd.ErrUnexpectedBlockSize, zstd.ErrWindowSizeExceeded,
		zstd.ErrWindowSizeTooSmall, zstd.ErrUnknownDictionary, zstd.ErrFrameSizeExceeded,
		zstd.ErrFrameSizeMismatch, zstd.ErrCRCMismatch, io.ErrUnexpectedEOF,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func zmaxOf(m int64) uint64 { return max(uint64(m)+zstdSlack, 8<<20) }

func truncate(b []byte, n int64) []byte {
	if int64(len(b)) > n {
		return b[:n]
	}
	return b
}

func (d *Decoder) decodeGzip(src, dst []byte) ([]byte, error) {
	if len(src) == 0 {
		return dst, errEmpty(Gzip)
	}
	// The last member's ISIZE is the decoded size mod 2^32 of that member;
	// untrusted, but a good first guess for a single-member body.
	hint := 0
	if len(src) >= 18 {
		hint = int(binary.LittleEndian.Uint32(src[len(src)-4:]))
	}
	z := d.gzip.Get().(*gzipReader)
	defer d.gzip.Put(z)
	z.src.Reset(src)
	defer z.src.Reset(nil)
	if err := z.r.Reset(&z.src); err != nil {
		return dst, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
	}
	z.r.Multistream(true)
	out, err := d.readAll(&z.r, dst, hint, len(src))
	if err != nil {
		return out, d.wrap(Gzip, err)
	}
	return out, nil
}

// isZlibHeader reports whether b starts with a valid RFC 1950 header.
func isZlibHeader(b []byte) bool {
	if len(b) < 2 {
		return false
	}
	return b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

func (d *Decoder) decodeDeflate(src, dst []byte) ([]byte, error) {
	if len(src) == 0 {
		return dst, errEmpty(Deflate)
	}
	if !isZlibHeader(src) {
		return d.decodeRawDeflate(src, dst)
	}
	out, err := d.decodeZlib(src, dst)
	if err == nil || errors.Is(err, ErrTooLarge) {
		return out, err
	}
	// A raw deflate stream can start with bytes that pass the zlib header
	// check (only a non-final stored block with non-zero padding bits can, so
	// real encoders never produce one); try it as raw before giving up.
	out, err2 := d.decodeRawDeflate(src, out[:0])
	if err2 == nil || errors.Is(err2, ErrTooLarge) {
		return out, err2
	}
	return out[:0], err // report why it is not zlib
}

func (d *Decoder) decodeZlib(src, dst []byte) ([]byte, error) {
	z := d.zlib.Get().(*zlibReader)
	defer d.zlib.Put(z)
	z.src.Reset(src)
	defer z.src.Reset(nil)
	if err := z.r.(zlib.Resetter).Reset(&z.src, nil); err != nil {
		return dst, fmt.Errorf("%w: deflate (zlib): %w", ErrCorrupt, err)
	}
	out, err := d.readAll(z.r, dst, 0, len(src))
	if err != nil {
		return out, d.wrap("deflate (zlib)", err)
	}
	if n := z.src.Len(); n > 0 {
		return out, fmt.Errorf("%w: deflate (zlib): %d trailing bytes after the stream", ErrCorrupt, n)
	}
	return out, nil
}

func (d *Decoder) decodeRawDeflate(src, dst []byte) ([]byte, error) {
	f := d.flate.Get().(*flateReader)
	defer d.flate.Put(f)
	f.src.Reset(src)
	defer f.src.Reset(nil)
	if err := f.r.(flate.Resetter).Reset(&f.src, nil); err != nil {
		return dst, fmt.Errorf("%w: deflate (raw): %w", ErrCorrupt, err)
	}
	out, err := d.readAll(f.r, dst, 0, len(src))
	if err != nil {
		return out, d.wrap("deflate (raw)", err)
	}
	if n := f.src.Len(); n > 0 {
		return out, fmt.Errorf("%w: deflate (raw): %d trailing bytes after the stream", ErrCorrupt, n)
	}
	return out, nil
}

// brotliPoolMax is the largest decoded size after which a brotli reader
// goes back to the pool. The reader keeps its ring buffer, which grows with
// the stream up to its window (up to 16 MiB); readers that decoded more are
// left to the garbage collector so idle pools stay small.
const brotliPoolMax = 1 << 20

func (d *Decoder) decodeBrotli(src, dst []byte) ([]byte, error) {
	if len(src) == 0 {
		return dst, errEmpty(Brotli)
	}
	b := d.br.Get().(*brotliReader)
	b.src.Reset(src)
	_ = b.r.Reset(&b.src) // always nil
	out, err := d.readAll(&b.r, dst, 0, len(src))
	if err == nil {
		// The brotli reader reports bytes after the end of the stream as
		// "excessive input" itself; this guards against it leaving some unread.
		if n := b.src.Len(); n > 0 {
			err = fmt.Errorf("%w: br: %d trailing bytes after the stream", ErrCorrupt, n)
		}
	} else {
		err = d.wrap(Brotli, err)
	}
	b.src.Reset(nil)
	if len(out) <= brotliPoolMax && !errors.Is(err, ErrTooLarge) {
		d.br.Put(b)
	}
	return out, err
}

// errLimit marks readAll stopping at the cap.
var errLimit = errors.New("limit")

func (d *Decoder) wrap(enc Encoding, err error) error {
	if err == errLimit {
		return d.tooLarge(enc)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %s: %w", ErrCorrupt, enc, err)
}

// readAll reads r to EOF, appending to dst, through a limit of d.max+1 bytes:
// reading byte d.max+1 stops it with errLimit and dst cut to d.max bytes. hint
// is a guess at the decoded size (0: none), srcLen the compressed size.
func (d *Decoder) readAll(r io.Reader, dst []byte, hint, srcLen int) ([]byte, error) {
	limit := int(d.max) + 1
	if hint <= 0 || hint >= limit {
		hint = 4 * srcLen
	} else {
		hint++ // room to read EOF without growing
	}
	hint = min(max(hint, minBuf), limit)
	if cap(dst) < hint {
		dst = slices.Grow(dst, hint)
	}
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(cap(dst), limit-len(dst)))
		}
		room := dst[len(dst):cap(dst)]
		if len(room) > limit-len(dst) {
			room = room[:limit-len(dst)]
		}
		n, err := r.Read(room)
		dst = dst[:len(dst)+n]
		if len(dst) > int(d.max) {
			return dst[:d.max], errLimit
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		if n == 0 && len(room) == 0 {
			return dst, io.ErrNoProgress // unreachable: room is never empty below the limit
		}
	}
}
