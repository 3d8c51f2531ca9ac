package compression

import (
	"bytes"
	stdgzip "compress/gzip"
	stdzlib "compress/zlib"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Decompression bombs: tiny bodies that decode to 1 GiB of zeros, decoded
// with a 16 MiB cap. Under -race, where the codecs run 10–20× slower, the
// bombs built at run time shrink to 64 MiB against a 1 MiB cap (the stored
// brotli bomb stays 1 GiB).
var (
	bombSize  int64 = 1 << 30
	bombCap         = 16 << 20
	bombChunk int64 = 16 << 20 // the unit repeated to build a bomb
	// bombAllocLimit bounds what decoding one bomb may allocate in total
	// (TotalAlloc delta): output buffer growth to the cap (~2× cap), one
	// overflowing zstd block append (~1.25× cap), and codec state (brotli's
	// ring buffer is up to 16 MiB).
	bombAllocLimit uint64 = 64 << 20
)

const brotliBombSize = 1 << 30

func init() {
	if raceEnabled {
		bombSize, bombCap, bombChunk, bombAllocLimit = 64<<20, 1<<20, 1<<20, 24<<20
	}
}

var (
	update      = flag.Bool("update", false, "rewrite testdata/zeros-1GiB.br")
	verifyBombs = flag.Bool("bomb.verify", false, "decode every full-size bomb with an independent decoder to prove it is 1 GiB of zeros (slow)")
)

const brotliBombPath = "testdata/zeros-1GiB.br"

type bomb struct {
	name string
	enc  Encoding
	data []byte
}

var bombs = sync.OnceValues(func() ([]bomb, error) { return buildBombs(bombSize) })

// buildBombs builds, for every coding, bodies that decode to size zero bytes
// (size a multiple of bombChunk), without ever holding size bytes:
//
//   - deflate family: compress bombChunk zeros with a sync flush, which ends
//     byte-aligned after non-final blocks; since every match in it refers to
//     zeros, the chunk can be repeated as often as wanted, then closed with an
//     empty final block. gzip and zlib wrap that with headers and the CRC-32 /
//     Adler-32 of size zeros (computed, not guessed).
//   - gzip-members: bombChunk-sized gzip members, each under the cap,
//     concatenated.
//   - zstd: klauspost's stream encoder fed from a zero reader, once without a
//     declared content size (the hard case: the decoder learns the size only
//     by decoding) and once declaring it; zstd-frames concatenates frames that
//     are each under the cap.
//   - br: the stored fixture (quality 4, 16 MiB window; ~800 bytes).
func buildBombs(size int64) ([]bomb, error) {
	n := int(size / bombChunk)
	zeros := make([]byte, bombChunk)

	var fb bytes.Buffer
	fw, err := flate.NewWriter(&fb, flate.BestCompression)
	if err != nil {
		return nil, err
	}
	fw.Write(zeros)
	if err := fw.Flush(); err != nil {
		return nil, err
	}
	raw := append(bytes.Repeat(fb.Bytes(), n), 0x03, 0x00) // + empty final fixed block

	crc := uint32(0)
	for range n {
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	gz := append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, raw...)
	gz = binary.LittleEndian.AppendUint32(gz, crc)
	gz = binary.LittleEndian.AppendUint32(gz, uint32(size))

	// Adler-32 of zeros: a stays 1, b gains 1 per byte.
	adler := uint32(1) | uint32(size%65521)<<16
	zl := append([]byte{0x78, 0xda}, raw...)
	zl = binary.BigEndian.AppendUint32(zl, adler)

	var gb bytes.Buffer
	gw := gzip.NewWriter(&gb)
	gw.Write(zeros)
	gw.Close()
	members := bytes.Repeat(gb.Bytes(), n)

	zstdOf := func(total, declared int64) ([]byte, error) {
		var b bytes.Buffer
		w, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		w.ResetContentSize(&b, declared)
		for range total / bombChunk {
			w.Write(zeros)
		}
		err = w.Close()
		return b.Bytes(), err
	}
	zsStream, err := zstdOf(size, -1)
	if err != nil {
		return nil, err
	}
	zsSized, err := zstdOf(size, size)
	if err != nil {
		return nil, err
	}
	zsFrame, err := zstdOf(bombChunk, -1)
	if err != nil {
		return nil, err
	}

	bombs := []bomb{
		{"gzip", Gzip, gz},
		{"gzip-members", Gzip, members},
		{"deflate-zlib", Deflate, zl},
		{"deflate-raw", Deflate, raw},
		{"zstd-undeclared", Zstd, zsStream},
		{"zstd-declared", Zstd, zsSized},
		{"zstd-frames", Zstd, bytes.Repeat(zsFrame, n)},
	}
	if size == bombSize || raceEnabled {
		br, err := os.ReadFile(brotliBombPath)
		if err != nil {
			return nil, err
		}
		bombs = append(bombs, bomb{"br", Brotli, br})
	}
	return bombs, nil
}

func TestBombs(t *testing.T) {
	all, err := bombs()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range all {
		t.Run(b.name, func(t *testing.T) {
			dec := NewDecoder(int64(bombCap))
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			start := time.Now()
			out, err := dec.Decode(b.enc, b.data, nil)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&m1)
			alloc := m1.TotalAlloc - m0.TotalAlloc
			t.Logf("%d-byte body (%d MiB of zeros): %v after %v, returned %d bytes, allocated %.1f MiB",
				len(b.data), bombMiB(b), err, elapsed.Round(time.Millisecond), len(out), float64(alloc)/(1<<20))
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("err = %v, want ErrTooLarge", err)
			}
			if len(out) > bombCap {
				t.Errorf("returned %d bytes > cap %d", len(out), bombCap)
			}
			if alloc > bombAllocLimit {
				t.Errorf("allocated %d bytes decoding a bomb, limit %d", alloc, bombAllocLimit)
			}
			if bytes.IndexFunc(out, func(r rune) bool { return r != 0 }) >= 0 {
				t.Error("partial output is not zeros")
			}
		})
	}
}

