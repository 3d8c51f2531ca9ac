package relayauth

import (
	"errors"
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
