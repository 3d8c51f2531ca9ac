package relayauth

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

const (
	testSeed    = "OvXFVm1tIUi8xDTuyHX1SSqdMc8nCt2qU9IUaH5p7oU"
	testKeypair = "OvXFVm1tIUi8xDTuyHX1SSqdMc8nCt2qU9IUaH5p7oUk5pHZsdnfXNiMWiMLtSE86J3N9Peo5CBP1YQHDUkApQ"
	testPublic  = "JOaR2bHZ31zYjFojC7UhPOidzfT3qOQgT9WEBw1JAKU"
)

func mustSecret(t testing.TB, s string) SecretKey {
	t.Helper()
	sk, err := ParseSecretKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return sk
}

// counterReader yields 0, 1, 2, ... (mod 256): a deterministic byte source.
type counterReader struct{ n byte }

func (r *counterReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.n
		r.n++
	}
	return len(p), nil
}

func TestParseSecretKeyRejects(t *testing.T) {
	// A keypair whose public half belongs to a different seed.
	other, _ := GenerateKey(&counterReader{})
	mismatch := base64.RawURLEncoding.EncodeToString(append(mustSecret(t, testSeed).priv.Seed(), other.Public().pub...))
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"padded seed", base64.URLEncoding.EncodeToString(mustSecret(t, testSeed).priv.Seed())},
		{"std alphabet keypair", testKeypair[:10] + "+" + testKeypair[11:]},
		{"std alphabet seed", "+/" + testSeed[2:]},
		{"42 chars", testSeed[:42]},
		{"44 chars", testSeed + "A"},
		{"85 chars", testKeypair[:85]},
		{"87 chars", testKeypair + "A"},
		{"non-canonical trailing bits", testSeed[:42] + "V"},
		{"line break", testSeed[:20] + "\n" + testSeed[21:]},
		{"keypair half mismatch", mismatch},
		{"public key length 32 bytes as keypair prefix", testPublic + testPublic},
		{"not base64", "bad data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseSecretKey(tc.in); !isErr(err, ErrMalformed) {
				t.Fatalf("ParseSecretKey(%q) = %v, want ErrMalformed", tc.in, err)
			}
		})
	}
}

func TestParsePublicKeyRejects(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"padded", testPublic + "="},
		{"std alphabet", "+/" + testPublic[2:]},
		{"42 chars", testPublic[:42]},
		{"44 chars", testPublic + "A"},
		{"non-canonical trailing bits", testPublic[:42] + "V"},
		{"CR inside", testPublic[:10] + "\r" + testPublic[11:]},
		{"seed-length keypair", testKeypair},
		// y = 2 and y = 7 have no x on edwards25519 (checked independently
		// with Python big ints and in the interop suite against sentry_relay).
		{"off curve y=2", "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		{"off curve y=7", "BwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParsePublicKey(tc.in); !isErr(err, ErrMalformed) {
				t.Fatalf("ParsePublicKey(%q) = %v, want ErrMalformed", tc.in, err)
			}
		})
	}
	// On-curve points that are not anyone's key still parse (as in Relay).
	for _, s := range []string{"AwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		if _, err := ParsePublicKey(s); err != nil {
			t.Errorf("ParsePublicKey(%s): %v", s, err)
		}
	}
}

