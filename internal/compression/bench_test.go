package compression

import (
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// benchBody is the ~10 KB Sentry-error-event-like JSON the benchmarks use
// (compresses 4.3–4.6×, about as well as a realistic 10 KB event).
var benchBody = eventJSON(1, 10<<10)

type benchCase struct {
	name string
	enc  Encoding
	comp []byte
}

// benchCases are the bodies as fake-upstream receives them: each coding as
// Encode makes it, plus zstd from a stream encoder with no declared content
// size, the way a streaming encoder such as Relay's may write it.
func benchCases(b *testing.B) []benchCase {
	enc := NewEncoder()
	var cs []benchCase
	for _, e := range Encodings() {
		comp, err := enc.Encode(e, benchBody, nil)
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, benchCase{string(e), e, comp})
	}
	return append(cs, benchCase{"zstd-undeclared", Zstd, zstdStream(b, benchBody, -1)})
}

// BenchmarkDecode is fake-upstream's path: one shared Decoder, a reused
// output buffer. MB/s counts decoded bytes.
func BenchmarkDecode(b *testing.B) {
	dec := NewDecoder(16 << 20)
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 64<<10)
			b.SetBytes(int64(len(benchBody)))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				var err error
				buf, err = dec.Decode(c.enc, c.comp, buf)
				if err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, processCPU()-cpu0, len(benchBody))
			if len(buf) != len(benchBody) {
				b.Fatalf("decoded %d bytes", len(buf))
			}
			b.ReportMetric(float64(len(c.comp)), "wire-bytes")
		})
	}
}

// BenchmarkDecodeFreshBuffer decodes into a nil dst each time: what a caller
// that does not reuse buffers pays.
func BenchmarkDecodeFreshBuffer(b *testing.B) {
	dec := NewDecoder(16 << 20)
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchBody)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := dec.Decode(c.enc, c.comp, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeParallel shares one Decoder between GOMAXPROCS goroutines,
// each with its own buffer (MB/s is the aggregate).
func BenchmarkDecodeParallel(b *testing.B) {
	dec := NewDecoder(16 << 20)
	for _, c := range benchCases(b) {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchBody)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 0, 64<<10)
				for pb.Next() {
					var err error
					buf, err = dec.Decode(c.enc, c.comp, buf)
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkEncode is pool's and the stand-in relay's path: one shared
// Encoder, a reused output buffer. MB/s counts input bytes.
func BenchmarkEncode(b *testing.B) {
	enc := NewEncoder()
	for _, e := range Encodings() {
		b.Run(string(e), func(b *testing.B) {
			buf := make([]byte, 0, 64<<10)
			b.SetBytes(int64(len(benchBody)))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				var err error
				buf, err = enc.Encode(e, benchBody, buf)
				if err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, processCPU()-cpu0, len(benchBody))
			b.ReportMetric(float64(len(buf)), "wire-bytes")
		})
	}
}

// BenchmarkZstdLibraryBaseline is klauspost's DecodeAll with default
// options and no cap, for comparison with BenchmarkDecode/zstd: the price of
// the cap handling (header peek, WithDecodeAllCapLimit) is the difference.
func BenchmarkZstdLibraryBaseline(b *testing.B) {
	zd, err := zstd.NewReader(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer zd.Close()
	comp, _ := NewEncoder().Encode(Zstd, benchBody, nil)
	buf := make([]byte, 0, 64<<10)
	b.SetBytes(int64(len(benchBody)))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		buf, err = zd.DecodeAll(comp, buf[:0])
		if err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, processCPU()-cpu0, len(benchBody))
}

// reportCPU adds CPU time per operation and the throughput it implies per
// core (uncompressed bytes). Includes GC work, which is part of the cost.
func reportCPU(b *testing.B, cpu time.Duration, bytesPerOp int) {
	if cpu <= 0 || b.N == 0 {
		return
	}
	perOp := float64(cpu.Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp, "cpu-ns/op")
	b.ReportMetric(float64(bytesPerOp)/perOp*1e3, "cpu-MB/s")
}
