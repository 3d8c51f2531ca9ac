package standinrelay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/relayauth"
)

const (
	keyA = "31a5a894b4524f74a9a8d0e27e21ba91"
	keyB = "c0ffee00c0ffee00c0ffee00c0ffee00"
)

func envURL(s *standin, projectID int64) string {
	return fmt.Sprintf("%s/api/%d/envelope/", s.url, projectID)
}

const eventID = "9ec79c33ec9942ab8353589fcb2e04dc"

// eventPayload is an error event carrying a few canaries.
func eventPayload() string {
	return `{"event_id":"` + eventID + `","level":"error","message":"boom",` +
		`"request":{"url":"https://shop.example/checkout","headers":{"User-Agent":"Mozilla/5.0","Authorization":"Bearer rlcnry-ah-aaaab","X-Api-Key":"rlcnry-ak-aaaab"},` +
		`"cookies":{"sessionid":"rlcnry-sc-aaaab","theme":"dark"},"data":{"password":"rlcnry-pa-aaaab","page":"2"}},` +
		`"extra":{"db_url":"postgres://app:rlcnry-ur-aaaab@db:5432/shop","credentials":{"user":"rlcnry-co-aaaab"},` +
		`"payment_note":"rlcnry-cc-aaaab 4111 1111 1111 1111","public_note":"rlcnry-ke-aaaab"},` +
		`"user":{"id":"u-1","username":"secret-rlcnry-sv-aaaab"}}`
}

// mixedEnvelope has an event, an attachment, a session, a check-in and a log container.
func mixedEnvelope(dsn string) []byte {
	hdr := `{"event_id":"` + eventID + `","sent_at":"2026-01-01T00:00:00Z","sdk":{"name":"test","version":"1"}` + dsn + `}`
	e := envelope.Envelope{Header: []byte(hdr), Items: []envelope.Item{
		{Type: "event", Payload: []byte(eventPayload())},
		{Type: "attachment", Payload: []byte("hello attachment"), Extra: map[string]any{"filename": "a.txt"}},
		{Type: "session", Payload: []byte(`{"sid":"7c7b6585f9014351bf8d02711b721929","init":true,"started":"2026-01-01T00:00:00Z","status":"ok","attrs":{"release":"a@1"}}`)},
		{Type: "check_in", Payload: []byte(`{"check_in_id":"83a7c03ed0a04e1b97e2e3b18d38f244","monitor_slug":"nightly","status":"ok"}`)},
		{Type: "log", ContentType: "application/vnd.sentry.items.log+json", ItemCount: 1, Payload: []byte(`{"items":[{"timestamp":1767225600.1,"trace_id":"624f66e93a04469f9992c7e9f1485056","level":"info","body":"hi"}]}`)},
	}}
	return e.Marshal()
}

func singleItem(typ, payload string) []byte {
	e := envelope.Envelope{Header: []byte(`{"event_id":"` + eventID + `"}`), Items: []envelope.Item{{Type: typ, Payload: []byte(payload)}}}
	return e.Marshal()
}

func TestRegistrationReadinessAndBackoff(t *testing.T) {
	up := newTestUpstream(t)
	up.challengeHook = func(n int) (int, string) {
		if n == 1 {
			return 500, `{"detail":"try again"}`
		}
		return 0, ""
	}
	start := time.Now()
	s := startStandin(t, baseConfig(up.srv.URL))

	resp, err := http.Get(s.url + "/api/relay/healthcheck/live/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("live: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(s.url + "/api/relay/healthcheck/ready/")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]bool
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 503 || body["is_healthy"] {
		t.Fatalf("ready before registration: %d %v", resp.StatusCode, body)
	}

	waitFor(t, 5*time.Second, "ready", func() bool {
		resp, err := http.Get(s.url + "/api/relay/healthcheck/ready/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var b map[string]bool
		json.NewDecoder(resp.Body).Decode(&b)
		return resp.StatusCode == 200 && b["is_healthy"]
	})
	// The first challenge failed with a 500: the retry comes after Relay's 1 s backoff.
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("ready after %s: the retry did not wait for the 1 s backoff", el)
	}
	up.mu.Lock()
	ch, rs := up.challenges, up.responses
	up.mu.Unlock()
	if ch != 2 || rs != 1 {
		t.Errorf("challenges %d responses %d, want 2 and 1", ch, rs)
	}
	if st := s.Stats(); st.Registrations != 1 || st.RegisterFailures != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestReauthInterval(t *testing.T) {
	up := newTestUpstream(t)
	cfg := strings.Replace(baseConfig(up.srv.URL), "http:\n", "http:\n  auth_interval: 0.2\n", 1)
	s := startStandin(t, cfg)
	waitFor(t, 5*time.Second, "three registrations", func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		return up.responses >= 3
	})
	if !s.Ready() {
		t.Error("not ready while re-authenticating")
	}
}

