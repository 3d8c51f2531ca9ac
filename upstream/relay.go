package upstream

import (
	"errors"
	"net/http"
	"time"

	"github.com/relayload/relayload/relayauth"
)

// relay is one known relay, by id in Server.relays. Entries are replaced,
// never mutated.
type relay struct {
	pub        relayauth.PublicKey
	registered bool
	known      bool // allow-listed / pre-registered
}

// MaxRegisteredRelays bounds the relays that may register on their own
// (relays from Config.Relays and RegisterRelay do not count), so that what
// clients can make the server remember stays bounded.
const MaxRegisteredRelays = 64

// lookupRelay returns the relay with the given id, or nil.
func (s *Server) lookupRelay(id string) *relay {
	if v, ok := s.relays.Load(id); ok {
		return v.(*relay)
	}
	return nil
}

// authRelay checks X-Sentry-Relay-Id and X-Sentry-Relay-Signature over data
// (empty for an envelope: Relay signs its forwards over no data) on a
// request after registration.
func (s *Server) authRelay(req *http.Request, c *counters, data []byte) *httpError {
	id := req.Header.Get("X-Sentry-Relay-Id")
	if id == "" {
		return newError(http.StatusUnauthorized, "missing_relay_id", "missing X-Sentry-Relay-Id header")
	}
	rl := s.lookupRelay(id)
	if rl == nil || !rl.registered {
		return newError(http.StatusForbidden, "unknown_relay", "relay not registered", "relay id "+id)
	}
	return s.verifySignature(req, c, rl.pub, data, s.cfg.MaxSignatureAge)
}

// verifySignature checks the request's X-Sentry-Relay-Signature over data
// with pub (unless Config.VerifySignatures is off) and counts the check.
func (s *Server) verifySignature(req *http.Request, c *counters, pub relayauth.PublicKey, data []byte, maxAge time.Duration) *httpError {
	if !s.cfg.VerifySignatures {
		c.sigNotChecked.Add(1)
		return nil
	}
	sig := req.Header.Get("X-Sentry-Relay-Signature")
	if sig == "" {
		return newError(http.StatusUnauthorized, "missing_signature", "missing X-Sentry-Relay-Signature header")
	}
	if err := pub.Verify(data, sig, maxAge, s.cfg.Now()); err != nil {
		return signatureError(err)
	}
	c.sigVerified.Add(1)
	return nil
}

// signatureError maps a relayauth error to an answer and a counted reason.
func signatureError(err error) *httpError {
	switch {
	case errors.Is(err, relayauth.ErrExpired):
		return newError(http.StatusUnauthorized, "expired_signature", "relay signature expired", err.Error())
	case errors.Is(err, relayauth.ErrBadSignature):
		return newError(http.StatusUnauthorized, "bad_signature", "invalid relay signature", err.Error())
	default:
		return newError(http.StatusUnauthorized, "malformed_signature", "malformed relay signature", err.Error())
	}
}
