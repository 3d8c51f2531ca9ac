package standinrelay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/pool"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
	"github.com/relayload/relayload/upstream"
)

// TestEndToEndWithFakeUpstream runs the real fake upstream in-process, the
// stand-in binary against it, and replays a small pool: every item the pool
// holds must show up in the upstream's /stats, signed and zstd-compressed.
func TestEndToEndWithFakeUpstream(t *testing.T) {
	ps, err := projects.Generate(7, 4)
	if err != nil {
		t.Fatal(err)
	}
	cfgYAML := func(upURL, port string) string {
		return fmt.Sprintf(`relay: {mode: managed, upstream: %q, host: 127.0.0.1, port: %s}
http: {timeout: 5, encoding: zstd}
outcomes: {emit_outcomes: true, source: e2e}
aggregator: {bucket_interval: 0.2, initial_delay: 0}
cache: {batch_interval: 10, global_config_fetch_interval: 1}
limits: {shutdown_timeout: 5, max_thread_count: 1}
logging: {level: info}
`, upURL+"/", port)
	}
	dir, creds := configDir(t, "placeholder")
	_, pub, err := creds.Keys()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := upstream.New(upstream.Config{
		Projects:         ps,
		VerifySignatures: true,
		AllowList:        true,
		Relays:           map[string]relayauth.PublicKey{creds.ID: pub},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	port := freePort(t) // after the upstream bound its port
	writeFile(t, dir+"/config.yml", cfgYAML(hs.URL, port))

	p := startBinary(t, "-c", dir, "run")
	base := "http://127.0.0.1:" + port
	p.waitReady(t, base)

	pl, err := pool.Build(context.Background(), pool.Options{Seed: 3, Size: 60, Projects: ps, Encoding: compression.Zstd})
	if err != nil {
		t.Fatal(err)
	}
	// What the pool holds, by item type.
	want := map[string]int64{}
	for i := range pl.Entries {
		env, err := envelope.Parse(pl.Raw(i))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range env.Items {
			want[it.Type]++
		}
	}
	for i, e := range pl.Entries {
		proj := ps[e.Project]
		req, _ := http.NewRequest(http.MethodPost, base+proj.EnvelopePath(), bytes.NewReader(e.Body))
		req.Header.Set("Content-Type", "application/x-sentry-envelope")
		req.Header.Set("Content-Encoding", "zstd")
		req.Header.Set("X-Sentry-Auth", proj.AuthHeader("relayload-test/1.0"))
		req.Header.Set("User-Agent", e.UserAgent)
		req.Header.Set("X-Forwarded-For", e.ForwardedFor)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("entry %d (%s): %d %s", i, e.Kind, resp.StatusCode, b)
		}
	}

	match := func(st upstream.Stats) bool {
		for typ, n := range want {
			if st.ItemsByType[typ] != n {
				return false
			}
		}
		return true
	}
	waitFor(t, 15*time.Second, "all items at the upstream", func() bool { return match(srv.Stats()) })
	st := srv.Stats()
	t.Logf("pool items %v; upstream envelopes %d items %v signatures %+v leaks %v", want, st.Envelopes, st.ItemsByType, st.Signatures, st.Canaries.Leaks)
	if st.Registrations.Responses < 1 || st.ConfigRequests.Global < 1 || st.ConfigRequests.KeysServed < 1 {
		t.Errorf("protocol counts: %+v %+v", st.Registrations, st.ConfigRequests)
	}
	if st.Signatures.Verified == 0 {
		t.Errorf("no signature verified: %+v", st.Signatures)
	}
	if st.Bytes["zstd"].Requests == 0 {
		t.Errorf("no zstd bodies: %v", st.Bytes)
	}
	if st.EnvelopesBySender["relay"] != st.Envelopes {
		t.Errorf("envelopes by sender %v of %d", st.EnvelopesBySender, st.Envelopes)
	}
	for kind, n := range st.Canaries.Leaks {
		t.Errorf("canary %s leaked %d times", kind, n)
	}
	if st.Canaries.ScrubbedItems == 0 {
		t.Errorf("no scrubbed items: %+v", st.Canaries)
	}
	for k, v := range st.Errors {
		if v > 0 {
			t.Errorf("upstream error %s: %d", k, v)
		}
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
}
