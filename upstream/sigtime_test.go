package upstream

import (
	"testing"
	"time"
)

// The sampled-out path (--verify-envelope-every) must apply relayauth's
// form and time rules, not looser ones of its own.
func TestCheckSignatureFormFollowsRelayauth(t *testing.T) {
	r := newRelay(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	s := &Server{cfg: Config{MaxSignatureAge: 5 * time.Minute}}
	tests := []struct {
		name   string
		sig    string
		now    time.Time
		reason string // "" = accepted
	}{
		{"fresh", r.sk.Sign(nil, at), at.Add(time.Second), ""},
		{"stale", r.sk.Sign(nil, at), at.Add(6 * time.Minute), "expired_signature"},
		{"20 s in the future", r.sk.Sign(nil, at), at.Add(-20 * time.Second), "expired_signature"},
		{"no t", r.sk.SignWithHeader(nil, []byte(`{}`)), at, "malformed_signature"},
		{"no header", "nodot", at, "malformed_signature"},
		{"bad base64", r.sk.Sign(nil, at)[:87] + "%%%", at, "malformed_signature"},
	}
	for _, tt := range tests {
		got, e := s.checkSignatureForm(tt.sig, tt.now)
		switch {
		case tt.reason == "" && e != nil:
			t.Errorf("%s: rejected: %+v", tt.name, e)
		case tt.reason == "" && !got.Equal(at):
			t.Errorf("%s: time %v, want %v", tt.name, got, at)
		case tt.reason != "" && (e == nil || e.reason != tt.reason):
			t.Errorf("%s: got %+v, want reason %s", tt.name, e, tt.reason)
		}
	}
}
