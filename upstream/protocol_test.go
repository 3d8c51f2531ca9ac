package upstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/relayauth"
)

func TestRegistration(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	f.register(r)
	st := f.srv.Stats()
	if st.Registrations.Challenges != 1 || st.Registrations.Responses != 1 || len(st.Registrations.Failures) != 0 {
		t.Fatalf("registrations = %+v", st.Registrations)
	}
	// Registered: a signed config request is accepted.
	resp := f.signed(r, "/api/0/relays/projectconfigs/?version=3", `{"global":true,"publicKeys":[]}`)
	wantStatus(t, resp, 200, "")
}

func TestRegistrationRejects(t *testing.T) {
	r := newRelay(t)
	other := newRelay(t)
	challenge := func(id, pub string) string {
		return `{"relay_id":"` + id + `","public_key":"` + pub + `","version":"26.6.0"}`
	}
	tests := []struct {
		name   string
		mod    func(*Config)
		hdr    func(f *fixture, body string) map[string]string
		body   string
		status int
		detail string
		reason string
		stop   bool
	}{
		{
			name: "forged signature", body: challenge(r.id, r.pub.String()),
			hdr: func(f *fixture, body string) map[string]string {
				return map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": other.sk.Sign([]byte(body), f.clock.Now())}
			},
			status: 401, detail: "invalid relay signature", reason: "bad_signature",
		},
		{
			name: "stale signature", body: challenge(r.id, r.pub.String()),
			hdr: func(f *fixture, body string) map[string]string {
				return map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": r.sk.Sign([]byte(body), f.clock.Now().Add(-61*time.Second))}
			},
			status: 401, detail: "relay signature expired", reason: "expired_signature",
		},
		{
			name: "missing signature", body: challenge(r.id, r.pub.String()),
			hdr: func(f *fixture, body string) map[string]string {
				return map[string]string{"X-Sentry-Relay-Id": r.id}
			},
			status: 401, detail: "missing X-Sentry-Relay-Signature", reason: "missing_signature",
		},
		{
			name: "signature over other data", body: challenge(r.id, r.pub.String()),
			hdr: func(f *fixture, body string) map[string]string {
				return map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": r.sk.Sign([]byte(body+" "), f.clock.Now())}
			},
			status: 401, detail: "invalid relay signature", reason: "bad_signature",
		},
		{
			name: "relay id mismatch", body: challenge(r.id, r.pub.String()),
			hdr: func(f *fixture, body string) map[string]string {
				return map[string]string{"X-Sentry-Relay-Id": other.id, "X-Sentry-Relay-Signature": r.sk.Sign([]byte(body), f.clock.Now())}
			},
			status: 400, detail: "does not match", reason: "relay_id_mismatch",
		},
		{
			name: "bad json", body: `{"relay_id":`,
			hdr: func(f *fixture, body string) map[string]string {
				return map[string]string{"X-Sentry-Relay-Id": r.id}
			},
			status: 400, detail: "invalid JSON", reason: "bad_json",
		},
		{
			name: "bad key", body: challenge(r.id, "not-a-key"),
			hdr: func(f *fixture, body string) map[string]string {
				return map[string]string{"X-Sentry-Relay-Id": r.id}
			},
			status: 400, detail: "invalid public_key", reason: "bad_public_key",
		},
		{
			name: "not in allow-list", body: challenge(r.id, r.pub.String()),
			mod: func(c *Config) {
				c.AllowList = true
				c.Relays = map[string]relayauth.PublicKey{other.id: other.pub}
			},
			hdr: func(f *fixture, body string) map[string]string {
				return map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": r.sk.Sign([]byte(body), f.clock.Now())}
			},
			status: 403, detail: "not allowed", reason: "unknown_relay",
		},
		{
			name: "deny relays", body: challenge(r.id, r.pub.String()),
			mod: func(c *Config) { c.DenyRelays = true },
			hdr: func(f *fixture, body string) map[string]string {
				return map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": r.sk.Sign([]byte(body), f.clock.Now())}
			},
			status: 403, detail: "denied", reason: "relay_denied", stop: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mod)
			resp := f.do("POST", "/api/0/relays/register/challenge/", []byte(tc.body), tc.hdr(f, tc.body))
			wantStatus(t, resp, tc.status, tc.detail)
			stop, _ := resp.json(t)["relay"].(string)
			if (stop == "stop") != tc.stop {
				t.Errorf("relay=%q, want stop=%v", stop, tc.stop)
			}
			st := f.srv.Stats()
			if st.Errors[tc.reason] != 1 || st.Registrations.Failures[tc.reason] != 1 {
				t.Errorf("errors %v failures %v, want one %s", st.Errors, st.Registrations.Failures, tc.reason)
			}
		})
	}
}

