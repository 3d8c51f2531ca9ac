package relayauth

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

type vectors struct {
	Keys struct {
		SecretSeed    string `json:"secret_seed"`
		SecretKeypair string `json:"secret_keypair"`
		Public        string `json:"public"`
	} `json:"keys"`
	Registration struct {
		Secret            string `json:"secret"`
		RelayID           string `json:"relay_id"`
		RelayKey          string `json:"relay_key"`
		Request           string `json:"request"`
		RequestSig        string `json:"request_sig"`
		RequestSigHeader  string `json:"request_sig_header"`
		Token             string `json:"token"`
		TokenTimestamp    int64  `json:"token_timestamp"`
		ResponseSig       string `json:"response_sig"`
		ResponseSigHeader string `json:"response_sig_header"`
	} `json:"registration"`
	LegacyNoHeader struct {
		Data string `json:"data"`
		Sig  string `json:"sig"`
	} `json:"legacy_no_header"`
	GoSignatures []struct {
		Header string `json:"header"`
		Data   string `json:"data"`
		Sig    string `json:"sig"`
	} `json:"go_signatures"`
}

func loadVectors(t testing.TB) vectors {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// responseBody is the RESPONSE vector: the register response body Relay signed.
func (v vectors) responseBody() string {
	r := v.Registration
	return `{"relay_id":"` + r.RelayID + `","token":"` + r.Token + `","version":"20.8.0"}`
}

func TestVectorKeys(t *testing.T) {
	v := loadVectors(t)
	for _, tc := range []struct{ name, secret string }{
		{"seed form", v.Keys.SecretSeed},
		{"keypair form", v.Keys.SecretKeypair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sk, err := ParseSecretKey(tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			if got := sk.Public().String(); got != v.Keys.Public {
				t.Errorf("public = %s, want %s", got, v.Keys.Public)
			}
			if got := sk.String(); got != v.Keys.SecretSeed {
				t.Errorf("String() = %s, want seed form %s", got, v.Keys.SecretSeed)
			}
			pk, err := ParsePublicKey(v.Keys.Public)
			if err != nil {
				t.Fatal(err)
			}
			if !pk.Equal(sk.Public()) {
				t.Error("parsed public key != derived public key")
			}
		})
	}
	// The keypair form is seed ‖ public in bytes. (At 4/3 chars per byte the
	// halves are not character-aligned: the text does not end with Public.)
	kp, _ := base64.RawURLEncoding.DecodeString(v.Keys.SecretKeypair)
	seed, _ := base64.RawURLEncoding.DecodeString(v.Keys.SecretSeed)
	pub, _ := base64.RawURLEncoding.DecodeString(v.Keys.Public)
	if string(kp) != string(seed)+string(pub) {
		t.Error("keypair vector is not seed ‖ public")
	}
}

func TestVectorSignatures(t *testing.T) {
	v := loadVectors(t)
	r := v.Registration
	for _, tc := range []struct {
		name, key, data, sig, header string
	}{
		{"REQUEST_SIG", r.RelayKey, r.Request, r.RequestSig, r.RequestSigHeader},
		{"RESPONSE_SIG", r.RelayKey, v.responseBody(), r.ResponseSig, r.ResponseSigHeader},
		{"go Hello World!", v.Keys.Public, v.GoSignatures[0].Data, v.GoSignatures[0].Sig, v.GoSignatures[0].Header},
		{"go empty", v.Keys.Public, v.GoSignatures[1].Data, v.GoSignatures[1].Sig, v.GoSignatures[1].Header},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pk, err := ParsePublicKey(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if err := pk.Verify([]byte(tc.data), tc.sig, 0, time.Now()); err != nil {
				t.Fatalf("verify with age check off: %v", err)
			}
			_, hdr, _ := strings.Cut(tc.sig, ".")
			got, err := base64.RawURLEncoding.DecodeString(hdr)
			if err != nil || string(got) != tc.header {
				t.Errorf("header = %q (%v), want %q", got, err, tc.header)
			}
			// The vectors are from 2020: a 5-minute age check must reject them,
			// and the same check one second after "t" must accept them.
			if err := pk.Verify([]byte(tc.data), tc.sig, 5*time.Minute, time.Now()); !isErr(err, ErrExpired) {
				t.Errorf("verify with 5m age check now: %v, want ErrExpired", err)
			}
			ts, _ := time.Parse(time.RFC3339Nano, tc.header[6:len(tc.header)-2])
			if err := pk.Verify([]byte(tc.data), tc.sig, 5*time.Minute, ts.Add(time.Second)); err != nil {
				t.Errorf("verify with 5m age check at t+1s: %v", err)
			}
		})
	}
}

func TestVectorGoSignaturesReproduce(t *testing.T) {
	v := loadVectors(t)
	sk, err := ParseSecretKey(v.Keys.SecretSeed)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range v.GoSignatures {
		t.Run(g.Data, func(t *testing.T) {
			if got := sk.SignWithHeader([]byte(g.Data), []byte(g.Header)); got != g.Sig {
				t.Errorf("SignWithHeader = %s, want %s", got, g.Sig)
			}
			ts, err := time.Parse(time.RFC3339Nano, "2020-09-08T13:33:35.993904Z")
			if err != nil {
				t.Fatal(err)
			}
			if got := sk.Sign([]byte(g.Data), ts); got != g.Sig {
				t.Errorf("Sign(t) = %s, want %s", got, g.Sig)
			}
		})
	}
}

func TestVectorLegacySignatureWithoutHeader(t *testing.T) {
	v := loadVectors(t)
	pk, err := ParsePublicKey(v.Keys.Public)
	if err != nil {
		t.Fatal(err)
	}
	err = pk.Verify([]byte(v.LegacyNoHeader.Data), v.LegacyNoHeader.Sig, 0, time.Now())
	if !isErr(err, ErrMalformed) {
		t.Fatalf("verify legacy signature: %v, want ErrMalformed", err)
	}
}

func TestVectorToken(t *testing.T) {
	v := loadVectors(t)
	r := v.Registration
	st, err := ValidateToken([]byte(r.Secret), r.Token, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.Timestamp != r.TokenTimestamp || st.RelayID != r.RelayID || st.PublicKey != r.RelayKey {
		t.Errorf("state = %+v", st)
	}
	rnd, err := base64.RawURLEncoding.DecodeString(st.Rand)
	if err != nil || len(rnd) != 64 {
		t.Errorf("rand = %q: %d bytes, %v; want 64 bytes", st.Rand, len(rnd), err)
	}
	// The state must re-encode byte for byte with TokenState's field order.
	state, _, _ := strings.Cut(r.Token, ":")
	js, _ := json.Marshal(st)
	if got := base64.RawURLEncoding.EncodeToString(js); got != state {
		t.Errorf("re-encoded state differs:\n got %s\nwant %s", got, state)
	}
	if _, err := ValidateToken([]byte("Secret"), r.Token, 0, time.Now()); !isErr(err, ErrBadSignature) {
		t.Errorf("wrong secret: %v, want ErrBadSignature", err)
	}
	if _, err := ValidateToken([]byte(r.Secret), r.Token, time.Minute, time.Now()); !isErr(err, ErrExpired) {
		t.Errorf("age check now: %v, want ErrExpired", err)
	}
	if _, err := ValidateToken([]byte(r.Secret), r.Token, time.Minute, time.Unix(r.TokenTimestamp+60, 0)); err != nil {
		t.Errorf("age check at +60s: %v", err)
	}
}
