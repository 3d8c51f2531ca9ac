package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/capture"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/projects"
)

// captureFixture is a fixture served by Start, with a capture writer
// keeping its envelopes.
func captureFixture(t *testing.T, cc capture.Config) (*fixture, *capture.Writer) {
	t.Helper()
	cc.Dir = filepath.Join(t.TempDir(), "capture")
	w, err := capture.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := projects.Generate(7, 10)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	srv, err := Start(Config{Projects: ps, VerifySignatures: true, Now: clk.Now, Capture: w})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &fixture{t: t, srv: srv, http: &fixtureHTTP{URL: srv.URL, client: &http.Client{}}, ps: ps, clock: clk}, w
}

// captureStats reads /stats and its capture object.
func (f *fixture) captureStats() *capture.Stats {
	f.t.Helper()
	r := f.do("GET", "/stats", nil, nil)
	var st Stats
	if err := json.Unmarshal(r.body, &st); err != nil {
		f.t.Fatal(err)
	}
	return st.Capture
}

// readCapture closes w and reads its manifest, checking that every file
// holds as many bytes as its line says and that Stats agrees.
func readCapture(t *testing.T, w *capture.Writer) []capture.Entry {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := capture.ReadManifest(w.Dir())
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(w.Dir(), "*.envelope"))
	var sum int64
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(w.Dir(), e.File))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != e.Bytes {
			t.Errorf("%s: %d bytes, its line says %d", e.File, len(b), e.Bytes)
		}
		sum += int64(len(b))
	}
	if st := w.Stats(); st.Kept != int64(len(entries)) || len(files) != len(entries) || st.KeptBytes != sum {
		t.Errorf("%d manifest lines, %d files, %d bytes; stats %+v", len(entries), len(files), sum, st)
	}
	return entries
}

// TestCaptureSDK: an envelope an SDK sends straight to the fake upstream
// is kept decoded, byte for byte, with a manifest line saying where it
// came from, for every encoding and every place the key may be in.
func TestCaptureSDK(t *testing.T) {
	f, w := captureFixture(t, capture.Config{})
	type sent struct {
		raw   []byte
		p     projects.Project
		enc   string
		wire  int
		ua    string
		items map[string]int
	}
	var want []sent
	for i, enc := range compression.Encodings() {
		p := f.ps[i%len(f.ps)]
		raw := envelopeBody(p, "", item("event", fmt.Sprintf(`{"message":"%d %s"}`, i, strings.Repeat("x", 500))),
			item("attachment", "abc"), item("attachment", "defg"))
		ua := fmt.Sprintf("sentry.test/%d", i)
		extra := map[string]string{"User-Agent": ua, "X-Forwarded-For": "10.1.2.3"}
		path := p.EnvelopePath()
		switch i { // X-Sentry-Auth (with sentry_key) for identity and gzip
		case 2: // the key in the query string
			extra["X-Sentry-Auth"] = ""
			path += "?sentry_key=" + p.PublicKey
		case 3: // the key in the envelope's dsn only
			extra["X-Sentry-Auth"] = ""
		}
		hdr := map[string]string{"Content-Type": "application/x-sentry-envelope", "X-Sentry-Auth": p.AuthHeader("test/1.0")}
		if enc != compression.Identity {
			hdr["Content-Encoding"] = string(enc)
		}
		for k, v := range extra {
			if v == "" {
				delete(hdr, k)
			} else {
				hdr[k] = v
			}
		}
		body := encode(t, enc, raw)
		wantStatus(t, f.do("POST", path, body, hdr), 200, "")
		e := strings.TrimPrefix(string(enc), "identity")
		want = append(want, sent{raw, p, e, len(body), ua, map[string]int{"event": 1, "attachment": 2}})
	}
	if st := f.captureStats(); st == nil || st.Kept != int64(len(want)) || st.Errors != 0 {
		t.Errorf("/stats capture %+v, want %d kept", st, len(want))
	}
	entries := readCapture(t, w)
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(entries), len(want))
	}
	for i, e := range entries {
		s := want[i]
		b, _ := os.ReadFile(filepath.Join(w.Dir(), e.File))
		if !bytes.Equal(b, s.raw) {
			t.Errorf("%s differs from the envelope sent", e.File)
		}
		if e.File != fmt.Sprintf("%08d.envelope", i) || e.Route != "envelope" || e.ProjectID != s.p.ID || e.PublicKey != s.p.PublicKey ||
			e.FromRelay || e.UserAgent != s.ua || e.ForwardedFor != "10.1.2.3" || e.Encoding != s.enc ||
			e.Bytes != len(s.raw) || e.WireBytes != s.wire || fmt.Sprint(e.Items) != fmt.Sprint(s.items) || e.ReceivedAt.IsZero() {
			t.Errorf("entry %d: %+v\nwant project %d key %s encoding %q wire %d bytes %d", i, e, s.p.ID, s.p.PublicKey, s.enc, s.wire, len(s.raw))
		}
	}
	if want[1].enc != "gzip" || want[0].enc != "" {
		t.Errorf("encodings %q, %q: the test no longer covers gzip and none", want[0].enc, want[1].enc)
	}
}