func TestRegistrationResponseRejects(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	body := `{"relay_id":"` + r.id + `","public_key":"` + r.pub.String() + `","version":"26.6.0"}`
	resp := f.signed(r, "/api/0/relays/register/challenge/", body)
	wantStatus(t, resp, 200, "")
	token := resp.json(t)["token"].(string)
	respBody := func(tok string) string {
		return `{"relay_id":"` + r.id + `","token":"` + tok + `","version":"26.6.0"}`
	}
	// Tampered token.
	bad := token[:len(token)-2] + "AA"
	if bad == token {
		bad = token[:len(token)-2] + "BB"
	}
	wantStatus(t, f.signed(r, "/api/0/relays/register/response/", respBody(bad)), 400, "invalid registration token")
	// Signed by another key than the one in the token.
	other := newRelay(t)
	b := respBody(token)
	resp = f.do("POST", "/api/0/relays/register/response/", []byte(b), map[string]string{
		"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": other.sk.Sign([]byte(b), f.clock.Now()),
	})
	wantStatus(t, resp, 401, "invalid relay signature")
	// Not registered after failures: configs are refused.
	wantStatus(t, f.signed(r, "/api/0/relays/projectconfigs/?version=3", `{"global":true}`), 403, "relay not registered")
	// Expired token.
	f.clock.Add(61 * time.Second)
	wantStatus(t, f.signed(r, "/api/0/relays/register/response/", respBody(token)), 400, "invalid registration token")
	if got := f.srv.Stats().Errors["expired_token"]; got != 1 {
		t.Errorf("expired_token = %d", got)
	}
}

func TestRegistrationVectorsWithoutAgeCheck(t *testing.T) {
	// relay-auth's registration vectors (testdata of package relayauth;
	// docs/protocol.md, Signatures): Relay's own request signature must verify.
	f := newFixture(t, func(c *Config) { c.RegistrationMaxAge = -1 })
	const (
		id   = "29308cac-9783-40e9-98ac-b5503dffe3a4"
		body = `{"relay_id":"29308cac-9783-40e9-98ac-b5503dffe3a4","public_key":"dXq9IiKDLgma0J8dLVITOdkpaU8mPZPJj18t4HCKTfs","version":"20.8.0"}`
		sig  = "VgFn-7B5JmbSPiM5bikxkn7DjImV8LkfW3UVQcXnK8nLumvLaS7ML0KTY7a7LlU_3grGtSNZlEUbBudOp__RDA.eyJ0IjoiMjAyMC0wOS0wOFQxMzozMzozNS45OTM5MDRaIn0"
	)
	resp := f.do("POST", "/api/0/relays/register/challenge/", []byte(body), map[string]string{"X-Sentry-Relay-Id": id, "X-Sentry-Relay-Signature": sig})
	wantStatus(t, resp, 200, "")
	if got := resp.json(t)["relay_id"]; got != id {
		t.Errorf("relay_id = %v", got)
	}
}

func TestSignedQueriesAfterRegistration(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	f.register(r)
	path := "/api/0/relays/projectconfigs/?version=3"
	body := `{"global":true,"publicKeys":[]}`
	tests := []struct {
		name   string
		hdr    map[string]string
		status int
		reason string
	}{
		{"missing relay id", map[string]string{}, 401, "missing_relay_id"},
		{"unknown relay", map[string]string{"X-Sentry-Relay-Id": newRelay(t).id}, 403, "unknown_relay"},
		{"missing signature", map[string]string{"X-Sentry-Relay-Id": r.id}, 401, "missing_signature"},
		{"forged", map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": newRelay(t).sk.Sign([]byte(body), f.clock.Now())}, 401, "bad_signature"},
		{"stale", map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": r.sk.Sign([]byte(body), f.clock.Now().Add(-301*time.Second))}, 401, "expired_signature"},
		{"no header part", map[string]string{"X-Sentry-Relay-Id": r.id, "X-Sentry-Relay-Signature": "abc"}, 401, "malformed_signature"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.srv.Stats().Errors[tc.reason]
			resp := f.do("POST", path, []byte(body), tc.hdr)
			wantStatus(t, resp, tc.status, "")
			if got := f.srv.Stats().Errors[tc.reason]; got != before+1 {
				t.Errorf("errors[%s] = %d, want %d", tc.reason, got, before+1)
			}
		})
	}
}

func TestVerifySignaturesOff(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.VerifySignatures = false })
	r := newRelay(t)
	body := `{"relay_id":"` + r.id + `","public_key":"` + r.pub.String() + `","version":"26.6.0"}`
	resp := f.do("POST", "/api/0/relays/register/challenge/", []byte(body), map[string]string{"X-Sentry-Relay-Id": r.id})
	wantStatus(t, resp, 200, "")
	tok := resp.json(t)["token"].(string)
	body = `{"relay_id":"` + r.id + `","token":"` + tok + `","version":"26.6.0"}`
	wantStatus(t, f.do("POST", "/api/0/relays/register/response/", []byte(body), map[string]string{"X-Sentry-Relay-Id": r.id}), 200, "")
	wantStatus(t, f.do("POST", "/api/0/relays/projectconfigs/?version=3", []byte(`{"global":true}`), map[string]string{"X-Sentry-Relay-Id": r.id}), 200, "")
	if got := f.srv.Stats().Signatures.NotChecked; got != 3 {
		t.Errorf("not_checked = %d, want 3", got)
	}
}