func TestRelayStopIsPermanent(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.challengeHook = func(int) (int, string) { return 403, `{"detail":"go away","relay":"stop"}` }
	cfg := strings.Replace(baseConfig(up.srv.URL), "logging:", "limits:\n  query_timeout: 1\n  shutdown_timeout: 0.2\nlogging:", 1)
	s := startStandin(t, cfg)
	waitFor(t, 5*time.Second, "auth denied", func() bool { return s.Stats().Auth == "denied" })
	// Envelopes are taken while the project "loads"; its fetch can only fail,
	// so after query_timeout the project counts as disabled.
	if status, _, _ := post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA)); status != 200 {
		t.Errorf("ingest after relay stop: %d", status)
	}
	waitFor(t, 5*time.Second, "project disabled after query_timeout", func() bool { st, _ := s.projects.status(keyA); return st == projectDisabled })
	if status, _, _ := post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA)); status != 403 {
		t.Errorf("ingest for the now disabled project: %d", status)
	}
	up.mu.Lock()
	ch, g, p := up.challenges, up.globalReqs, len(up.projectReqs)
	up.mu.Unlock()
	if ch != 1 || g != 0 || p != 0 {
		t.Errorf("after relay stop: %d challenges, %d global, %d project requests; want 1, 0, 0", ch, g, p)
	}
	resp, err := http.Get(s.url + "/api/relay/healthcheck/ready/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("ready after relay stop: %d", resp.StatusCode)
	}
	// A plain 403 (no relay:stop) is retried instead.
	up2 := newTestUpstream(t)
	up2.challengeHook = func(n int) (int, string) {
		if n == 1 {
			return 403, `{"detail":"unknown relay"}`
		}
		return 0, ""
	}
	s2 := startStandin(t, baseConfig(up2.srv.URL))
	waitFor(t, 5*time.Second, "registered after plain 403", func() bool { return s2.Ready() })
}

func TestForwardSplitSignedZstd(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "rev-1")
	s := startStandin(t, baseConfig(up.srv.URL))
	waitFor(t, 5*time.Second, "ready", s.Ready)

	h := authHeader(keyA)
	h["Origin"] = "https://shop.example"
	status, _, body := post(t, envURL(s, 42), mixedEnvelope(""), h)
	if status != 200 || body["id"] != eventID {
		t.Fatalf("ingest: %d %v", status, body)
	}
	waitFor(t, 5*time.Second, "4 forwarded envelopes", func() bool { return len(up.received()) >= 4 })
	time.Sleep(50 * time.Millisecond)
	got := up.received()
	if len(got) != 4 {
		t.Fatalf("forwarded %d envelopes, want 4 (error, session, check-in, log groups)", len(got))
	}
	var groups []string
	for _, e := range got {
		groups = append(groups, strings.Join(e.itemTypes(), "+"))
		if e.path != "/api/42/envelope/" {
			t.Errorf("path %s", e.path)
		}
		if ce := e.header.Get("Content-Encoding"); ce != "zstd" {
			t.Errorf("Content-Encoding %q, want zstd", ce)
		}
		if a := e.header.Get("X-Sentry-Auth"); a != "Sentry sentry_key="+keyA+", sentry_version=7, sentry_client=test-sdk/1.0" {
			t.Errorf("X-Sentry-Auth %q", a)
		}
		if o := e.header.Get("Origin"); o != "https://shop.example" || e.hdr["origin"] != o {
			t.Errorf("Origin header %q, envelope header %v", o, e.hdr["origin"])
		}
		if ua := e.header.Get("User-Agent"); ua != "test-agent/2.0" {
			t.Errorf("User-Agent %q", ua)
		}
		if e.hdr["dsn"] != "http://"+keyA+":@"+strings.TrimPrefix(up.srv.URL, "http://")+"/42" {
			t.Errorf("dsn %v", e.hdr["dsn"])
		}
		if ff, _ := e.hdr["forwarded_for"].(string); !strings.HasPrefix(ff, "203.0.113.9, 127.0.0.1") {
			t.Errorf("forwarded_for %q", ff)
		}
		if e.hdr["user_agent"] != "test-agent/2.0" || e.hdr["client"] != "test-sdk/1.0" {
			t.Errorf("request meta in header: %v", e.hdr)
		}
		sent, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e.hdr["sent_at"]))
		if err != nil || time.Since(sent) > time.Minute {
			t.Errorf("sent_at %v not fresh: %v", e.hdr["sent_at"], err)
		}
		if e.hdr["sdk"] == nil {
			t.Errorf("sdk header field lost: %v", e.hdr)
		}
	}
	slices.Sort(groups)
	want := []string{"check_in", "event+attachment", "log", "session"}
	if !slices.Equal(groups, want) {
		t.Errorf("groups %v, want %v", groups, want)
	}
	for _, e := range got {
		if e.itemTypes()[0] != "event" {
			if _, ok := e.hdr["event_id"]; ok {
				t.Errorf("%v envelope kept event_id", e.itemTypes())
			}
			continue
		}
		if e.hdr["event_id"] != eventID {
			t.Errorf("event envelope event_id %v", e.hdr["event_id"])
		}
		ev := e.env.Items[0].Payload
		if leaks := leakedCanaries(ev); len(leaks) > 0 {
			t.Errorf("canaries leaked: %v\n%s", leaks, ev)
		}
		if !strings.Contains(string(ev), "rlcnry-ke-aaaab") {
			t.Errorf("kept control canary was scrubbed: %s", ev)
		}
		var m map[string]any
		if err := json.Unmarshal(ev, &m); err != nil {
			t.Fatal(err)
		}
		if m["_meta"] == nil {
			t.Errorf("no _meta remarks: %s", ev)
		}
		if att := e.env.Items[1]; string(att.Payload) != "hello attachment" || !strings.Contains(string(att.Header), `"filename":"a.txt"`) {
			t.Errorf("attachment %s %q", att.Header, att.Payload)
		}
	}
}

