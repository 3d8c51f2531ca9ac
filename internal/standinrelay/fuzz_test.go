package standinrelay

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func FuzzParseSentryAuth(f *testing.F) {
	f.Add("Sentry sentry_key=" + keyA + ", sentry_version=7, sentry_client=x/1")
	f.Add("sentry key=a,version=,client")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseSentryAuth(s)
		if err == nil && a.key == "" {
			t.Errorf("%q: accepted without a key", s)
		}
	})
}

func FuzzParseRateLimits(f *testing.F) {
	f.Add("60:error;transaction:project:rate_limited, 10::key:generic", "")
	f.Add("", "30")
	f.Add("x:y:z", "nan")
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, h, retry string) {
		ls := parseRateLimits(h, retry, now)
		if len(ls) == 0 {
			t.Fatalf("%q/%q: no limits from a 429", h, retry)
		}
		for _, l := range ls {
			if l.until.Before(now) {
				t.Errorf("limit in the past: %+v", l)
			}
		}
		out, secs := formatRateLimits(ls, now)
		if secs < 1 || strings.Contains(out, "\n") && !strings.Contains(h, "\n") {
			t.Errorf("format %q %d", out, secs)
		}
	})
}

func FuzzProcessEvent(f *testing.F) {
	f.Add([]byte(eventPayload()))
	f.Add([]byte(`{"logentry":{"formatted":"4111111111111111 a@b.cd"},"a":[{"token":1}],"_meta":{}}`))
	f.Add([]byte(`{"x":"-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := processEvent(b, eventID)
		if err != nil {
			return
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("output is not a JSON object: %v\n%s", err, out)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("relay: {mode: managed, upstream: 'http://h:1'}\nlimits: {max_envelope_size: 1MiB}"))
	f.Add([]byte("relay: {mode: managed, upstream: 'http://h:1/'}\noutcomes: {emit_outcomes: [1]}"))
	f.Add([]byte("relay: {mode: managed, upstream: 'http://h:1'}\nstandin: {capacity: 200, max_buffered_bytes: 1GiB}"))
	f.Add([]byte("relay: {mode: managed, upstream: 'http://h:1'}\nstandin: {capacity: 1e-300}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if c.Upstream == nil || c.BatchSize <= 0 || c.MaxConcurrentRequests <= 0 || c.MaxEnvelopeSize <= 0 || c.BucketInterval <= 0 {
			t.Errorf("accepted config with unusable values: %+v", c)
		}
		if math.IsNaN(c.Capacity) || c.Capacity < 0 || c.Capacity > maxCapacity {
			t.Errorf("accepted standin.capacity %v", c.Capacity)
		}
		if p := newPacer(c.Capacity); p != nil && (p.interval <= 0 || p.burst < p.interval) {
			t.Errorf("capacity %v: pacer interval %v burst %v", c.Capacity, p.interval, p.burst)
		}
	})
}
