package upstream

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/projects"
)

// eventPayload builds a deterministic error-event JSON of about size bytes,
// shaped like an SDK event (stack frames, breadcrumbs, tags).
func eventPayload(size int, seed int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"event_id":"%032x","timestamp":1767225600.5,"platform":"python","level":"error","logger":"shop.checkout",`, seed)
	b.WriteString(`"exception":{"values":[{"type":"ValueError","value":"invalid literal for int() with base 10","stacktrace":{"frames":[`)
	for i := 0; b.Len() < size/2; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"filename":"shop/checkout/views_%d.py","function":"handle_%d","lineno":%d,"in_app":true,"context_line":"    total = int(request.POST.get('amount_%d'))","vars":{"retries":%d,"order_id":"o-%d"}}`, i%7, i, 10+i*3, i, i%4, seed*100+i)
	}
	b.WriteString(`]}}]},"breadcrumbs":{"values":[`)
	for i := 0; b.Len() < size-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"timestamp":1767225590.%03d,"category":"http","message":"GET /api/items/%d -> 200","level":"info"}`, i, seed+i)
	}
	b.WriteString(`]},"tags":{"region":"eu-west-1","release":"shop@7.3.0"}}`)
	return []byte(b.String())
}

// rewindBody is a reusable request body.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// nullWriter is a ResponseWriter that keeps nothing.
type nullWriter struct {
	h      http.Header
	status int
}

func (w *nullWriter) Header() http.Header         { return w.h }
func (w *nullWriter) WriteHeader(code int)        { w.status = code }
func (w *nullWriter) Write(b []byte) (int, error) { return len(b), nil }

// sinkSigning is how benchSink's requests are signed.
type sinkSigning int

const (
	unsigned     sinkSigning = iota // an SDK's request
	signedCached                    // a relay's, one signature over and over: cache hits
	signedFresh                     // a relay's, a new signature each time, as Relay sends them
)

func benchSink(b *testing.B, signing sinkSigning, size int) {
	ps, _ := projects.Generate(1, 100)
	clk := &clock{t: time.Now()}
	srv, err := newServer(Config{Projects: ps, VerifySignatures: true, Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	p := ps[3]
	raw := envelopeBody(p, eventID, item("event", string(eventPayload(size, 1))))
	body := encode(b, compression.Zstd, raw)
	req := httptest.NewRequest("POST", p.EnvelopePath(), nil)
	req.Header.Set("Content-Type", "application/x-sentry-envelope")
	req.Header.Set("Content-Encoding", "zstd")
	req.Header.Set("X-Sentry-Auth", p.AuthHeader("sentry.python/2.19.0"))
	var sigs []string
	if signing != unsigned {
		r := newRelay(b)
		srv.RegisterRelay(r.id, r.pub)
		req.Header.Set("X-Sentry-Relay-Id", r.id)
		req.Header.Set("X-Sentry-Relay-Signature", r.sk.Sign(nil, clk.Now()))
		if signing == signedFresh {
			sigs = make([]string, b.N)
			for i := range sigs {
				sigs[i] = r.sk.Sign(nil, clk.Now().Add(-time.Duration(i)*time.Microsecond))
			}
		}
	}
	req.ContentLength = int64(len(body))
	rb := &rewindBody{}
	w := &nullWriter{h: http.Header{}}
	h := srv.Handler()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rb.Reset(body)
		req.Body = rb
		if sigs != nil {
			req.Header["X-Sentry-Relay-Signature"] = sigs[i : i+1]
		}
		h.ServeHTTP(w, req)
		if w.status != 200 {
			b.Fatalf("status %d", w.status)
		}
	}
	b.StopTimer()
	if st := srv.Stats(); st.Envelopes != int64(b.N) {
		b.Fatalf("counted %d of %d", st.Envelopes, b.N)
	}
	b.ReportMetric(float64(len(raw)), "decoded-B")
}

// BenchmarkSinkHandler measures the envelope sink in-process (no network):
// a ~10 KB error event, zstd-compressed, through routing, decoding, framing,
// counting and canary scanning.
func BenchmarkSinkHandler(b *testing.B) {
	b.Run("sdk", func(b *testing.B) { benchSink(b, unsigned, 10<<10) })
	b.Run("sdk-40KB", func(b *testing.B) { benchSink(b, unsigned, 40<<10) })
	b.Run("relay-signed-cached", func(b *testing.B) { benchSink(b, signedCached, 10<<10) })
	b.Run("relay-signed-fresh", func(b *testing.B) { benchSink(b, signedFresh, 10<<10) })
	b.Run("parallel", benchSinkParallel)
}

// benchSinkParallel runs the sink from GOMAXPROCS goroutines: ns/op is the
// inverse of the in-process envelope rate the machine can sink.
func benchSinkParallel(b *testing.B) {
	ps, _ := projects.Generate(1, 100)
	srv, err := newServer(Config{Projects: ps})
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([][]byte, 16)
	for i := range bodies {
		p := ps[i]
		bodies[i] = encode(b, compression.Zstd, envelopeBody(p, eventID, item("event", string(eventPayload(10<<10, i)))))
	}
	h := srv.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("POST", "/", nil)
		req.Header.Set("Content-Encoding", "zstd")
		rb := &rewindBody{}
		w := &nullWriter{h: http.Header{}}
		i := 0
		for pb.Next() {
			p := ps[i%len(bodies)]
			req.URL.Path = p.EnvelopePath()
			req.Header.Set("X-Sentry-Auth", p.AuthHeader("bench"))
			rb.Reset(bodies[i%len(bodies)])
			req.Body = rb
			req.ContentLength = int64(len(bodies[i%len(bodies)]))
			h.ServeHTTP(w, req)
			if w.status != 200 {
				b.Errorf("status %d", w.status)
				return
			}
			i++
		}
	})
	b.StopTimer()
	if st := srv.Stats(); st.Envelopes != int64(b.N) {
		b.Fatalf("counted %d of %d", st.Envelopes, b.N)
	}
}

// TestSinkHandlerAllocs: once warm, the sink path (decode, scan, count,
// answer) allocates nothing per request.
func TestSinkHandlerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ps, _ := projects.Generate(1, 10)
	srv, err := newServer(Config{Projects: ps})
	if err != nil {
		t.Fatal(err)
	}
	p := ps[1]
	body := encode(t, compression.Zstd, envelopeBody(p, "9ec79c33-ec99-42ab-8353-589fcb2e04dc", item("event", string(eventPayload(10<<10, 2))), item("log", "{}")))
	req := httptest.NewRequest("POST", p.EnvelopePath(), nil)
	req.Header.Set("Content-Encoding", "zstd")
	req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
	req.Header.Set("User-Agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36")
	req.ContentLength = int64(len(body))
	rb := &rewindBody{}
	w := &nullWriter{h: http.Header{}}
	h := srv.Handler()
	serve := func() {
		rb.Reset(body)
		req.Body = rb
		h.ServeHTTP(w, req)
		if w.status != 200 {
			t.Fatalf("status %d", w.status)
		}
	}
	for i := 0; i < 10; i++ {
		serve()
	}
	if n := testing.AllocsPerRun(200, serve); n != 0 {
		t.Errorf("%.1f allocations per request, want 0", n)
	}
}