func TestEncodingsAndAuthSources(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	cfg := strings.Replace(baseConfig(up.srv.URL), "http:\n", "http:\n  encoding: gzip\n", 1)
	s := startStandin(t, cfg)
	waitFor(t, 5*time.Second, "ready", s.Ready)
	enc := compression.NewEncoder()
	raw := singleItem("check_in", `{"check_in_id":"83a7c03ed0a04e1b97e2e3b18d38f244","monitor_slug":"m","status":"ok"}`)
	n := 0
	for _, e := range compression.Encodings() {
		body, err := enc.Encode(e, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := authHeader(keyA)
		if e != compression.Identity {
			h["Content-Encoding"] = string(e)
		}
		if status, _, b := post(t, envURL(s, 42), body, h); status != 200 {
			t.Errorf("%s: %d %v", e, status, b)
		}
		n++
	}
	// ?sentry_key= and the envelope header's dsn also authenticate.
	if status, _, b := post(t, envURL(s, 42)+"?sentry_key="+keyA+"&sentry_version=7", raw, nil); status != 200 {
		t.Errorf("query auth: %d %v", status, b)
	}
	n++
	dsnEnv := envelope.Envelope{Header: []byte(`{"dsn":"http://` + keyA + `@localhost/42"}`), Items: []envelope.Item{{Type: "check_in", Payload: []byte(`{}`)}}}
	if status, _, b := post(t, envURL(s, 42), dsnEnv.Marshal(), nil); status != 200 {
		t.Errorf("dsn auth: %d %v", status, b)
	}
	n++
	waitFor(t, 5*time.Second, "all forwarded", func() bool { return len(up.received()) == n })
	for _, e := range up.received() {
		if ce := e.header.Get("Content-Encoding"); ce != "gzip" {
			t.Errorf("http.encoding gzip: got Content-Encoding %q", ce)
		}
	}
}

func TestIngestErrors(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.setConfig(keyB, `{"disabled":true}`)
	s := startStandin(t, baseConfig(up.srv.URL))
	waitFor(t, 5*time.Second, "ready", s.Ready)
	good := singleItem("event", `{"message":"x"}`)
	// Teach the stand-in both configs first.
	post(t, envURL(s, 42), good, authHeader(keyA))
	post(t, envURL(s, 42), good, authHeader(keyB))
	waitFor(t, 5*time.Second, "configs", func() bool {
		a, _ := s.projects.status(keyA)
		b, _ := s.projects.status(keyB)
		return a == projectEnabled && b == projectDisabled
	})
	gz, _ := compression.NewEncoder().Encode(compression.Gzip, good, nil)
	tests := []struct {
		name   string
		path   int64
		body   []byte
		hdr    map[string]string
		status int
		detail string
	}{
		{"ok", 42, good, authHeader(keyA), 200, ""},
		{"missing auth", 42, good, nil, 401, "missing authorization information"},
		{"bad auth header", 42, good, map[string]string{"X-Sentry-Auth": "Bearer x"}, 401, "bad x-sentry-auth header"},
		{"multiple auth", 42, good, map[string]string{"X-Sentry-Auth": "Sentry sentry_key=" + keyA, "Authorization": "Sentry sentry_key=" + keyA}, 401, "multiple authorization payloads detected"},
		{"future version", 42, good, map[string]string{"X-Sentry-Auth": "Sentry sentry_key=" + keyA + ", sentry_version=8"}, 400, "unsupported protocol version (8)"},
		{"bad key", 42, good, map[string]string{"X-Sentry-Auth": "Sentry sentry_key=not-a-key!"}, 400, "bad sentry DSN public key"},
		{"empty body", 42, nil, authHeader(keyA), 400, "empty request body"},
		{"bad envelope", 42, []byte("{\"event_id\":1}\n"), authHeader(keyA), 400, "invalid event envelope"},
		{"two trailing newlines", 42, append(singleItem("event", "{}"), '\n'), authHeader(keyA), 400, "invalid event envelope"},
		{"bad gzip", 42, []byte("not gzip"), map[string]string{"X-Sentry-Auth": "Sentry sentry_key=" + keyA, "Content-Encoding": "gzip"}, 400, "invalid request body"},
		{"unknown encoding", 42, gz, map[string]string{"X-Sentry-Auth": "Sentry sentry_key=" + keyA, "Content-Encoding": "lzma"}, 400, "invalid request body"},
		{"gzip ok", 42, gz, map[string]string{"X-Sentry-Auth": "Sentry sentry_key=" + keyA, "Content-Encoding": "gzip"}, 200, ""},
		{"dsn mismatch", 42, []byte(`{"dsn":"http://` + keyB + `@h/42"}` + "\n" + `{"type":"event","length":2}` + "\n{}\n"), authHeader(keyA), 400, "invalid event envelope"},
		{"dsn project mismatch", 42, []byte(`{"dsn":"http://` + keyA + `@h/43"}` + "\n" + `{"type":"event","length":2}` + "\n{}\n"), authHeader(keyA), 400, "invalid event envelope"},
		{"disabled project", 42, good, authHeader(keyB), 403, "event submission rejected with_reason: ProjectState"},
		{"wrong project id", 43, good, authHeader(keyA), 403, "event submission rejected with_reason: ProjectId"},
		{"event too large", 42, singleItem("event", `{"a":"`+strings.Repeat("x", 1<<20)+`"}`), authHeader(keyA), 413, "envelope exceeded size limits for type 'event' (https://develop.sentry.dev/sdk/envelopes/#size-limits)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := post(t, envURL(s, tc.path), tc.body, tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d (%v)", status, tc.status, body)
			}
			if tc.detail != "" && body["detail"] != tc.detail {
				t.Errorf("detail %q, want %q", body["detail"], tc.detail)
			}
			if tc.status == 200 && body["id"] != eventID {
				t.Errorf("body %v", body)
			}
		})
	}
	// Header-only envelope: 200 with the id, nothing forwarded.
	status, _, body := post(t, envURL(s, 42), []byte(`{"event_id":"`+eventID+`"}`+"\n"), authHeader(keyA))
	if status != 200 || body["id"] != eventID {
		t.Errorf("empty envelope: %d %v", status, body)
	}
	// No event id → {}.
	status, _, body = post(t, envURL(s, 42), []byte("{}\n{\"type\":\"check_in\"}\n{}\n"), authHeader(keyA))
	if status != 200 || len(body) != 0 {
		t.Errorf("no event id: %d %v", status, body)
	}
}

