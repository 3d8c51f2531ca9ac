package relayauth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckSignatureTime(t *testing.T) {
	sk, err := ParseSecretKey("OvXFVm1tIUi8xDTuyHX1SSqdMc8nCt2qU9IUaH5p7oU")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	good := sk.Sign(nil, now)
	noT := sk.SignWithHeader(nil, []byte(`{"x":1}`))
	tests := []struct {
		name   string
		sig    string
		maxAge time.Duration
		at     time.Time
		want   error
	}{
		{"fresh", good, 5 * time.Minute, now.Add(time.Minute), nil},
		{"no age check", good, 0, now.Add(24 * time.Hour), nil},
		{"too old", good, 5 * time.Minute, now.Add(6 * time.Minute), ErrExpired},
		{"future beyond skew", good, 5 * time.Minute, now.Add(-16 * time.Second), ErrExpired},
		{"future within skew", good, 5 * time.Minute, now.Add(-14 * time.Second), nil},
		{"no header part", good[:86], 0, now, ErrMalformed},
		{"short signature", good[1:], 0, now, ErrMalformed},
		{"header without t", noT, 0, now, ErrMalformed},
		{"header not base64", good[:87] + "!!", 0, now, ErrMalformed},
	}
	for _, tt := range tests {
		ts, err := CheckSignatureTime(tt.sig, tt.maxAge, tt.at)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
		if err == nil && !ts.Equal(now) {
			t.Errorf("%s: time %v, want %v", tt.name, ts, now)
		}
		// Whatever passes here must be exactly what Verify accepts, except
		// for the Ed25519 check itself.
		if verr := sk.Public().Verify(nil, tt.sig, tt.maxAge, tt.at); (verr == nil) != (err == nil) {
			t.Errorf("%s: CheckSignatureTime err %v but Verify err %v", tt.name, err, verr)
		}
	}
}

// FuzzCheckSignatureTime: CheckSignatureTime judges form, header and time
// exactly as Verify does, short of the Ed25519 check. So for any value:
// malformed here ⇔ malformed in Verify; accepted here ⇒ Verify accepts it or
// finds only a bad signature; expired here ⇒ Verify expired or bad signature.
func FuzzCheckSignatureTime(f *testing.F) {
	sk := mustSecret(f, testSeed)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	good := sk.Sign(nil, now)
	f.Add(good, int64(0), int64(300))
	f.Add(good, int64(400), int64(300))
	f.Add(good[:86], int64(0), int64(0))
	f.Add(strings.Repeat("!", 86)+good[86:], int64(0), int64(300)) // right length, not base64
	f.Add("A"+good[1:85]+"B"+good[86:], int64(0), int64(300))      // non-zero trailing bits
	f.Add(sk.SignWithHeader(nil, []byte(`{"t":"2026-11-30T12:00:00Z","a":"v1"}`)), int64(0), int64(0))
	f.Add(sk.SignWithHeader(nil, []byte(`{"t":"2026-11-30 12:00:00z"}`)), int64(10), int64(0))
	pub := sk.Public()
	f.Fuzz(func(t *testing.T, sig string, offsetSeconds, maxAgeSeconds int64) {
		at := now.Add(time.Duration(offsetSeconds%1e6) * time.Second)
		maxAge := time.Duration(maxAgeSeconds%1e6) * time.Second
		_, cerr := CheckSignatureTime(sig, maxAge, at)
		verr := pub.Verify(nil, sig, maxAge, at)
		switch {
		case errors.Is(cerr, ErrMalformed) != errors.Is(verr, ErrMalformed):
			t.Fatalf("%q: CheckSignatureTime %v, Verify %v", sig, cerr, verr)
		case cerr == nil && verr != nil && !errors.Is(verr, ErrBadSignature):
			t.Fatalf("%q: CheckSignatureTime accepts, Verify %v", sig, verr)
		case errors.Is(cerr, ErrExpired) && !errors.Is(verr, ErrExpired) && !errors.Is(verr, ErrBadSignature):
			t.Fatalf("%q: CheckSignatureTime %v, Verify %v", sig, cerr, verr)
		case cerr != nil && !errors.Is(cerr, ErrMalformed) && !errors.Is(cerr, ErrExpired):
			t.Fatalf("%q: error %v is neither malformed nor expired", sig, cerr)
		}
	})
}

// FuzzCompactHeaderAgrees: wherever the compact reading of a signature
// header answers, the full JSON reading gives the same time and algorithm.
func FuzzCompactHeaderAgrees(f *testing.F) {
	for _, h := range []string{
		`{"t":"2026-11-30T12:00:00Z"}`,
		`{"t":"2026-11-30T12:00:00.993904Z","a":"v1"}`,
		`{"t":"2026-11-30T12:00:00.5Z","a":"v0"}`,
		`{"t":"2026-11-30 12:00:00z"}`,
		`{"t":"2026-11-30T12:00:00+02:00","a":"v2"}`,
		`{"t":"2026-11-30T12:00:00Z","a":"v1","x":1}`,
		`{"t":"2026-11-30T12:00:00\u005a"}`,
		`{"t":"2026-13-30T12:00:00Z"}`,
	} {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, h []byte) {
		ct, calg, ok := parseCompactHeader(h)
		if !ok {
			return
		}
		jt, jalg, err := parseHeaderJSON(h)
		if err != nil || !jt.Equal(ct) || jalg != calg {
			t.Fatalf("%q: compact %v %q, JSON %v %q %v", h, ct, calg, jt, jalg, err)
		}
	})
}

func TestCompactHeaderTakesRelaysForm(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 993904000, time.UTC)
	for _, tt := range []struct {
		h   string
		ok  bool
		alg string
	}{
		{string(signatureHeader(now)), true, algRegular},
		{`{"t":"2026-11-30T12:00:00.993904Z","a":"v1"}`, true, algPrehashed},
		{`{"t":"2026-11-30T12:00:00.993904Z","a":"v0"}`, true, algRegular},
		{`{"a":"v1","t":"2026-11-30T12:00:00.993904Z"}`, false, ""}, // other order: the JSON reading
		{`{"t": "2026-11-30T12:00:00.993904Z"}`, false, ""},
		{`{"t":"2026-11-30T12:00:00.993904\u005a"}`, false, ""},
		{`{"t":"2026-11-30T12:00:00.993904Z","a":"v2"}`, false, ""},
	} {
		ts, alg, ok := parseCompactHeader([]byte(tt.h))
		if ok != tt.ok || ok && (alg != tt.alg || !ts.Equal(now)) {
			t.Errorf("%s: %v %q %v", tt.h, ts, alg, ok)
		}
		// Every one of them still parses the same through parseSignatureHeader.
		if tt.h != `{"t":"2026-11-30T12:00:00.993904Z","a":"v2"}` {
			if ts, _, err := parseSignatureHeader([]byte(tt.h)); err != nil || !ts.Equal(now) {
				t.Errorf("%s: full reading %v %v", tt.h, ts, err)
			}
		}
	}
}
