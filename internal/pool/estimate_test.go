package pool

import (
	"context"
	"runtime"
	"testing"

	"github.com/relayload/relayload/internal/compression"
)

// EstimateSize, from the first 512 entries, comes close to what the whole
// pool holds, for mixes of small and large envelopes and with and without
// compression: never much below it, and above it by little more than the
// workers' last chunks, partly used.
func TestEstimateSize(t *testing.T) {
	ps := testProjects(t, 20)
	for _, tc := range []struct {
		name string
		mix  string
		enc  compression.Encoding
	}{
		{"default mix, identity", DefaultMix, compression.Identity},
		{"default mix, zstd", DefaultMix, compression.Zstd},
		{"errors only, gzip", "errors=1", compression.Gzip},
		{"sessions only", "sessions=1", compression.Identity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mix, err := ParseMix(tc.mix)
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{Seed: 3, Size: 3000, Mix: mix, Projects: ps, Encoding: tc.enc}
			est, err := EstimateSize(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			st := p.Stats()
			t.Logf("estimate %+v (total %d), built: held %d, encoded %d", est, est.Total(), st.HeldBytes, st.EncodedBytes)
			near := func(what string, got, want, slack int64) {
				if float64(got) < 0.9*float64(want) || float64(got) > 1.15*float64(want)+float64(slack) {
					t.Errorf("%s: estimated %d, built %d", what, got, want)
				}
			}
			near("held bytes", est.HeldBytes, st.HeldBytes, int64(runtime.GOMAXPROCS(0))*(chunkSize+bodyChunk))
			near("encoded bytes", est.EncodedBytes, st.EncodedBytes, 0)
			if est.Entries != 3000 || est.EntryBytes < 3000*100 || est.Total() <= est.HeldBytes {
				t.Errorf("estimate %+v", est)
			}
		})
	}
	if _, err := EstimateSize(context.Background(), Options{Size: MaxSize + 1, Projects: ps}); err == nil {
		t.Error("no error for a size out of range")
	}
}