func TestGlobalConfigGatesProcessing(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	ready := make(chan struct{})
	up.globalStatus = func(int) string {
		select {
		case <-ready:
			return "ready"
		default:
			return "pending"
		}
	}
	s := startStandin(t, baseConfig(up.srv.URL))
	waitFor(t, 5*time.Second, "ready", s.Ready)
	for range 3 {
		if status, _, _ := post(t, envURL(s, 42), singleItem("event", `{"message":"x"}`), authHeader(keyA)); status != 200 {
			t.Fatalf("ingest while global pending: %d", status)
		}
	}
	waitFor(t, 5*time.Second, "project config fetched", func() bool { st, _ := s.projects.status(keyA); return st == projectEnabled })
	time.Sleep(300 * time.Millisecond)
	if n := len(up.received()); n != 0 {
		t.Fatalf("forwarded %d envelopes before a ready global config", n)
	}
	if st := s.Stats(); st.WaitingForConfig != 3 || st.GlobalConfig {
		t.Errorf("stats while pending: %+v", st)
	}
	close(ready)
	waitFor(t, 5*time.Second, "3 forwarded after global ready", func() bool { return len(up.received()) == 3 })
}

func TestPendingUnchangedAndRevisions(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "rev-7")
	up.pending[keyA] = 2
	up.answerUnchanged = true
	cfg := strings.Replace(baseConfig(up.srv.URL), "cache:\n", "cache:\n  project_expiry: 0.3\n", 1)
	s := startStandin(t, cfg)
	waitFor(t, 5*time.Second, "ready", s.Ready)
	if status, _, _ := post(t, envURL(s, 42), singleItem("event", `{"message":"x"}`), authHeader(keyA)); status != 200 {
		t.Fatal(status)
	}
	waitFor(t, 5*time.Second, "forwarded after pending", func() bool { return len(up.received()) == 1 })
	up.mu.Lock()
	reqs := slices.Clone(up.projectReqs)
	up.mu.Unlock()
	if len(reqs) != 3 {
		t.Fatalf("%d project requests, want 3 (pending, pending, config)", len(reqs))
	}
	for i, r := range reqs {
		if !slices.Equal(r.PublicKeys, []string{keyA}) || r.Revisions[0] != nil || r.FullConfig || r.NoCache {
			t.Errorf("request %d: %+v", i, r)
		}
	}
	// After project_expiry the next envelope triggers a refetch with the rev,
	// answered "unchanged": the config stays and forwarding goes on.
	time.Sleep(400 * time.Millisecond)
	if status, _, _ := post(t, envURL(s, 42), singleItem("event", `{"message":"y"}`), authHeader(keyA)); status != 200 {
		t.Fatal(status)
	}
	waitFor(t, 5*time.Second, "refetch with revision", func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		return len(up.projectReqs) == 4
	})
	up.mu.Lock()
	last := up.projectReqs[3]
	up.mu.Unlock()
	if last.Revisions[0] == nil || *last.Revisions[0] != "rev-7" {
		t.Errorf("refetch revisions %v, want [rev-7]", last.Revisions)
	}
	waitFor(t, 5*time.Second, "second envelope forwarded", func() bool { return len(up.received()) == 2 })
	waitFor(t, 5*time.Second, "unchanged counted", func() bool { return s.Stats().ProjectUnchanged == 1 })
	if st, _ := s.projects.status(keyA); st != projectEnabled {
		t.Errorf("after unchanged: status %v", st)
	}
}