func TestGenerateKey(t *testing.T) {
	a, err := GenerateKey(&counterReader{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := GenerateKey(&counterReader{})
	if a.String() != b.String() {
		t.Error("same reader, different keys")
	}
	seed := make([]byte, 32)
	(&counterReader{}).Read(seed)
	if want := base64.RawURLEncoding.EncodeToString(seed); a.String() != want {
		t.Errorf("key seed = %s, want the reader's 32 bytes %s", a.String(), want)
	}
	c, err := GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.String() == a.String() || len(c.String()) != 43 || len(c.Public().String()) != 43 {
		t.Errorf("crypto/rand key %s / %s", c, c.Public())
	}
	if _, err := GenerateKey(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Error("short reader: no error")
	}
	back, err := ParseSecretKey(c.String())
	if err != nil || !back.Public().Equal(c.Public()) {
		t.Errorf("round trip: %v", err)
	}
}

func TestSignHeaderFormat(t *testing.T) {
	base := time.Date(2020, 9, 8, 13, 33, 35, 0, time.UTC)
	for _, tc := range []struct {
		ns   int
		want string
	}{
		{0, "2020-09-08T13:33:35Z"},
		{993_000_000, "2020-09-08T13:33:35.993Z"},
		{993_904_000, "2020-09-08T13:33:35.993904Z"},
		{1_000, "2020-09-08T13:33:35.000001Z"},
		{993_904_123, "2020-09-08T13:33:35.993904123Z"},
		{5, "2020-09-08T13:33:35.000000005Z"},
		{100_000_000, "2020-09-08T13:33:35.100Z"},
	} {
		ts := base.Add(time.Duration(tc.ns)).In(time.FixedZone("X", 3*3600+1800))
		sig := mustSecret(t, testSeed).Sign([]byte("x"), ts)
		_, hdr, _ := strings.Cut(sig, ".")
		got, _ := base64.RawURLEncoding.DecodeString(hdr)
		if want := `{"t":"` + tc.want + `"}`; string(got) != want {
			t.Errorf("ns=%d: header %s, want %s", tc.ns, got, want)
		}
	}
}

func TestVerifyRejects(t *testing.T) {
	sk := mustSecret(t, testSeed)
	pk := sk.Public()
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	data := []byte(`{"relay_id":"29308cac-9783-40e9-98ac-b5503dffe3a4"}`)
	good := sk.Sign(data, now)
	sigPart, hdrPart, _ := strings.Cut(good, ".")
	otherHdr := base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-07-01T12:00:01Z"}`))
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	otherKey, _ := GenerateKey(&counterReader{})
	for _, tc := range []struct {
		name string
		key  PublicKey
		data []byte
		sig  string
		want error
	}{
		{"appended data byte", pk, append(bytes.Clone(data), ' '), good, ErrBadSignature},
		{"changed data byte", pk, bytes.Replace(data, []byte("9"), []byte("8"), 1), good, ErrBadSignature},
		{"empty data", pk, nil, good, ErrBadSignature},
		{"flipped signature char", pk, data, flip(sigPart, 10) + "." + hdrPart, ErrBadSignature},
		{"swapped header", pk, data, sigPart + "." + otherHdr, ErrBadSignature},
		{"wrong key", otherKey.Public(), data, good, ErrBadSignature},
		{"no header part", pk, data, sigPart, ErrMalformed},
		{"empty", pk, data, "", ErrMalformed},
		{"only dot", pk, data, ".", ErrMalformed},
		{"short signature", pk, data, sigPart[:84] + "." + hdrPart, ErrMalformed},
		{"padded signature", pk, data, sigPart + "==." + hdrPart, ErrMalformed},
		{"padded header", pk, data, sigPart + "." + hdrPart + "=", ErrMalformed},
		{"std alphabet", pk, data, strings.NewReplacer("-", "+", "_", "/").Replace(sigPart) + "." + hdrPart, ErrMalformed},
		{"extra dot", pk, data, good + ".", ErrMalformed},
		{"zero key", PublicKey{}, data, good, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sig == good && tc.key.Equal(pk) && bytes.Equal(tc.data, data) {
				t.Fatal("test case is not tampered")
			}
			if err := tc.key.Verify(tc.data, tc.sig, 0, now); !isErr(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	if err := pk.Verify(data, good, 5*time.Minute, now); err != nil {
		t.Fatalf("untampered: %v", err)
	}
}

func TestVerifyHeaderContent(t *testing.T) {
	sk := mustSecret(t, testSeed)
	pk := sk.Public()
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	data := []byte("body")
	for _, tc := range []struct {
		name, header string
		maxAge       time.Duration
		want         error // nil = verifies
	}{
		// current relay-auth and sentry_relay 0.10.1 require "t"
		{"no t", `{}`, 0, ErrMalformed},
		{"null t", `{"t":null}`, 0, ErrMalformed},
		{"key match is case sensitive", `{"T":"2026-07-01T12:00:00Z"}`, 0, ErrMalformed},
		{"unknown fields ignored", `{"t":"2026-07-01T11:59:59Z","x":1}`, time.Minute, nil},
		{"explicit v0", `{"t":"2026-07-01T11:59:59Z","a":"v0"}`, time.Minute, nil},
		{"null a", `{"t":"2026-07-01T11:59:59Z","a":null}`, time.Minute, nil},
		{"unknown algorithm", `{"t":"2026-07-01T11:59:59Z","a":"v2"}`, 0, ErrMalformed},
		{"offset timestamp", `{"t":"2026-07-01T13:59:00+02:00"}`, 5 * time.Minute, nil},
		{"chrono: space separator", `{"t":"2026-07-01 11:59:00Z"}`, 5 * time.Minute, nil},
		{"chrono: lowercase t and z", `{"t":"2026-07-01t11:59:00z"}`, 5 * time.Minute, nil},
		{"no zone", `{"t":"2026-07-01T11:59:00"}`, 0, ErrMalformed},
		{"old t, age check off", `{"t":"2000-01-01T00:00:00Z"}`, 0, nil},
		{"old t", `{"t":"2000-01-01T00:00:00Z"}`, 5 * time.Minute, ErrExpired},
		{"exactly max age", `{"t":"2026-07-01T11:55:00Z"}`, 5 * time.Minute, nil},
		{"max age + 1ns", `{"t":"2026-07-01T11:54:59.999999999Z"}`, 5 * time.Minute, ErrExpired},
		{"future within skew", `{"t":"2026-07-01T12:00:15Z"}`, 5 * time.Minute, nil},
		{"future beyond skew", `{"t":"2026-07-01T12:00:15.000000001Z"}`, 5 * time.Minute, ErrExpired},
		{"future beyond skew, age check off", `{"t":"2030-01-01T00:00:00Z"}`, 0, ErrExpired},
		{"future within skew, age check off", `{"t":"2026-07-01T12:00:10Z"}`, 0, nil},
		{"not json", `not json`, 0, ErrMalformed},
		{"json null", `null`, 0, ErrMalformed},
		{"json array", `["2026-07-01T12:00:00Z"]`, 0, ErrMalformed},
		{"t is a number", `{"t":1599572015}`, 0, ErrMalformed},
		{"t not RFC 3339", `{"t":"yesterday"}`, 0, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig := sk.SignWithHeader(data, []byte(tc.header))
			err := pk.Verify(data, sig, tc.maxAge, now)
			if tc.want == nil && err != nil || tc.want != nil && !isErr(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestPrehashedSignature(t *testing.T) {
	sk := mustSecret(t, testSeed)
	pk := sk.Public()
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	data := []byte("large body, signed incrementally")
	v1 := []byte(`{"t":"2026-07-01T12:00:00Z","a":"v1"}`)
	sig := sk.SignWithHeader(data, v1)
	if err := pk.Verify(data, sig, time.Minute, now); err != nil {
		t.Fatalf("v1: %v", err)
	}
	// Independent check: Ed25519ph over SHA-512(header ‖ 0 ‖ data), empty context.
	sigPart, _, _ := strings.Cut(sig, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(sigPart)
	d := sha512.Sum512(append(append(bytes.Clone(v1), 0), data...))
	if err := ed25519.VerifyWithOptions(pk.pub, d[:], raw, &ed25519.Options{Hash: crypto.SHA512}); err != nil {
		t.Errorf("not Ed25519ph: %v", err)
	}
	// A regular signature relabelled v1, and a v1 signature relabelled v0, fail.
	regular := sk.SignWithHeader(data, []byte(`{"t":"2026-07-01T12:00:00Z","a":"v0"}`))
	rs, _, _ := strings.Cut(regular, ".")
	for name, forged := range map[string]string{
		"v0 sig, v1 header": rs + "." + base64.RawURLEncoding.EncodeToString(v1),
		"v1 sig, v0 header": sigPart + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-07-01T12:00:00Z","a":"v0"}`)),
		"v1 data changed":   sig,
	} {
		d := data
		if name == "v1 data changed" {
			d = append(bytes.Clone(data), '!')
		}
		if err := pk.Verify(d, forged, 0, now); !isErr(err, ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
}

func TestSignVerifyExpiry(t *testing.T) {
	sk, _ := GenerateKey(nil)
	now := time.Now()
	sig := sk.Sign(nil, now.Add(-10*time.Minute))
	if err := sk.Public().Verify(nil, sig, 5*time.Minute, now); !isErr(err, ErrExpired) {
		t.Fatalf("10 min old, max 5 min: %v", err)
	}
	if err := sk.Public().Verify(nil, sig, 15*time.Minute, now); err != nil {
		t.Fatalf("10 min old, max 15 min: %v", err)
	}
	if err := sk.Public().Verify(nil, sig, 0, now); err != nil {
		t.Fatalf("age check off: %v", err)
	}
}

// The three sentinels are distinct so callers can map them to responses.
func TestErrorsDistinct(t *testing.T) {
	errs := []error{ErrMalformed, ErrBadSignature, ErrExpired}
	for i, a := range errs {
		for j, b := range errs {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v is %v", a, b)
			}
		}
	}
}

var credentialsLayout = regexp.MustCompile(`^\{\n  "secret_key": "[A-Za-z0-9_-]{43}",\n  "public_key": "[A-Za-z0-9_-]{43}",\n  "id": "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"\n\}\n$`)

func TestCredentialsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "credentials.json")
	// A pre-existing world-readable file must end up 0600.
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := GenerateCredentials(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := uuid.Parse(c.ID)
	if err != nil || id.Version() != 4 || id.Variant() != uuid.RFC4122 || c.ID != strings.ToLower(c.ID) {
		t.Errorf("id %q: version %v variant %v err %v", c.ID, id.Version(), id.Variant(), err)
	}
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	if !credentialsLayout.Match(raw) {
		t.Errorf("layout:\n%s", raw)
	}
	want := "{\n  \"secret_key\": \"" + c.SecretKey + "\",\n  \"public_key\": \"" + c.PublicKey + "\",\n  \"id\": \"" + c.ID + "\"\n}\n"
	if string(raw) != want {
		t.Errorf("file:\n%s\nwant:\n%s", raw, want)
	}
	got, err := LoadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Errorf("loaded %+v, saved %+v", got, c)
	}
	sk, pk, err := got.Keys()
	if err != nil {
		t.Fatal(err)
	}
	if !sk.Public().Equal(pk) || pk.String() != c.PublicKey || sk.String() != c.SecretKey {
		t.Error("Keys() do not match the file")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

func TestGenerateCredentialsDeterministic(t *testing.T) {
	a, err := GenerateCredentials(&counterReader{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := GenerateCredentials(&counterReader{})
	if a != b {
		t.Errorf("%+v != %+v", a, b)
	}
	// Key from bytes 0..31, id from bytes 32..47 with version/variant bits set.
	if a.ID != "20212223-2425-4627-a829-2a2b2c2d2e2f" {
		t.Errorf("id = %s", a.ID)
	}
}

func TestLoadCredentialsRejects(t *testing.T) {
	other, _ := GenerateCredentials(&counterReader{})
	good := Credentials{SecretKey: testSeed, PublicKey: testPublic, ID: "29308cac-9783-40e9-98ac-b5503dffe3a4"}
	for _, tc := range []struct {
		name, content string
	}{
		{"not json", "secret_key=x"},
		{"empty object", "{}"},
		{"mismatched keys", mustJSON(t, Credentials{SecretKey: good.SecretKey, PublicKey: other.PublicKey, ID: good.ID})},
		{"bad public key", mustJSON(t, Credentials{SecretKey: good.SecretKey, PublicKey: good.PublicKey + "=", ID: good.ID})},
		{"bad secret key", mustJSON(t, Credentials{SecretKey: "x", PublicKey: good.PublicKey, ID: good.ID})},
		{"bad id", mustJSON(t, Credentials{SecretKey: good.SecretKey, PublicKey: good.PublicKey, ID: "relay-1"})},
		{"missing id", `{"secret_key":"` + testSeed + `","public_key":"` + testPublic + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "credentials.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadCredentials(path); !isErr(err, ErrMalformed) {
				t.Fatalf("LoadCredentials = %v, want ErrMalformed", err)
			}
		})
	}
	if _, err := LoadCredentials(filepath.Join(t.TempDir(), "missing.json")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// Relay also accepts the keypair form for secret_key.
	path := filepath.Join(t.TempDir(), "credentials.json")
	os.WriteFile(path, []byte(mustJSON(t, Credentials{SecretKey: testKeypair, PublicKey: testPublic, ID: good.ID})), 0o600)
	if _, err := LoadCredentials(path); err != nil {
		t.Errorf("keypair-form secret key: %v", err)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMintValidateToken(t *testing.T) {
	secret := []byte("upstream secret")
	pub := mustSecret(t, testSeed).Public()
	now := time.Unix(1_780_000_000, 250_000_000)
	const id = "29308cac-9783-40e9-98ac-b5503dffe3a4"
	tok, err := MintToken(secret, strings.ToUpper(id), pub, now, &counterReader{})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := MintToken(secret, id, pub, now, &counterReader{})
	if tok != again {
		t.Error("same inputs, different tokens")
	}
	state, mac, _ := strings.Cut(tok, ":")
	js, _ := base64.RawURLEncoding.DecodeString(state)
	nonce := make([]byte, 64)
	(&counterReader{}).Read(nonce)
	wantJS := `{"timestamp":1780000000,"relay_id":"` + id + `","public_key":"` + testPublic + `","rand":"` + base64.RawURLEncoding.EncodeToString(nonce) + `"}`
	if string(js) != wantJS {
		t.Errorf("state JSON\n got %s\nwant %s", js, wantJS)
	}
	if len(mac) != 86 {
		t.Errorf("mac is %d chars, want 86 (64 bytes)", len(mac))
	}

	st, err := ValidateToken(secret, tok, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	if st.RelayID != id || st.PublicKey != testPublic || st.Timestamp != 1_780_000_000 {
		t.Errorf("state %+v", st)
	}

	// relay-auth compares whole seconds: timestamp + max_age < now.Unix().
	if _, err := ValidateToken(secret, tok, time.Minute, time.Unix(1_780_000_060, 999_999_999)); err != nil {
		t.Errorf("at +60.999s with 60s max age: %v", err)
	}
	if _, err := ValidateToken(secret, tok, time.Minute, time.Unix(1_780_000_061, 0)); !isErr(err, ErrExpired) {
		t.Errorf("at +61s: %v, want ErrExpired", err)
	}
	// Minted in the future: up to 15 whole seconds of clock skew pass, even
	// with the age check off (sentry_relay 0.10.1 behaves the same).
	if _, err := ValidateToken(secret, tok, 0, time.Unix(1_780_000_000-15, 0)); err != nil {
		t.Errorf("minted 15s ahead: %v", err)
	}
	if _, err := ValidateToken(secret, tok, 0, time.Unix(1_780_000_000-16, 999_999_999)); !isErr(err, ErrExpired) {
		t.Errorf("minted 16s ahead: %v, want ErrExpired", err)
	}

	forged := func(stateJSON string) string {
		s := base64.RawURLEncoding.EncodeToString([]byte(stateJSON))
		return s + ":" + base64.RawURLEncoding.EncodeToString(tokenMAC(secret, s))
	}
	flipped := []byte(state)
	flipped[5] ^= 1
	for _, tc := range []struct {
		name, token string
		secret      []byte
		want        error
	}{
		{"wrong secret", tok, []byte("other"), ErrBadSignature},
		{"tampered state", string(flipped) + ":" + mac, secret, ErrBadSignature},
		{"tampered mac", state + ":" + mac[:80] + "AAAAAA", secret, ErrBadSignature},
		{"truncated mac", state + ":" + mac[:84], secret, ErrBadSignature},
		{"empty mac", state + ":", secret, ErrBadSignature},
		{"padded mac", tok + "==", secret, ErrMalformed},
		{"no colon", state, secret, ErrMalformed},
		{"empty", "", secret, ErrMalformed},
		{"signed junk state", forged("not json"), secret, ErrMalformed},
		{"signed state missing rand", forged(`{"timestamp":1,"relay_id":"` + id + `","public_key":"` + testPublic + `"}`), secret, ErrMalformed},
		{"signed state bad relay id", forged(`{"timestamp":1,"relay_id":"x","public_key":"` + testPublic + `","rand":""}`), secret, ErrMalformed},
		{"signed state bad key", forged(`{"timestamp":1,"relay_id":"` + id + `","public_key":"x","rand":""}`), secret, ErrMalformed},
		{"signed state string timestamp", forged(`{"timestamp":"1","relay_id":"` + id + `","public_key":"` + testPublic + `","rand":""}`), secret, ErrMalformed},
		{"signed state wrong-case key", forged(`{"Timestamp":1,"relay_id":"` + id + `","public_key":"` + testPublic + `","rand":""}`), secret, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ValidateToken(tc.secret, tc.token, 0, now); !isErr(err, tc.want) {
				t.Fatalf("ValidateToken = %v, want %v", err, tc.want)
			}
		})
	}

	if _, err := MintToken(secret, "not-a-uuid", pub, now, nil); !isErr(err, ErrMalformed) {
		t.Errorf("bad relay id: %v", err)
	}
	if _, err := MintToken(secret, id, PublicKey{}, now, nil); !isErr(err, ErrMalformed) {
		t.Errorf("zero public key: %v", err)
	}
	if _, err := MintToken(secret, id, pub, now, bytes.NewReader(make([]byte, 10))); err == nil {
		t.Error("short reader: no error")
	}
	a, _ := MintToken(secret, id, pub, now, nil)
	b, _ := MintToken(secret, id, pub, now, nil)
	if a == b {
		t.Error("crypto/rand tokens are equal")
	}
}

func FuzzVerify(f *testing.F) {
	v := loadVectors(f)
	f.Add([]byte(v.Registration.Request), v.Registration.RequestSig)
	f.Add([]byte(v.LegacyNoHeader.Data), v.LegacyNoHeader.Sig)
	for _, g := range v.GoSignatures {
		f.Add([]byte(g.Data), g.Sig)
	}
	f.Add([]byte("x"), "..")
	keys := []PublicKey{mustSecret(f, v.Keys.SecretSeed).Public()}
	relayKey, err := ParsePublicKey(v.Registration.RelayKey)
	if err != nil {
		f.Fatal(err)
	}
	keys = append(keys, relayKey)
	now := time.Now()
	f.Fuzz(func(t *testing.T, data []byte, sig string) {
		for _, pk := range keys {
			err := pk.Verify(data, sig, 0, now)
			if err == nil {
				// Ed25519 signatures are unique per (key, message) for Go's
				// verifier; an accepted input must be exactly a real signature.
				sigPart, hdrPart, _ := strings.Cut(sig, ".")
				raw, _ := base64.RawURLEncoding.DecodeString(sigPart)
				hdr, _ := base64.RawURLEncoding.DecodeString(hdrPart)
				msg := append(append(hdr, 0), data...)
				if !ed25519.Verify(pk.pub, msg, raw) {
					t.Fatalf("accepted a signature crypto/ed25519 rejects: %q", sig)
				}
				if !isVector(v, string(data), sig) {
					t.Fatalf("random input verified: data %q sig %q", data, sig)
				}
				continue
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("age check off but got %v", err)
			}
		}
	})
}

func isVector(v vectors, data, sig string) bool {
	if data == v.Registration.Request && sig == v.Registration.RequestSig {
		return true
	}
	for _, g := range v.GoSignatures {
		if data == g.Data && sig == g.Sig {
			return true
		}
	}
	return false
}

func FuzzParseSecretKey(f *testing.F) {
	for _, s := range []string{testSeed, testKeypair, testPublic, "", "bad data", testSeed + "="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sk, err := ParseSecretKey(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		raw, derr := base64.RawURLEncoding.Strict().DecodeString(s)
		if derr != nil {
			t.Fatalf("accepted %q that is not strict base64url: %v", s, derr)
		}
		switch len(s) {
		case 43:
			if sk.String() != s {
				t.Fatalf("String() = %s, parsed %s", sk, s)
			}
		case 86:
			if !bytes.Equal(sk.priv, raw) {
				t.Fatalf("keypair %q parsed to a different key", s)
			}
		default:
			t.Fatalf("accepted %d-char key", len(s))
		}
		back, err := ParseSecretKey(sk.String())
		if err != nil || !back.Public().Equal(sk.Public()) {
			t.Fatalf("round trip of %q: %v", s, err)
		}
	})
}

func FuzzParsePublicKey(f *testing.F) {
	for _, s := range []string{testPublic, "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "", testPublic + "="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pk, err := ParsePublicKey(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if pk.String() != s {
			t.Fatalf("String() = %s, parsed %s", pk, s)
		}
	})
}

func FuzzValidateToken(f *testing.F) {
	v := loadVectors(f)
	secret := []byte(v.Registration.Secret)
	f.Add(v.Registration.Token)
	f.Add("a:b")
	f.Add(":")
	tok, err := MintToken(secret, v.Registration.RelayID, mustSecret(f, testSeed).Public(), time.Unix(0, 0), &counterReader{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok)
	f.Fuzz(func(t *testing.T, token string) {
		st, err := ValidateToken(secret, token, 0, time.Now())
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("age check off but got %v", err)
			}
			return
		}
		// Only genuinely minted tokens validate: the strict encodings leave
		// exactly one valid MAC string per state.
		if token != v.Registration.Token && token != tok {
			t.Fatalf("random token validated: %q -> %+v", token, st)
		}
	})
}

func BenchmarkSign(b *testing.B) {
	sk := mustSecret(b, testSeed)
	data := bytes.Repeat([]byte(`{"publicKeys":["31a5a894b4524f74a9a8d0e27e21ba91"]}`), 4)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_ = sk.Sign(data, now)
	}
}

func BenchmarkVerify(b *testing.B) {
	sk := mustSecret(b, testSeed)
	pk := sk.Public()
	data := bytes.Repeat([]byte(`{"publicKeys":["31a5a894b4524f74a9a8d0e27e21ba91"]}`), 4)
	now := time.Now()
	sig := sk.Sign(data, now)
	b.ReportAllocs()
	for b.Loop() {
		if err := pk.Verify(data, sig, 5*time.Minute, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePublicKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePublicKey(testPublic); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateToken(b *testing.B) {
	secret := []byte("secret")
	tok, _ := MintToken(secret, "29308cac-9783-40e9-98ac-b5503dffe3a4", mustSecret(b, testSeed).Public(), time.Now(), nil)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ValidateToken(secret, tok, time.Minute, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckSignatureTime is the check an upstream makes on every
// forwarded envelope it does not fully verify.
func BenchmarkCheckSignatureTime(b *testing.B) {
	sk := mustSecret(b, testSeed)
	now := time.Now()
	sig := sk.Sign(nil, now)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CheckSignatureTime(sig, time.Minute, now); err != nil {
			b.Fatal(err)
		}
	}
}