// countingReader counts the bytes a decompressor hands out.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestBombStopsAtCap checks that the stream codings stop pulling from the
// decompressor after cap+1 bytes, i.e. decode no more than the cap (plus
// what the codec has decoded into its own buffers), and consume only a
// matching sliver of the compressed input.
func TestBombStopsAtCap(t *testing.T) {
	all, err := bombs()
	if err != nil {
		t.Fatal(err)
	}
	dec := NewDecoder(int64(bombCap))
	for _, b := range all {
		src := bytes.NewReader(b.data)
		var r io.Reader
		switch b.name {
		case "gzip", "gzip-members":
			zr, err := gzip.NewReader(src)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		case "deflate-zlib":
			src.Seek(2, io.SeekStart)
			r = flate.NewReader(src)
		case "deflate-raw":
			r = flate.NewReader(src)
		case "br":
			r = brotli.NewReader(src)
		default:
			continue // zstd has no stream here: DecodeAll, bounded by its buffer capacity
		}
		cr := &countingReader{r: r}
		out, err := dec.readAll(cr, nil, 0, len(b.data))
		consumed := len(b.data) - src.Len()
		t.Logf("%s: pulled %d bytes from the decompressor, consumed %d of %d compressed bytes", b.name, cr.n, consumed, len(b.data))
		if err != errLimit || len(out) != bombCap {
			t.Errorf("%s: readAll = %d bytes, %v; want the cap and errLimit", b.name, len(out), err)
		}
		if cr.n > int64(bombCap)+1 {
			t.Errorf("%s: pulled %d bytes, more than cap+1", b.name, cr.n)
		}
		if b.name != "br" && consumed > len(b.data)/8 {
			t.Errorf("%s: consumed %d of %d compressed bytes to decode 1/%d of it", b.name, consumed, len(b.data), bombSize/int64(bombCap))
		}
	}
}

// TestBombsAreReal decodes bombs built the same way at 64 MiB with
// independent decoders, proving the construction yields valid streams of the
// stated size; -bomb.verify does it at full size and also decodes the
// stored brotli fixture (1 GiB; seconds).
func TestBombsAreReal(t *testing.T) {
	if raceEnabled {
		t.Skip("stream validity does not depend on -race; slow under it")
	}
	size := int64(4 * bombChunk)
	if *verifyBombs {
		size = bombSize
	}
	small, err := buildBombs(size)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, r io.Reader, want int64) {
		t.Helper()
		start := time.Now()
		n, err := io.Copy(zeroChecker{}, r)
		if err != nil || n != want {
			t.Errorf("%s: independent decoder read %d bytes, %v; want %d zeros", name, n, err, want)
		}
		t.Logf("%s: %d zero bytes verified in %v", name, n, time.Since(start).Round(time.Millisecond))
	}
	for _, b := range small {
		if b.enc == Brotli {
			continue // the stored fixture, checked below
		}
		var r io.Reader
		var err error
		switch b.name {
		case "gzip", "gzip-members":
			r, err = stdgzip.NewReader(bytes.NewReader(b.data))
		case "deflate-zlib":
			r, err = stdzlib.NewReader(bytes.NewReader(b.data))
		case "deflate-raw":
			r = flate.NewReader(bytes.NewReader(b.data))
		default:
			zr, zerr := zstd.NewReader(bytes.NewReader(b.data), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<31))
			if zerr == nil {
				defer zr.Close()
			}
			r, err = zr, zerr
		}
		if err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		check(b.name, r, size)
	}
	if !*verifyBombs {
		t.Log("the 1 GiB brotli fixture is decoded in full only with -bomb.verify")
		return
	}
	br, err := os.ReadFile(brotliBombPath)
	if err != nil {
		t.Fatal(err)
	}
	check("br fixture", brotli.NewReader(bytes.NewReader(br)), brotliBombSize)
}

// zeroChecker is a writer that fails on any non-zero byte.
type zeroChecker struct{}

func (zeroChecker) Write(p []byte) (int, error) {
	for i, c := range p {
		if c != 0 {
			return i, errors.New("non-zero byte")
		}
	}
	return len(p), nil
}

// zeroReader reads zeros forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestUpdateBrotliBomb rewrites the brotli fixture with -update: 1 GiB of
// zeros at quality 4 with a 16 MiB window (~1 s to build; the output is a few
// hundred bytes, so it is stored rather than built per run).
func TestUpdateBrotliBomb(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite " + brotliBombPath)
	}
	var b bytes.Buffer
	w := brotli.NewWriterOptions(&b, brotli.WriterOptions{Quality: 4, LGWin: 24})
	if _, err := io.CopyN(w, zeroReader{}, brotliBombSize); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(brotliBombPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(brotliBombPath, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d bytes", brotliBombPath, b.Len())
}

func bombMiB(b bomb) int64 {
	if b.enc == Brotli {
		return brotliBombSize >> 20
	}
	return bombSize >> 20
}