func TestPendingForeverBecomesDisabled(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.pending[keyA] = 1 << 30
	cfg := strings.Replace(baseConfig(up.srv.URL), "logging:", "limits:\n  query_timeout: 0.5\nlogging:", 1)
	s := startStandin(t, cfg)
	waitFor(t, 5*time.Second, "ready", s.Ready)
	if status, _, _ := post(t, envURL(s, 42), singleItem("event", `{}`), authHeader(keyA)); status != 200 {
		t.Fatal(status)
	}
	waitFor(t, 5*time.Second, "given up", func() bool { st, _ := s.projects.status(keyA); return st == projectDisabled })
	if st := s.Stats(); st.DroppedDisabled != 1 || st.Buffered != 0 {
		t.Errorf("stats %+v", st)
	}
	if status, _, _ := post(t, envURL(s, 42), singleItem("event", `{}`), authHeader(keyA)); status != 403 {
		t.Errorf("after giving up: %d, want 403", status)
	}
	if len(up.received()) != 0 {
		t.Error("forwarded data of a disabled project")
	}
}

func TestBatching(t *testing.T) {
	up := newTestUpstream(t)
	var keys []string
	for i := range 7 {
		k := fmt.Sprintf("%032x", i+1)
		keys = append(keys, k)
		up.project(k, int64(100+i), 1, "r")
	}
	cfg := strings.Replace(baseConfig(up.srv.URL), "cache:\n  batch_interval: 5\n", "cache:\n  batch_interval: 200\n  batch_size: 3\n", 1)
	s := startStandin(t, cfg)
	waitFor(t, 5*time.Second, "ready", s.Ready)
	for i, k := range keys {
		if status, _, _ := post(t, envURL(s, int64(100+i)), singleItem("event", `{}`), authHeader(k)); status != 200 {
			t.Fatal(status)
		}
	}
	waitFor(t, 5*time.Second, "all forwarded", func() bool { return len(up.received()) == 7 })
	up.mu.Lock()
	defer up.mu.Unlock()
	// 7 keys posted within the 200 ms debounce take 3 requests; a slow
	// machine may split them into a few more rounds, never into 7.
	if n := len(up.projectReqs); n < 3 || n > 5 {
		t.Errorf("%d project requests for 7 keys with batch_size 3 (debounced), want 3", n)
	}
	seen := map[string]bool{}
	for _, r := range up.projectReqs {
		if len(r.PublicKeys) > 3 {
			t.Errorf("batch of %d keys", len(r.PublicKeys))
		}
		if len(r.PublicKeys) == 0 {
			t.Error("empty project request")
		}
		for _, k := range r.PublicKeys {
			if seen[k] {
				t.Errorf("key %s requested twice", k)
			}
			seen[k] = true
		}
	}
}

