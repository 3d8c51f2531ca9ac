package upstream

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestTooLargeAnswered (issue 33): a body over the wire cap is answered
// 413, and a client that writes the whole body before reading (blast's
// fasthttp client) or one that reads while writing (net/http) gets that
// answer, not a reset: the refused body is read and thrown away, up to a
// bound, before the answer. It used to be refused unread, and the client,
// still writing, saw the connection reset.
func TestTooLargeAnswered(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxWireBytes = 1 << 20 })
	p := f.ps[0]
	// The server as Start runs it too: its own listener and read deadlines.
	started, err := Start(Config{Projects: f.ps, MaxWireBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer started.Close()
	body := bytes.Repeat([]byte("x"), 8<<20)
	for _, tc := range []struct{ server, client string }{
		{"handler", "fasthttp"}, {"handler", "fasthttp chunked"}, {"handler", "net/http"},
		{"Start", "fasthttp"}, {"Start", "fasthttp chunked"},
	} {
		url := f.http.URL + p.EnvelopePath()
		if tc.server == "Start" {
			url = started.URL + p.EnvelopePath()
		}
		client := tc.client
		t.Run(tc.server+" "+client, func(t *testing.T) {
			for i := range 3 {
				var status int
				var err error
				switch client {
				case "fasthttp", "fasthttp chunked":
					req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
					req.SetRequestURI(url)
					req.Header.SetMethod("POST")
					req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
					if client == "fasthttp" {
						req.SetBody(body)
					} else {
						req.SetBodyStream(bytes.NewReader(body), -1)
					}
					c := &fasthttp.Client{ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
					err = c.Do(req, resp)
					status = resp.StatusCode()
					fasthttp.ReleaseRequest(req)
					fasthttp.ReleaseResponse(resp)
				default:
					req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
					req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
					var resp *http.Response
					resp, err = (&http.Client{Timeout: 30 * time.Second}).Do(req)
					if err == nil {
						status = resp.StatusCode
						resp.Body.Close()
					}
				}
				if err != nil || status != http.StatusRequestEntityTooLarge {
					t.Errorf("request %d: status %d, error %v; want 413", i, status, err)
				}
			}
		})
	}
}
