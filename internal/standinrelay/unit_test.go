package standinrelay

import (
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`relay: {mode: managed, upstream: "http://127.0.0.1:9/", port: 0}
http: {encoding: gzip, retry_delay: 0.5}
cache: {batch_interval: 20}
limits: {shutdown_timeout: 2, max_concurrent_requests: 37}
metrics: {statsd: "127.0.0.1:8125"}
outcomes: {emit_outcomes: true}
standin: {capacity: 150}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Upstream.String() != "http://127.0.0.1:9" || c.Port != 0 || c.Encoding != compression.Gzip || c.RetryDelay != 500*time.Millisecond ||
		c.BatchInterval != 20*time.Millisecond || c.ShutdownTimeout != 2*time.Second || c.MaxConcurrentRequests != 37 ||
		c.StatsdAddr != "127.0.0.1:8125" || c.StatsdPrefix != "sentry.relay" || c.Capacity != 150 || c.GlobalFetchInterval != 10*time.Second {
		t.Errorf("%+v", c)
	}
	for _, tc := range []struct{ yaml, want string }{
		{`relay: {mode: proxy, upstream: "http://x/"}`, "only does managed"},
		{`relay: {mode: managed, upstream: "http://x/api/"}`, "bare origin"},
		{`relay: {mode: managed, upstream: "http://x/", port: 70000}`, "relay.port"},
		{`relay: {mode: managed, upstream: "http://x/"}` + "\nhttp: {encoding: lz4}", "http.encoding"},
		{`relay: {mode: managed, upstream: "http://x/"}` + "\nlimits: {shutdown_timeout: -1}", "limits.shutdown_timeout"},
		{`relay: {mode: managed, upstream: "http://x/"}` + "\nstandin: {capacity: -5}", "standin.capacity"},
	} {
		if _, err := ParseConfig([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %s", tc.yaml, err, tc.want)
		}
	}
}

func TestRateLimits(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var rl rateLimits
	rl.add("a", parseRateLimits("10:transaction;monitor:project:quota, bad, 3::organization:generic", "99", now))
	rl.add("b", parseRateLimits("", "5", now))   // Retry-After only: all categories
	rl.add("c", parseRateLimits("", "", now))    // neither: no limit (0 s)
	rl.add("d", parseRateLimits("x:y", "", now)) // nothing valid: Retry-After, absent
	for _, tc := range []struct {
		key, typ string
		at       time.Duration
		until    time.Duration // 0: not limited
	}{
		{"a", "transaction", 0, 10 * time.Second},
		{"a", "check_in", 0, 10 * time.Second},
		{"a", "event", 0, 3 * time.Second}, // the all-category limit
		{"a", "event", 4 * time.Second, 0},
		{"a", "transaction", 4 * time.Second, 10 * time.Second},
		{"a", "transaction", 10 * time.Second, 0},
		{"b", "log", time.Second, 5 * time.Second},
		{"c", "event", 0, 0},
		{"d", "event", 0, 0},
		{"e", "event", 0, 0},
	} {
		until, limited := rl.check(tc.key, tc.typ, now.Add(tc.at))
		if limited != (tc.until > 0) || limited && !until.Equal(now.Add(tc.until)) {
			t.Errorf("%s %s at +%s: limited %v until %v, want until +%s", tc.key, tc.typ, tc.at, limited, until.Sub(now), tc.until)
		}
	}
}

func TestBuffer(t *testing.T) {
	b := newBuffer()
	ready := map[string]bool{"r": true}
	isReady := func(k string) bool { return ready[k] }
	for _, k := range []string{"r", "w", "w", "x"} {
		if err := b.push(&job{key: k}, isReady); err != nil {
			t.Fatal(err)
		}
	}
	if j, ok := b.pop(); !ok || j.key != "r" {
		t.Fatalf("pop: %v %v", j, ok)
	}
	b.done()
	if n := b.drop("x"); n != 1 || b.len() != 2 {
		t.Errorf("drop x: %d, %d held", n, b.len())
	}
	b.release("w")
	for range 2 {
		if j, ok := b.pop(); !ok || j.key != "w" {
			t.Fatalf("pop after release: %v %v", j, ok)
		}
		b.done()
	}
	for range maxBuffered {
		_ = b.push(&job{key: "w"}, func(string) bool { return false })
	}
	if err := b.push(&job{key: "w"}, isReady); err != errBufferFull || b.len() != maxBuffered {
		t.Errorf("push beyond the bound: %v, %d held", err, b.len())
	}
	b.close()
	if _, ok := b.pop(); ok {
		t.Error("pop after close")
	}
}