func TestOutcomeBuckets(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	s := startStandin(t, baseConfig(up.srv.URL))
	waitFor(t, 5*time.Second, "ready", s.Ready)
	for range 3 {
		post(t, envURL(s, 42), singleItem("event", `{"message": broken`), authHeader(keyA))
	}
	post(t, envURL(s, 42), singleItem("transaction", `not json`), authHeader(keyA))
	// A client report becomes client_discard outcomes.
	post(t, envURL(s, 42), singleItem("client_report", `{"timestamp":1,"discarded_events":[{"reason":"queue_overflow","category":"error","quantity":5}]}`), authHeader(keyA))
	want := map[string]float64{
		"invalid/1/invalid_json":          3,
		"invalid/2/invalid_json":          1,
		"invalid/9/invalid_json":          1,
		"invalid/12/invalid_json":         1,
		"invalid/16/invalid_json":         1,
		"client_discard/1/queue_overflow": 5,
	}
	got := map[string]float64{}
	waitFor(t, 5*time.Second, "outcome buckets", func() bool {
		clear(got)
		for _, b := range up.outcomeBuckets() {
			if b.Type != "c" || !strings.HasPrefix(b.Name, "c:outcomes/") || !strings.HasSuffix(b.Name, "@none") {
				t.Fatalf("bucket %+v", b)
			}
			if b.Tags["source"] != "standin-test" {
				t.Fatalf("bucket source %+v", b)
			}
			if d := time.Since(time.Unix(b.Timestamp, 0)); d < 0 || d > time.Minute {
				t.Fatalf("bucket timestamp %d", b.Timestamp)
			}
			name := strings.TrimSuffix(strings.TrimPrefix(b.Name, "c:outcomes/"), "@none")
			got[name+"/"+b.Tags["category"]+"/"+b.Tags["reason"]] += b.Value
		}
		return len(got) == len(want)
	})
	for k, v := range want {
		if got[k] != v {
			t.Errorf("outcome %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["accepted/1/"]; ok {
		t.Error("a non-processing relay emitted accepted outcomes")
	}
	// Outcome envelopes go to the project's envelope endpoint, made by the relay.
	up.mu.Lock()
	for _, e := range up.envelopes {
		if e.env.Items[0].Type == "metric_buckets" {
			if e.path != "/api/42/envelope/" || len(e.env.Items) != 1 || !strings.Contains(e.header.Get("X-Sentry-Auth"), "sentry_key="+keyA) {
				t.Errorf("outcome envelope %s %v %s", e.path, e.itemTypes(), e.header.Get("X-Sentry-Auth"))
			}
		}
	}
	up.mu.Unlock()
	if len(up.received()) != 0 {
		t.Errorf("invalid items or client report were forwarded: %d", len(up.received()))
	}
}

func TestUpstream429RateLimits(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.envelopeHook = func(n int, e *receivedEnvelope) (int, http.Header) {
		if e.env.Items[0].Type == "event" {
			return 429, http.Header{"X-Sentry-Rate-Limits": {"60:error;transaction:project:quota_x"}, "Retry-After": {"60"}}
		}
		return 0, nil
	}
	s := startStandin(t, baseConfig(up.srv.URL))
	waitFor(t, 5*time.Second, "ready", s.Ready)
	if status, _, _ := post(t, envURL(s, 42), singleItem("event", `{}`), authHeader(keyA)); status != 200 {
		t.Fatal(status)
	}
	waitFor(t, 5*time.Second, "429 seen", func() bool { return s.Stats().ForwardRateLimited == 1 })
	status, hdr, body := post(t, envURL(s, 42), singleItem("event", `{}`), authHeader(keyA))
	if status != 429 {
		t.Fatalf("ingest after upstream 429: %d %v", status, body)
	}
	if ra := hdr.Get("Retry-After"); ra != "60" && ra != "59" {
		t.Errorf("Retry-After %q", ra)
	}
	if rl := hdr.Get("X-Sentry-Rate-Limits"); !strings.HasSuffix(rl, ":error;transaction:project:quota_x") {
		t.Errorf("X-Sentry-Rate-Limits %q", rl)
	}
	// Other categories still pass: a check-in is accepted.
	if status, _, _ := post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA)); status != 200 {
		t.Errorf("check-in while errors are limited: %d", status)
	}
	waitFor(t, 5*time.Second, "rate_limited outcome", func() bool {
		for _, b := range up.outcomeBuckets() {
			if b.Name == "c:outcomes/rate_limited@none" && b.Tags["category"] == "1" && b.Tags["reason"] == "quota_x" && b.Value == 1 {
				return true
			}
		}
		return false
	})
	// A 429 with only Retry-After limits the key, all categories, reason generic.
	ls := parseRateLimits("", "10", time.Now())
	if len(ls) != 1 || ls[0].scope != "key" || ls[0].reason != "generic" || len(ls[0].categories) != 0 {
		t.Errorf("Retry-After only: %+v", ls)
	}
}

