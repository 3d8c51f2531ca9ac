package upstream

import (
	"bytes"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestBodyBuffersBoundedByInflight holds the body-buffer pool to the
// requests in flight: sequential envelopes larger than a fresh buffer must
// not leave one buffer each in the pool (a too-small buffer put back would
// be handed out again and another allocated, so the pool would grow with
// the request count). Under -race sync.Pool drops a random quarter of what
// is put, which hides the pile-up; the plain run catches it.
func TestBodyBuffersBoundedByInflight(t *testing.T) {
	// One P: which per-P slot a sync.Pool hands out must not depend on
	// where the scheduler puts this goroutine.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f := newFixture(t, nil)
	p := f.ps[0]
	h := f.srv.Handler()
	const n, size = 300, 40 << 10 // 12 MB of bodies if each left its buffer
	body := envelopeBody(p, "", item("attachment", strings.Repeat("x", size)))
	post := func() {
		req := httptest.NewRequest("POST", p.EnvelopePath(), bytes.NewReader(body))
		req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	post() // lazily made state is not what is measured
	// No collection during the loop: a GC empties sync.Pools (into the
	// victim cache, which the one GC below keeps alive and counted).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		post()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 2<<20 {
		t.Fatalf("live heap grew by %.1f MB over %d sequential %d KiB envelopes: body buffers pile up in the pool",
			float64(grew)/(1<<20), n, size>>10)
	}
	if st := f.srv.Stats(); st.Envelopes != n+1 {
		t.Fatalf("envelopes %d, want %d", st.Envelopes, n+1)
	}
}
