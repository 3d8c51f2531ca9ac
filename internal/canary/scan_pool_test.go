package canary_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/canary"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/projects"
)

// poolPayloads are the event, transaction and log payloads of a small
// default-mix pool: the text the fake upstream scans in Relay's forwards.
func poolPayloads(tb testing.TB) [][]byte {
	tb.Helper()
	ps, err := projects.Generate(1, 5)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := pool.Build(context.Background(), pool.Options{Seed: 3, Size: 200, Projects: ps, Now: time.Unix(1767225600, 0)})
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for i := range p.Entries {
		env, err := envelope.Parse(p.Raw(i))
		if err != nil {
			tb.Fatal(err)
		}
		for _, it := range env.Items {
			switch string(it.Type) {
			case "event", "transaction", "log":
				out = append(out, it.Payload)
			}
		}
	}
	return out
}

// BenchmarkScanPool scans real pool payloads (MB/s over their bytes).
func BenchmarkScanPool(b *testing.B) {
	payloads := poolPayloads(b)
	n := 0
	for _, pl := range payloads {
		n += len(pl)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	found := 0
	for b.Loop() {
		for _, pl := range payloads {
			canary.Scan(pl, func(canary.Finding) { found++ })
		}
	}
	if found == 0 {
		b.Fatal("no canaries in the pool's payloads")
	}
}

// BenchmarkScrubRemark looks for the remark in the pool's payloads (which,
// not yet through Relay, have no _meta: the whole payload is searched), by
// ScrubRemark and by bytes.Index, the way it was found before.
func BenchmarkScrubRemark(b *testing.B) {
	payloads := poolPayloads(b)
	n := 0
	for _, pl := range payloads {
		n += len(pl)
	}
	b.Run("ScrubRemark", func(b *testing.B) {
		b.SetBytes(int64(n))
		for b.Loop() {
			for _, pl := range payloads {
				if canary.ScrubRemark(pl) {
					b.Fatal("a remark in a payload Relay never saw")
				}
			}
		}
	})
	b.Run("bytes.Index", func(b *testing.B) {
		b.SetBytes(int64(n))
		meta := []byte(`"_meta"`)
		for b.Loop() {
			for _, pl := range payloads {
				if bytes.Index(pl, meta) >= 0 {
					b.Fatal("_meta in a payload Relay never saw")
				}
			}
		}
	})
}
