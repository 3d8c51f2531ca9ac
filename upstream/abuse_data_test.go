package upstream

// Abuse tests for what hostile clients put in the data: tables keyed by
// their strings, envelopes of a million tiny items, a relay id taken over
// with another key, unbounded /control durations, quantities that wrap, and
// Content-Encoding split over header lines. Each reproduces an attack that
// succeeded against commit 548bb3b (go test ./upstream -run Abuse).

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/relayload/relayload/internal/compression"
)

// TestAbuseContentEncodingLines: Content-Encoding is one list however many
// header lines carry it; a stack of two real codings is refused (415) on
// one line and on two alike, instead of the second line being ignored.
func TestAbuseContentEncodingLines(t *testing.T) {
	f := newFixture(t, nil)
	p := f.ps[0]
	raw := envelopeBody(p, eventID, item("event", "{}"))
	gz := encode(t, compression.Gzip, raw)
	tests := []struct {
		name   string
		lines  []string
		status int
	}{
		{"gzip then zstd on two lines", []string{"gzip", "zstd"}, 415},
		{"gzip then zstd on one line", []string{"gzip, zstd"}, 415},
		{"zstd then gzip on two lines", []string{"zstd", "gzip"}, 415},
		{"gzip twice", []string{"gzip", "gzip"}, 415},
		{"gzip and an unknown coding", []string{"gzip", "compress"}, 415},
		{"gzip", []string{"gzip"}, 200},
		{"gzip with empty list elements", []string{" , gzip ,"}, 200},
		{"identity then gzip", []string{"identity", "gzip"}, 200},
		{"gzip and an empty line", []string{"gzip", ""}, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{p.EnvelopePath(), "/control"} {
				body := gz
				if path == "/control" {
					body = encode(t, compression.Gzip, []byte(`{}`))
				}
				req, err := http.NewRequest("POST", f.http.URL+path, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Sentry-Auth", p.AuthHeader("test/1.0"))
				for _, l := range tc.lines {
					req.Header.Add("Content-Encoding", l)
				}
				resp, err := f.http.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantStatus(t, response{status: resp.StatusCode, body: b}, tc.status, "")
			}
		})
	}
}