func TestRetriesOnNetworkStatuses(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.envelopeHook = func(n int, _ *receivedEnvelope) (int, http.Header) {
		switch n {
		case 1:
			return 503, nil
		case 2:
			return 502, nil
		case 3:
			return 504, nil
		}
		return 0, nil
	}
	s := startStandin(t, baseConfig(up.srv.URL))
	waitFor(t, 5*time.Second, "ready", s.Ready)
	post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA))
	waitFor(t, 5*time.Second, "delivered after retries", func() bool { return len(up.received()) == 1 && s.Stats().Forwarded == 1 })
	if st := s.Stats(); st.ForwardRetries != 3 || st.Forwarded < 1 {
		t.Errorf("stats %+v", st)
	}
	// A 500 is taken as received: dropped, not retried.
	up.mu.Lock()
	up.envelopeHook = func(int, *receivedEnvelope) (int, http.Header) { return 500, nil }
	up.mu.Unlock()
	post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA))
	waitFor(t, 5*time.Second, "dropped on 500", func() bool { return s.Stats().ForwardRejected == 1 })
	time.Sleep(200 * time.Millisecond)
	if st := s.Stats(); st.ForwardRetries != 3 {
		t.Errorf("500 was retried: %+v", st)
	}
}

func TestBufferFullAnswers503(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.globalStatus = func(int) string { return "pending" }
	s := startStandin(t, baseConfig(up.srv.URL)+"standin:\n  max_buffered_envelopes: 2\nlimits:\n  shutdown_timeout: 0.3\n")
	waitFor(t, 5*time.Second, "ready", s.Ready)
	for i := range 2 {
		if status, _, _ := post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA)); status != 200 {
			t.Fatalf("envelope %d: %d", i, status)
		}
	}
	status, _, body := post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA))
	if status != 503 || body["detail"] != "failed to queue envelope" {
		t.Errorf("third envelope: %d %v", status, body)
	}
	if s.Ready() {
		t.Error("ready with a full envelope buffer")
	}
}

func TestProjectIDMismatchOutcome(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	s := startStandin(t, baseConfig(up.srv.URL))
	waitFor(t, 5*time.Second, "ready", s.Ready)
	// The config is unknown at ingest: accepted, then dropped as invalid/project_id.
	if status, _, _ := post(t, envURL(s, 43), singleItem("event", `{}`), authHeader(keyA)); status != 200 {
		t.Fatal(status)
	}
	waitFor(t, 5*time.Second, "project_id outcome", func() bool {
		for _, b := range up.outcomeBuckets() {
			if b.Name == "c:outcomes/invalid@none" && b.Tags["reason"] == "project_id" && b.Tags["category"] == "1" {
				return true
			}
		}
		return false
	})
	if len(up.received()) != 0 {
		t.Error("forwarded an envelope for the wrong project id")
	}
}