// TestCaptureRelayForward: a Relay's signed forward is kept as from_relay.
func TestCaptureRelayForward(t *testing.T) {
	f, w := captureFixture(t, capture.Config{})
	r := newRelay(t)
	f.srv.RegisterRelay(r.id, r.pub)
	p := f.ps[3]
	raw := envelopeBody(p, "0123456789abcdef0123456789abcdef", item("transaction", `{"type":"transaction"}`))
	hdr := f.relayHeaders(r)
	hdr["X-Sentry-Auth"] = p.AuthHeader("relay/26.6.0")
	hdr["User-Agent"] = "sentry-relay/26.6.0"
	hdr["X-Forwarded-For"] = "192.0.2.7, 127.0.0.1"
	wantStatus(t, f.postEnvelope(p, compression.Zstd, raw, hdr), 200, "")
	entries := readCapture(t, w)
	if len(entries) != 1 {
		t.Fatalf("%d entries", len(entries))
	}
	e := entries[0]
	if !e.FromRelay || e.ProjectID != p.ID || e.PublicKey != p.PublicKey || e.Encoding != "zstd" || e.UserAgent != "sentry-relay/26.6.0" ||
		e.ForwardedFor != "192.0.2.7, 127.0.0.1" || e.Items["transaction"] != 1 || e.Bytes != len(raw) {
		t.Errorf("entry %+v", e)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), e.File)); !bytes.Equal(b, raw) {
		t.Error("the file differs from the envelope forwarded")
	}
}

// TestCaptureBounds: Every, MaxCount and MaxBytes, counted exactly in
// Stats, /stats and its Prometheus form.
func TestCaptureBounds(t *testing.T) {
	ps, err := projects.Generate(7, 10) // captureFixture's projects
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	raw := func(i int) []byte { return envelopeBody(p, "", item("event", fmt.Sprintf(`{"n":%03d}`, i))) }
	size := int64(len(raw(0))) // every envelope's
	tests := []struct {
		name                 string
		cfg                  capture.Config
		kept, skMax, skEvery int64
	}{
		{"count", capture.Config{MaxCount: 4}, 4, 6, 0},
		{"every", capture.Config{Every: 4}, 3, 0, 7},
		{"every and count", capture.Config{Every: 2, MaxCount: 3}, 3, 2, 5},
		{"bytes", capture.Config{MaxBytes: 5*size + 3}, 5, 5, 0},
		{"bytes exactly", capture.Config{MaxBytes: 6 * size}, 6, 4, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, w := captureFixture(t, tc.cfg)
			for i := range 10 {
				wantStatus(t, f.postEnvelope(p, compression.Gzip, raw(i), nil), 200, "")
			}
			check := func(where string, st capture.Stats) {
				t.Helper()
				if st.Kept != tc.kept || st.SkippedMax != tc.skMax || st.SkippedEvery != tc.skEvery || st.Errors != 0 || st.KeptBytes != tc.kept*size {
					t.Errorf("%s: %+v, want kept %d (%d bytes), skipped_max %d, skipped_every %d", where, st, tc.kept, tc.kept*size, tc.skMax, tc.skEvery)
				}
			}
			check("Stats", w.Stats())
			check("/stats", *f.captureStats())
			prom := parseProm(t, string(f.do("GET", "/stats?format=prometheus", nil, nil).body))
			for key, want := range map[string]int64{
				series("capture_kept_total"):                       tc.kept,
				series("capture_kept_bytes_total"):                 tc.kept * size,
				series("capture_skipped_total", "reason", "max"):   tc.skMax,
				series("capture_skipped_total", "reason", "every"): tc.skEvery,
				series("capture_errors_total"):                     0,
			} {
				if v, ok := prom[key]; !ok || v != float64(want) {
					t.Errorf("%s = %v (present %v), want %d", key, v, ok, want)
				}
			}
			// A reset zeroes the counters but not what the capture kept.
			f.do("POST", "/stats/reset", nil, nil)
			check("/stats after a reset", *f.captureStats())
			entries := readCapture(t, w)
			if int64(len(entries)) != tc.kept {
				t.Fatalf("%d entries, want %d", len(entries), tc.kept)
			}
			every := max(tc.cfg.Every, 1)
			for k, e := range entries {
				b, _ := os.ReadFile(filepath.Join(w.Dir(), e.File))
				if !bytes.Equal(b, raw(k*every)) {
					t.Errorf("%s holds %q, want envelope %d", e.File, b, k*every)
				}
			}
		})
	}
}

