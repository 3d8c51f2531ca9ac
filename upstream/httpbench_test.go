package upstream

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/relayload/relayload/internal/compression"
)

// BenchmarkSinkOverHTTP posts a 10 KB zstd event envelope over loopback
// keep-alive connections to the http.Server that cmd/fake-upstream runs
// (HTTPServer, served as the binary serves it), with as many client
// goroutines as -cpu. ns/op includes the client's work; it shows what the
// server's HTTP layer (deadlines, connection tracking) adds to the handler
// measured by BenchmarkSinkHandler.
func BenchmarkSinkOverHTTP(b *testing.B) {
	srv := newTestServer(b)
	addr := serveHTTPServer(b, srv, nil)
	p := srv.cfg.Projects[0]
	body := encode(b, compression.Zstd, envelopeBody(p, eventID, item("event", string(eventPayload(10<<10, 1)))))
	url := "http://" + addr + p.EnvelopePath()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header.Set("Content-Encoding", "zstd")
			req.Header.Set("X-Sentry-Auth", p.AuthHeader("bench/1.0"))
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
