package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
)

// The planner hands out, range by range, the slots plan returns at once,
// whatever the ranges' sizes: a check-in pair split by a range's end
// continues the next.
func TestPlannerMatchesPlan(t *testing.T) {
	for _, mix := range []string{DefaultMix, "checkins=1", "checkins=3,errors=1"} {
		m, err := ParseMix(mix)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 2, 7, 1000} {
			o := Options{Seed: 3, Size: size, Mix: m}
			want := plan(&o)
			for _, n := range []int{1, 3, 64, DumpBatch} {
				pl := newPlanner(&o)
				var got []slot
				for start := 0; start < size; start += n {
					got = append(got, pl.next(nil, start, min(n, size-start))...)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("mix %s, size %d, ranges of %d: the planner's slots differ from plan's", mix, size, n)
				}
			}
		}
	}
}

// DumpStream writes what Build and Dump write: the same envelope and body
// files, and the same manifest (its format json.MarshalIndent's) but for
// the bytes held, which it never holds at once.
func TestDumpStreamMatchesDump(t *testing.T) {
	for _, tc := range []struct {
		size int
		mix  string
		enc  compression.Encoding
	}{
		{1, DefaultMix, compression.Identity},
		{2*DumpBatch + 3, DefaultMix, compression.Zstd},
		{DumpBatch + 1, "checkins=1,errors=1", compression.Gzip},
	} {
		m, err := ParseMix(tc.mix)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Seed: 5, Size: tc.size, Mix: m, Encoding: tc.enc, Projects: testProjects(t, 7), Now: testNow}
		built, streamed := t.TempDir(), t.TempDir()
		if err := build(t, o).Dump(built); err != nil {
			t.Fatal(err)
		}
		n, err := DumpStream(context.Background(), o, streamed)
		if err != nil || n != tc.size {
			t.Fatalf("%d: DumpStream %d, %v", tc.size, n, err)
		}
		a, _ := os.ReadDir(built)
		b, _ := os.ReadDir(streamed)
		if len(a) != len(b) {
			t.Fatalf("%d: %d files dumped, %d streamed", tc.size, len(a), len(b))
		}
		var ma, mb Manifest
		for i := range a {
			x, _ := os.ReadFile(filepath.Join(built, a[i].Name()))
			y, err := os.ReadFile(filepath.Join(streamed, a[i].Name()))
			if err != nil {
				t.Fatalf("%d: %v", tc.size, err)
			}
			if a[i].Name() != "manifest.json" {
				if !bytes.Equal(x, y) {
					t.Errorf("%d: %s differs", tc.size, a[i].Name())
				}
				continue
			}
			if err := json.Unmarshal(x, &ma); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(y, &mb); err != nil {
				t.Fatal(err)
			}
			if want, _ := json.MarshalIndent(ma, "", " "); !bytes.Equal(x, append(want, '\n')) {
				t.Errorf("%d: manifest.json is not json.MarshalIndent's:\n%.600s", tc.size, x)
			}
		}
		if ma.Stats.HeldBytes <= 0 || mb.Stats.HeldBytes <= 0 {
			t.Errorf("%d: held %d and %d", tc.size, ma.Stats.HeldBytes, mb.Stats.HeldBytes)
		}
		ma.Stats.HeldBytes, mb.Stats.HeldBytes = 0, 0
		if !reflect.DeepEqual(ma, mb) || len(mb.Entries) != tc.size || mb.Hash == "" {
			t.Errorf("%d: the manifests differ (hash %s and %s)", tc.size, ma.Hash, mb.Hash)
		}
		if _, err := os.Stat(filepath.Join(streamed, manifestTmp)); !os.IsNotExist(err) {
			t.Errorf("%d: the manifest's temporary file is left: %v", tc.size, err)
		}
	}
}

// A streamed dump's heap stays near one batch's worth however large the
// pool: under a soft memory limit below what the whole pool holds, its
// live heap never reaches that limit (a dump holding the pool would pass
// it).
func TestDumpStreamHeapBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a pool of 8000 envelopes")
	}
	o := Options{Seed: 9, Size: 8000, Projects: testProjects(t, 7), Now: testNow}
	est, err := EstimateSize(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	const bound = 80 << 20
	if est.Total() < bound+bound/4 {
		t.Fatalf("the whole pool holds %d bytes: not enough to tell", est.Total())
	}
	runtime.GC()
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(64 << 20))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	n, err := DumpStream(context.Background(), o, t.TempDir())
	close(done)
	<-stopped
	if err != nil || n != o.Size {
		t.Fatalf("DumpStream %d, %v", n, err)
	}
	grew := int64(peak.Load()) - int64(base)
	t.Logf("heap grew by %.1f MiB at most; the whole pool holds %.1f MiB", float64(grew)/(1<<20), float64(est.Total())/(1<<20))
	if grew > bound {
		t.Errorf("heap grew by %d bytes while dumping, more than %d: the dump holds more than a batch", grew, bound)
	}
}
