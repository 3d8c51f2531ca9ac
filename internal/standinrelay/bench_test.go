package standinrelay

import (
	"context"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/pool"
	"github.com/relayload/relayload/projects"
)

// BenchmarkProcessPayloads measures the stand-in's per-item processing
// (JSON round trip + scrubbing) on pool envelopes of each kind.
func BenchmarkProcessPayloads(b *testing.B) {
	ps, err := projects.Generate(1, 10)
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range []pool.Kind{pool.KindError, pool.KindTransaction, pool.KindLog} {
		pl, err := pool.Build(context.Background(), pool.Options{Seed: 1, Size: 200, Projects: ps, Mix: pool.Mix{kind: 1}, Now: time.Unix(1_767_225_600, 0)})
		if err != nil {
			b.Fatal(err)
		}
		var payloads [][]byte
		var types []string
		for i := range pl.Entries {
			env, err := envelope.Parse(pl.Raw(i))
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range env.Items {
				if it.Type == "event" || it.Type == "transaction" || it.Type == "log" {
					payloads = append(payloads, it.Payload)
					types = append(types, it.Type)
				}
			}
		}
		b.Run(string(kind), func(b *testing.B) {
			var bytes int64
			for i := 0; b.Loop(); i++ {
				k := i % len(payloads)
				bytes += int64(len(payloads[k]))
				var err error
				if types[k] == "log" {
					_, err = scrubLogs(payloads[k])
				} else {
					_, _, err = processEvent(payloads[k], eventID)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(bytes / int64(b.N))
		})
	}
}