type configsAnswer struct {
	Configs      map[string]json.RawMessage `json:"configs"`
	Pending      []string                   `json:"pending"`
	Unchanged    []string                   `json:"unchanged"`
	Global       map[string]any             `json:"global"`
	GlobalStatus string                     `json:"globalStatus"`
}

func (f *fixture) configs(r *testRelay, body string) configsAnswer {
	f.t.Helper()
	resp := f.signed(r, "/api/0/relays/projectconfigs/?version=3", body)
	wantStatus(f.t, resp, 200, "")
	var a configsAnswer
	if err := json.Unmarshal(resp.body, &a); err != nil {
		f.t.Fatal(err)
	}
	return a
}

func TestProjectConfigs(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		q := json.RawMessage(`{"id":"relayload-quota-0","scope":"project","limit":0,"reasonCode":"testing","categories":["error"]}`)
		c.Quotas = append(c.Quotas, q)
		c.InboundFilters = true
	})
	r := newRelay(t)
	f.srv.RegisterRelay(r.id, r.pub) // pre-registered: no challenge needed

	g := f.configs(r, `{"global":true,"publicKeys":[]}`)
	if g.GlobalStatus != "ready" || g.Global["measurements"] == nil || g.Global["options"] == nil {
		t.Fatalf("global answer = %+v", g)
	}

	p0, p1 := f.ps[0], f.ps[1]
	const unknown = "00000000000000000000000000000000"
	a := f.configs(r, fmt.Sprintf(`{"publicKeys":["%s","%s","%s"],"revisions":[null,null,null],"fullConfig":false,"noCache":false}`, p0.PublicKey, unknown, p1.PublicKey))
	if len(a.Configs) != 2 || a.Global != nil {
		t.Fatalf("configs for %d keys, global %v", len(a.Configs), a.Global)
	}
	if _, ok := a.Configs[unknown]; ok {
		t.Error("unknown key answered")
	}
	var st ProjectState
	if err := json.Unmarshal(a.Configs[p0.PublicKey], &st); err != nil {
		t.Fatal(err)
	}
	if st.ProjectID != p0.ID || st.OrganizationID != p0.OrgID || st.Disabled || len(st.PublicKeys) != 1 ||
		st.PublicKeys[0].PublicKey != p0.PublicKey || st.PublicKeys[0].NumericID != p0.KeyID || st.Rev == "" {
		t.Fatalf("state = %+v", st)
	}
	ds := st.Config.DatascrubbingSettings
	if !ds.ScrubData || !ds.ScrubDefaults || ds.ScrubIPAddresses || ds.SensitiveFields == nil || ds.ExcludeFields == nil {
		t.Errorf("datascrubbingSettings = %+v", ds)
	}
	if !strings.Contains(string(a.Configs[p0.PublicKey]), `"organizations:ourlogs-ingestion"`) {
		t.Error("logs feature missing")
	}
	if len(st.Config.Quotas) != 1 || !strings.Contains(string(st.Config.Quotas[0]), `"reasonCode":"testing"`) {
		t.Errorf("quotas = %s", st.Config.Quotas)
	}
	if st.Config.FilterSettings["webCrawlers"] == nil || st.Config.FilterSettings["localhost"] == nil {
		t.Errorf("filterSettings = %v", st.Config.FilterSettings)
	}

	// Revisions: the current rev → unchanged; a stale one → config.
	a = f.configs(r, fmt.Sprintf(`{"publicKeys":["%s","%s"],"revisions":["%s","old"]}`, p0.PublicKey, p1.PublicKey, st.Rev))
	if len(a.Unchanged) != 1 || a.Unchanged[0] != p0.PublicKey || len(a.Configs) != 1 || a.Configs[p1.PublicKey] == nil {
		t.Fatalf("revision answer = %+v", a)
	}
	cs := f.srv.Stats().ConfigRequests
	want := ConfigRequests{Global: 1, Project: 2, KeysServed: 3, Unchanged: 1, Unknown: 1}
	if cs != want {
		t.Errorf("config stats = %+v, want %+v", cs, want)
	}

	// Bad requests.
	keys := make([]string, MaxKeysPerRequest+1)
	for i := range keys {
		keys[i] = `"` + unknown + `"`
	}
	wantStatus(t, f.signed(r, "/api/0/relays/projectconfigs/?version=3", `{"publicKeys":[`+strings.Join(keys, ",")+`]}`), 400, "too many public keys")
	wantStatus(t, f.signed(r, "/api/0/relays/projectconfigs/?version=9", `{"publicKeys":[]}`), 400, "unsupported projectconfigs version")
	wantStatus(t, f.signed(r, "/api/0/relays/projectconfigs/?version=3", `{"publicKeys":"x"}`), 400, "invalid JSON")
}

