package replay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/upstream"
)

// sendAll sends every entry of p once to a fresh fake upstream and returns
// what it counted.
func sendAll(t *testing.T, p *pool.Pool) upstream.Stats {
	t.Helper()
	up, err := upstream.Start(upstream.Config{Projects: p.Options.Projects})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	n := int64(len(p.Entries))
	res, err := blast.Run(context.Background(), blast.Config{Target: up.URL, Pool: p, Rate: 2000, Count: n, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st := up.Stats()
	if res.OK != n || st.Envelopes != n {
		t.Fatalf("blast ok %d of %d (statuses %v), upstream accepted %d (errors %v)", res.OK, n, res.ByStatus, st.Envelopes, st.Errors)
	}
	return st
}

// Through blast and a real fake upstream, a dump replayed counts the same
// items by type, on the same projects, as the pool it was dumped from.
func TestDumpRoundTripUpstream(t *testing.T) {
	orig, dir := dumpPool(t, 200, compression.Zstd)
	c, err := Load(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := Build(context.Background(), c, pool.Options{Seed: 5, Size: 200, Projects: orig.Options.Projects, Encoding: compression.Zstd, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	orig.Options.Now = time.Now()
	fresh, err := pool.Build(context.Background(), orig.Options) // the same pool, anchored now
	if err != nil {
		t.Fatal(err)
	}
	a, b := sendAll(t, fresh), sendAll(t, rp)
	for _, x := range []struct {
		what string
		a, b any
	}{{"items by type", a.ItemsByType, b.ItemsByType}, {"records by type", a.RecordsByType, b.RecordsByType},
		{"projects", a.TopProjects, b.TopProjects}, {"canaries found", a.Canaries.Found, b.Canaries.Found}} {
		if fmt.Sprint(x.a) != fmt.Sprint(x.b) {
			t.Errorf("%s: generated %v, replayed %v", x.what, x.a, x.b)
		}
	}
}

// Envelopes of foreign projects are accepted under ours, each on the
// project the pool says.
func TestRetargetUpstream(t *testing.T) {
	c := loadFixture(t)
	p := buildFixture(t, c, 27, 30)
	st := sendAll(t, p)
	want := map[int64]int64{}
	for _, e := range p.Entries {
		want[p.Options.Projects[e.Project].ID]++
	}
	got := map[int64]int64{}
	for _, ps := range st.TopProjects {
		got[ps.ID] = ps.Envelopes
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("envelopes by project: upstream %v, pool %v", got, want)
	}
}