func TestLogsNeedFeature(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r", "organizations:other")
	s := startStandin(t, baseConfig(up.srv.URL))
	waitFor(t, 5*time.Second, "ready", s.Ready)
	post(t, envURL(s, 42), mixedEnvelope(""), authHeader(keyA))
	waitFor(t, 5*time.Second, "3 groups", func() bool { return len(up.received()) == 3 })
	time.Sleep(100 * time.Millisecond)
	for _, e := range up.received() {
		if slices.Contains(e.itemTypes(), "log") {
			t.Error("log forwarded without organizations:ourlogs-ingestion")
		}
	}
	if s.Stats().ItemsDropped != 1 {
		t.Errorf("stats %+v", s.Stats())
	}
}

func TestForwardWaitsForRegistration(t *testing.T) {
	// Registration keeps failing at first; envelopes must not be forwarded
	// (nor configs fetched) until it succeeds.
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.challengeHook = func(n int) (int, string) {
		if n <= 2 {
			return 429, `{}`
		}
		return 0, ""
	}
	s := startStandin(t, baseConfig(up.srv.URL))
	if status, _, _ := post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA)); status != 200 {
		t.Fatal(status)
	}
	up.mu.Lock()
	early := len(up.projectReqs) + up.globalReqs
	up.mu.Unlock()
	if early != 0 {
		t.Errorf("%d config requests before registration", early)
	}
	waitFor(t, 10*time.Second, "forwarded after registration", func() bool { return len(up.received()) == 1 })
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.challenges != 3 {
		t.Errorf("%d challenges", up.challenges)
	}
}

func TestSignatureCheckedWithRelayKey(t *testing.T) {
	// Sanity check of the harness itself: a forged signature must fail.
	creds, _ := relayauth.GenerateCredentials(nil)
	other, _ := relayauth.GenerateCredentials(nil)
	sk, _, _ := other.Keys()
	_, pub, _ := creds.Keys()
	if pub.Verify(nil, sk.Sign(nil, time.Now()), time.Minute, time.Now()) == nil {
		t.Fatal("signature by another key verified")
	}
}

func TestOutageMode(t *testing.T) {
	up := newTestUpstream(t)
	up.project(keyA, 42, 7, "r")
	up.liveStatus = func() int {
		if up.down { // called with up.mu held
			return 503
		}
		return 404 // any non-network answer ends the outage
	}
	cfg := strings.Replace(baseConfig(up.srv.URL), "http:\n", "http:\n  outage_grace_period: 0.3\n", 1)
	cfg = strings.Replace(cfg, "logging:", "limits:\n  shutdown_timeout: 0.2\nlogging:", 1)
	s := startStandin(t, cfg)
	waitFor(t, 5*time.Second, "ready", s.Ready)
	post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA))
	waitFor(t, 5*time.Second, "project config", func() bool { st, _ := s.projects.status(keyA); return st == projectEnabled })
	up.mu.Lock()
	up.down = true
	up.mu.Unlock()
	post(t, envURL(s, 42), singleItem("check_in", `{}`), authHeader(keyA))
	waitFor(t, 5*time.Second, "outage mode", func() bool { return s.Stats().Outages == 1 })
	// In outage mode upstream traffic (retries, global config polls) stops;
	// only live checks go on, with a 1 s backoff.
	time.Sleep(100 * time.Millisecond)
	up.mu.Lock()
	g := up.globalReqs
	up.mu.Unlock()
	waitFor(t, 5*time.Second, "a live check", func() bool { up.mu.Lock(); defer up.mu.Unlock(); return up.liveChecks >= 1 })
	up.mu.Lock()
	if up.globalReqs > g+1 {
		t.Errorf("global config polls went on in outage mode: %d → %d", g, up.globalReqs)
	}
	up.down = false
	up.mu.Unlock()
	waitFor(t, 10*time.Second, "delivered after the outage", func() bool { return len(up.received()) == 2 })
	if st := s.Stats(); st.Outages != 1 || st.LiveChecks < 2 {
		t.Errorf("stats %+v", st)
	}
}
