package pool

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/projects"
)

func benchBuild(b *testing.B, size int, enc compression.Encoding) {
	ps, err := projects.Generate(1, 100)
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{Seed: 42, Size: size, Projects: ps, Encoding: enc, Now: time.Unix(1767225600, 0)}
	b.ReportAllocs()
	var st Stats
	cpu0 := cpuTime()
	for b.Loop() {
		p, err := Build(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		st = p.Stats()
	}
	// CPU seconds used by the process per build: on a shared, loaded
	// machine wall time says more about the neighbours than about Build.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(st.RawBytes)/float64(size), "rawB/entry")
	b.ReportMetric(float64(st.RawBytes)/float64(max(1, st.EncodedBytes)), "ratio")
}

// BenchmarkBuild20k is the target: 20,000 entries in under a second.
func BenchmarkBuild20k(b *testing.B)       { benchBuild(b, 20_000, compression.Identity) }
func BenchmarkBuild20kZstd(b *testing.B)   { benchBuild(b, 20_000, compression.Zstd) }
func BenchmarkBuild20kGzip(b *testing.B)   { benchBuild(b, 20_000, compression.Gzip) }
func BenchmarkBuild20kBrotli(b *testing.B) { benchBuild(b, 20_000, compression.Brotli) }

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
