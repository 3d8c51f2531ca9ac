package upstream

import (
	"bytes"
	"log"
	"os"
	"strings"
	"testing"
)

func TestClassifyServerLog(t *testing.T) {
	for line, want := range map[string]string{
		"http: TLS handshake error from 127.0.0.1:5555: EOF":                                          "tls_handshake",
		"http: panic serving 127.0.0.1:5555: boom\ngoroutine 1 [running]:":                            "panic",
		"http: Accept error: accept tcp: too many open files; retrying in 5ms":                        "accept",
		"http: superfluous response.WriteHeader call from main.h (x.go:1)":                            "superfluous_write_header",
		"http: response.Write on hijacked connection from main.h (x.go:1)":                            "hijacked_write",
		`http: invalid Content-Length of "x"`:                                                         "invalid_content_length",
		`http: WriteHeader called with both Transfer-Encoding of "chunked" and a Content-Length of 3`: "conflicting_length",
		"http2: server: error reading preface":                                                        "http2",
		"something else":                                                                              "other",
		"":                                                                                            "other",
	} {
		if got := classifyServerLog(line); got != want {
			t.Errorf("classifyServerLog(%q) = %q, want %q", line, got, want)
		}
	}
}

// TestServerLogCounts: lines written to the http.Server's ErrorLog are
// counted in /stats by class and still printed by the standard logger.
func TestServerLogCounts(t *testing.T) {
	srv := newTestServer(t)
	var printed bytes.Buffer
	log.SetOutput(&printed)
	defer log.SetOutput(os.Stderr)
	hs := srv.httpServer()
	hs.ErrorLog.Printf("http: TLS handshake error from %s: %v", "127.0.0.1:1", "EOF")
	hs.ErrorLog.Printf("http: superfluous response.WriteHeader call from x")
	hs.ErrorLog.Printf("http: TLS handshake error from %s: %v", "127.0.0.1:2", "EOF")
	got := srv.Stats().HTTPLayer.ErrorLog
	if got["tls_handshake"] != 2 || got["superfluous_write_header"] != 1 || len(got) != 2 {
		t.Errorf("error_log %v", got)
	}
	if n := strings.Count(printed.String(), "\n"); n != 3 || !strings.Contains(printed.String(), "127.0.0.1:2") {
		t.Errorf("printed %q", printed.String())
	}
}

// FuzzServerLogAndRejected: the ErrorLog classifier and the reader of
// net/http's own answers take any bytes: a class from the fixed set, a
// status in 100..599 or 0.
func FuzzServerLogAndRejected(f *testing.F) {
	for _, s := range []string{"http: TLS handshake error from x", "HTTP/1.1 431 Request Header Fields Too Large", "HTTP/1.0 400 Bad Request\r\n", "HTTP/1.1 99", "HTTP/1.1 600 x", ""} {
		f.Add(s)
	}
	classes := map[string]bool{otherServerLog: true}
	for _, c := range serverLogClasses {
		classes[c.class] = true
	}
	f.Fuzz(func(t *testing.T, s string) {
		if c := classifyServerLog(s); !classes[c] {
			t.Fatalf("class %q of %q", c, s)
		}
		if code := rejectedStatus([]byte(s)); code != 0 && (code < 100 || code > 599) {
			t.Fatalf("status %d of %q", code, s)
		}
	})
}