func TestProjectConfigsDefaultsHaveNoQuotasOrFilters(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	f.srv.RegisterRelay(r.id, r.pub)
	a := f.configs(r, `{"publicKeys":["`+f.ps[3].PublicKey+`"]}`)
	raw := string(a.Configs[f.ps[3].PublicKey])
	if strings.Contains(raw, "quotas") || strings.Contains(raw, "filterSettings") {
		t.Errorf("default config has quotas or filters: %s", raw)
	}
}

func TestPendingFor(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 25 * time.Second, 26 * time.Second} {
		if _, err := newServer(Config{Projects: newFixture(t, nil).ps, PendingFor: d}); err == nil {
			t.Fatalf("pending-for %s accepted", d)
		}
	}
	f := newFixture(t, func(c *Config) { c.PendingFor = 5 * time.Second })
	r := newRelay(t)
	f.srv.RegisterRelay(r.id, r.pub)
	key := f.ps[2].PublicKey
	body := `{"publicKeys":["` + key + `"]}`
	if a := f.configs(r, body); len(a.Pending) != 1 || a.Pending[0] != key || len(a.Configs) != 0 {
		t.Fatalf("first answer %+v, want pending", a)
	}
	f.clock.Add(4 * time.Second)
	if a := f.configs(r, body); len(a.Pending) != 1 {
		t.Fatalf("answer after 4s %+v, want pending", a)
	}
	f.clock.Add(time.Second)
	if a := f.configs(r, body); len(a.Pending) != 0 || a.Configs[key] == nil {
		t.Fatalf("answer after 5s %+v, want config", a)
	}
	if cs := f.srv.Stats().ConfigRequests; cs.Pending != 2 || cs.KeysServed != 1 {
		t.Errorf("stats %+v", cs)
	}
}

func TestPublicKeysAndLive(t *testing.T) {
	f := newFixture(t, nil)
	r := newRelay(t)
	f.register(r)
	unknown := newRelay(t).id
	resp := f.signed(r, "/api/0/relays/publickeys/", `{"relay_ids":["`+r.id+`","`+unknown+`"]}`)
	wantStatus(t, resp, 200, "")
	var a struct {
		Relays     map[string]*publicKeyInfo `json:"relays"`
		PublicKeys map[string]*string        `json:"public_keys"`
	}
	if err := json.Unmarshal(resp.body, &a); err != nil {
		t.Fatal(err)
	}
	if a.Relays[r.id] == nil || a.Relays[r.id].PublicKey != r.pub.String() || a.Relays[unknown] != nil || *a.PublicKeys[r.id] != r.pub.String() {
		t.Errorf("publickeys answer %s", resp.body)
	}
	live := f.do("GET", "/api/0/relays/live/", nil, nil)
	wantStatus(t, live, 200, "")
	if live.json(t)["is_healthy"] != true {
		t.Errorf("live = %s", live.body)
	}
}

// TestRegisteredRelaysBounded: self-registration stops at MaxRegisteredRelays
// (each relay is remembered), answered 403 JSON and counted; relays
// already registered may register again.
func TestRegisteredRelaysBounded(t *testing.T) {
	f := newFixture(t, nil)
	relays := make([]*testRelay, MaxRegisteredRelays)
	for i := range relays {
		relays[i] = newRelay(t)
		f.register(relays[i])
	}
	extra := newRelay(t)
	body := `{"relay_id":"` + extra.id + `","public_key":"` + extra.pub.String() + `","version":"26.6.0"}`
	wantStatus(t, f.signed(extra, "/api/0/relays/register/challenge/", body), 403, "too many relays")
	f.register(relays[0])
	pre := newRelay(t)
	f.srv.RegisterRelay(pre.id, pre.pub) // pre-registered relays do not count
	wantStatus(t, f.signed(pre, "/api/0/relays/projectconfigs/?version=3", `{"global":true}`), 200, "")
	if st := f.srv.Stats().Registrations; st.Failures["too_many_relays"] != 1 || st.Responses != MaxRegisteredRelays+1 {
		t.Errorf("registrations %+v", st)
	}
}
