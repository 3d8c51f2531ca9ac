package upstream

import (
	"bytes"
	"encoding/binary"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/relayload/relayload/internal/compression"
)

// bombSize is what every bomb decodes to: more than 1 GiB of zeros.
const bombSize = 1100 << 20

// bombs builds, for every coding, a small body that decodes to bombSize
// zero bytes. Streams are built by repetition so the test does not spend
// seconds compressing a gigabyte: gzip members and zstd frames may be
// concatenated; the zlib stream repeats a flushed deflate chunk whose back
// references only reach zeros; brotli streams cannot be concatenated, so
// testdata/bomb-1100MiB.br was made once with brotli level 5 from 1100 MiB
// of zeros.
func bombs(t testing.TB) map[compression.Encoding][]byte {
	t.Helper()
	const chunk = 1 << 20
	zeros := make([]byte, chunk)
	out := map[compression.Encoding][]byte{}

	var g bytes.Buffer
	gw, _ := gzip.NewWriterLevel(&g, gzip.BestCompression)
	gw.Write(zeros)
	gw.Close()
	out[compression.Gzip] = bytes.Repeat(g.Bytes(), bombSize/chunk)

	ze, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	out[compression.Zstd] = bytes.Repeat(ze.EncodeAll(zeros, nil), bombSize/chunk)

	// zlib: header, a flushed first chunk, N-1 copies of a flushed second chunk, a final empty
	// block, adler32 of bombSize zeros (a = 1, b = n mod 65521).
	var d bytes.Buffer
	fw, _ := flate.NewWriter(&d, flate.BestCompression)
	fw.Write(zeros)
	fw.Flush()
	first := append([]byte(nil), d.Bytes()...)
	d.Reset() // the second chunk's back references see only zeros
	fw.Write(zeros)
	fw.Flush()
	mid := append([]byte(nil), d.Bytes()...)
	d.Reset()
	fw.Close()
	tail := append([]byte(nil), d.Bytes()...)
	z := []byte{0x78, 0xda}
	z = append(z, first...)
	z = append(z, bytes.Repeat(mid, bombSize/chunk-1)...)
	z = append(z, tail...)
	z = binary.BigEndian.AppendUint32(z, uint32(bombSize%65521)<<16|1)
	out[compression.Deflate] = z

	br, err := os.ReadFile("testdata/bomb-1100MiB.br")
	if err != nil {
		t.Fatal(err)
	}
	out[compression.Brotli] = br
	return out
}

// TestDecompressionBombs: a small body that decodes past 1 GiB is answered
// 413 after decoding no more than the cap, in every coding, without memory
// growing with the bomb.
func TestDecompressionBombs(t *testing.T) {
	const maxDecoded = 4 << 20
	f := newFixture(t, func(c *Config) { c.MaxDecodedBytes = maxDecoded })
	p := f.ps[0]
	for enc, body := range bombs(t) {
		t.Run(string(enc), func(t *testing.T) {
			if len(body) > 2<<20 {
				t.Fatalf("bomb is %d bytes; should be small", len(body))
			}
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			resp := f.do("POST", p.EnvelopePath(), body, map[string]string{"Content-Encoding": string(enc), "X-Sentry-Auth": p.AuthHeader("t")})
			elapsed := time.Since(start)
			wantStatus(t, resp, 413, "decoded body too large")
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 64<<20 {
				t.Errorf("heap grew by %d MB", grown>>20)
			}
			t.Logf("%s: %d-byte bomb rejected in %s", enc, len(body), elapsed)
		})
	}
	st := f.srv.Stats()
	if st.Errors["too_large_decoded"] != 4 || st.Envelopes != 0 {
		t.Errorf("errors %v", st.Errors)
	}
	// Rejected bodies are not counted as traffic (bytes_by_encoding counts
	// bodies that decoded); the decoder's own stop at the cap is measured in
	// compression's TestBombs and TestBombStopsAtCap.
	if len(st.Bytes) != 0 {
		t.Errorf("rejected bombs counted as traffic: %v", st.Bytes)
	}
	if st.Requests["envelope"]["413"] != 4 {
		t.Errorf("requests %v", st.Requests)
	}
}

// TestBombsAreBombs checks the generated bodies really decode past 1 GiB
// (4 × 1.1 GiB: ~3.5 s on the reference machine, ~55 s under -race, so it
// runs in plain `go test` only).
func TestBombsAreBombs(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("decodes 4 × 1.1 GiB; run without -race and -short")
	}
	dec := compression.NewDecoder(bombSize + 1)
	buf := make([]byte, 0, bombSize+1<<20)
	for enc, body := range bombs(t) {
		out, err := dec.Decode(enc, body, buf)
		if err != nil || len(out) != bombSize {
			t.Errorf("%s: decoded %d bytes, err %v; want %d", enc, len(out), err, bombSize)
		}
		buf = out[:0]
	}
}