// TestCaptureKeepsOnlyAccepted: refused envelopes are not kept, nor
// counted as skipped.
func TestCaptureKeepsOnlyAccepted(t *testing.T) {
	f, w := captureFixture(t, capture.Config{})
	p, other := f.ps[0], f.ps[1]
	r := newRelay(t)
	f.srv.RegisterRelay(r.id, r.pub)
	good := envelopeBody(p, "", item("event", "{}"))
	noDSN := (&envelope.Envelope{Header: []byte("{}"), Items: []envelope.Item{item("event", "{}")}}).Marshal()
	for _, c := range []struct {
		name   string
		path   string
		body   []byte
		hdr    map[string]string
		status int
	}{
		{"no key anywhere", p.EnvelopePath(), noDSN, map[string]string{}, 401},
		{"another project's key", p.EnvelopePath(), good, map[string]string{"X-Sentry-Auth": other.AuthHeader("t")}, 403},
		{"unknown project", "/api/999999/envelope/", good, map[string]string{"X-Sentry-Auth": p.AuthHeader("t")}, 403},
		{"bad relay signature", p.EnvelopePath(), good, map[string]string{"X-Sentry-Auth": p.AuthHeader("t"), "X-Sentry-Relay-Id": r.id,
			"X-Sentry-Relay-Signature": "nope"}, 401},
		{"malformed", p.EnvelopePath(), []byte("{}\n{\"type\":\"event\",\"length\":99}\n{}\n"), map[string]string{"X-Sentry-Auth": p.AuthHeader("t")}, 400},
		{"not gzip", p.EnvelopePath(), good, map[string]string{"X-Sentry-Auth": p.AuthHeader("t"), "Content-Encoding": "gzip"}, 400},
	} {
		if got := f.do("POST", c.path, c.body, c.hdr); got.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, got.status, got.body, c.status)
		}
	}
	if st := w.Stats(); st != (capture.Stats{}) {
		t.Errorf("after refused envelopes: %+v, want nothing", st)
	}
	wantStatus(t, f.postEnvelope(p, compression.Identity, good, nil), 200, "")
	if entries := readCapture(t, w); len(entries) != 1 {
		t.Errorf("%d entries, want the one accepted", len(entries))
	}
}

// TestCaptureConcurrent: envelopes sent at once from many clients are
// each kept once: manifest lines, files and kept agree.
func TestCaptureConcurrent(t *testing.T) {
	f, w := captureFixture(t, capture.Config{})
	const clients, each = 8, 50
	var wg sync.WaitGroup
	failed := make(chan string, clients*each)
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := f.ps[g%len(f.ps)]
			for i := range each {
				raw := envelopeBody(p, "", item("event", fmt.Sprintf(`{"g":%d,"i":%d,"pad":%q}`, g, i, strings.Repeat("p", i*7))))
				body := encode(t, compression.Gzip, raw)
				req, _ := http.NewRequest("POST", f.http.URL+p.EnvelopePath(), bytes.NewReader(body))
				req.Header.Set("X-Sentry-Auth", p.AuthHeader("t"))
				req.Header.Set("Content-Encoding", "gzip")
				resp, err := f.http.client.Do(req)
				if err != nil {
					failed <- err.Error()
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed <- resp.Status
				}
			}
		}()
	}
	wg.Wait()
	close(failed)
	for msg := range failed {
		t.Fatal(msg)
	}
	if st := f.captureStats(); st.Kept != clients*each || st.Errors != 0 {
		t.Errorf("/stats capture %+v", st)
	}
	entries := readCapture(t, w)
	if len(entries) != clients*each {
		t.Errorf("%d entries, want %d", len(entries), clients*each)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.File] {
			t.Errorf("%s listed twice", e.File)
		}
		seen[e.File] = true
	}
}

// TestCaptureWriteError: a capture that cannot write (its directory gone)
// counts the error, and the envelope kept before as lost, in /stats while
// the envelope is still accepted.
func TestCaptureWriteError(t *testing.T) {
	f, w := captureFixture(t, capture.Config{})
	p := f.ps[0]
	raw := envelopeBody(p, "", item("event", "{}"))
	wantStatus(t, f.postEnvelope(p, compression.Gzip, raw, nil), 200, "")
	if err := os.RemoveAll(w.Dir()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		wantStatus(t, f.postEnvelope(p, compression.Gzip, raw, nil), 200, "")
	}
	st := f.captureStats()
	if st.Kept != 1 || st.Lost != 1 || st.Errors != 2 || !strings.Contains(st.LastError, "was removed or replaced during the capture") {
		t.Errorf("/stats capture %+v, want 1 kept, lost with the directory, and 2 errors", st)
	}
	if f.srv.Stats().Envelopes != 3 {
		t.Errorf("envelopes %d, want 3 accepted", f.srv.Stats().Envelopes)
	}
	prom := parseProm(t, string(f.do("GET", "/stats?format=prometheus", nil, nil).body))
	if prom[series("capture_errors_total")] != 2 || prom[series("capture_lost_total")] != 1 {
		t.Errorf("capture_errors_total %v, capture_lost_total %v", prom[series("capture_errors_total")], prom[series("capture_lost_total")])
	}
}

// TestCaptureOff: without a capture, /stats has no capture object nor
// capture series.
func TestCaptureOff(t *testing.T) {
	f := newFixture(t, nil)
	r := f.do("GET", "/stats", nil, nil)
	if bytes.Contains(r.body, []byte(`"capture"`)) {
		t.Errorf("/stats without a capture: %s", r.body)
	}
	if prom := f.do("GET", "/stats?format=prometheus", nil, nil).body; bytes.Contains(prom, []byte("capture_")) {
		t.Error("Prometheus series of a capture that is off")
	}
}
