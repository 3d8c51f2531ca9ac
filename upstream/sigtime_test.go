package upstream

import (
	"testing"
	"time"
)

func TestSignatureTime(t *testing.T) {
	r := newRelay(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	got, ok, err := signatureTime(r.sk.Sign(nil, at))
	if err != nil || !ok || !got.Equal(at) {
		t.Fatalf("signatureTime = %v %v %v", got, ok, err)
	}
	for _, tc := range []struct {
		header string
		ok     bool
		bad    bool
	}{
		{`{}`, false, false},
		{`{"t":null}`, false, false},
		{`{ "t" : "2026-01-02T03:04:05Z" }`, true, false},
		{`{"t":"yesterday"}`, false, true},
		{`{"t":5}`, false, true},
		{`[]`, false, true},
	} {
		sig := "x." + b64.EncodeToString([]byte(tc.header))
		_, ok, err := signatureTime(sig)
		if ok != tc.ok || (err != nil) != tc.bad {
			t.Errorf("%s: ok %v err %v", tc.header, ok, err)
		}
	}
	if _, _, err := signatureTime("x.%%%"); err == nil {
		t.Error("bad base64 accepted")
	}
	if _, _, err := signatureTime("nodot"); err == nil {
		t.Error("value without header accepted")
	}
}
