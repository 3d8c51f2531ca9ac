package upstream

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/projects"
)

// FuzzHandler drives the whole handler with random bodies, encodings and
// routes. Whatever arrives, the answer is a JSON object with status 200 or
// 4xx (never 5xx: nothing may panic), and memory stays bounded by the caps.
func FuzzHandler(f *testing.F) {
	ps, _ := projects.Generate(3, 5)
	p := ps[0]
	good := envelopeBody(p, eventID, item("event", `{"a":1}`), item("client_report", `{"discarded_events":[{"reason":"x","category":"error","quantity":2}]}`),
		item("metric_buckets", `[{"name":"c:outcomes/filtered@none","type":"c","value":1,"tags":{"category":"1"}}]`))
	enc := compression.NewEncoder()
	for i, e := range compression.Encodings() {
		b, _ := enc.Encode(e, good, nil)
		f.Add(uint8(i), uint8(0), b)
		f.Add(uint8(i), uint8(0), good)
	}
	f.Add(uint8(0), uint8(1), []byte(`{"global":true,"publicKeys":["`+p.PublicKey+`"]}`))
	f.Add(uint8(0), uint8(2), []byte(`{"relay_id":"x","public_key":"y","version":"1"}`))
	f.Add(uint8(0), uint8(3), []byte(`{"outcomes":[{"outcome":2,"category":1}]}`))
	f.Add(uint8(4), uint8(4), []byte(`{"buckets":{"k":[]}}`))
	f.Add(uint8(0), uint8(5), []byte(`{"inject":[{"route":"live","status":503,"probability":0.5}]}`))

	srv, err := newServer(Config{Projects: ps, VerifySignatures: false, MaxWireBytes: 1 << 20, MaxDecodedBytes: 4 << 20})
	if err != nil {
		f.Fatal(err)
	}
	srv.RegisterRelay("3c8c1c7e-6d5e-4b8a-9a0e-6a8b2d9f0c11", newRelay(f).pub)
	paths := []string{p.EnvelopePath(), "/api/0/relays/projectconfigs/?version=3", "/api/0/relays/register/challenge/",
		"/api/0/relays/outcomes/", "/api/0/relays/metrics/", "/control", "/api/9999/envelope/", "/stats?format=prometheus",
		"/api/0/relays/register/response/", "/api/0/relays/publickeys/", "/api/0/relays/projectconfigs/?version=2", "/nowhere"}
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, encIdx, pathIdx uint8, body []byte) {
		encs := compression.Encodings()
		path := paths[int(pathIdx)%len(paths)]
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		if e := encs[int(encIdx)%len(encs)]; e != compression.Identity {
			req.Header.Set("Content-Encoding", string(e))
		}
		req.Header.Set("X-Sentry-Auth", p.AuthHeader("fuzz"))
		if encIdx&0x80 != 0 {
			req.Header.Set("X-Sentry-Relay-Id", "3c8c1c7e-6d5e-4b8a-9a0e-6a8b2d9f0c11")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if path == "/control" {
			// Keep faults from leaking into later inputs.
			_ = srv.SetFaults(Faults{})
		}
		if w.Code >= 500 && w.Code != 502 && w.Code != 503 && w.Code != 504 {
			t.Fatalf("%s: status %d: %s", path, w.Code, w.Body.Bytes())
		}
		if path != "/stats?format=prometheus" && w.Body.Len() > 0 && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s: body is not JSON: %q", path, w.Body.Bytes())
		}
		if w.Code >= 400 {
			// Every rejection names the problem (Relay's error body).
			var e struct {
				Detail *string  `json:"detail"`
				Causes []string `json:"causes"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Detail == nil || *e.Detail == "" || e.Causes == nil {
				t.Fatalf("%s: status %d without a {detail, causes} body: %q", path, w.Code, w.Body.Bytes())
			}
		}
		if st := srv.stats.Load(); st.panics.Load() != 0 {
			t.Fatalf("panic recovered on %s", path)
		}
	})
}
