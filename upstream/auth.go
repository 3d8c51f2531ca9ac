package upstream

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/relayload/relayload/relayauth"
)

// maxPublicKeyLen is Sentry's limit on public_key in a challenge.
const maxPublicKeyLen = 64

// registrationRequest is the body of either registration step.
type registrationRequest struct {
	RelayID   string `json:"relay_id"`
	PublicKey string `json:"public_key"` // challenge
	Token     string `json:"token"`      // response
	Version   string `json:"version"`
}

// postBody reads the decoded body of a POST and checks it with check; the
// caller gives back what it holds with s.releaseBody(held).
func (s *Server) postBody(req *http.Request, c *counters, check func(body []byte) *httpError) (body []byte, held heldBody, e *httpError) {
	if req.Method != http.MethodPost {
		return nil, heldBody{}, methodNotAllowed(req)
	}
	body, held, e = s.readDecoded(req, c)
	if e != nil {
		return nil, heldBody{}, e
	}
	if e := check(body); e != nil {
		s.releaseBody(held)
		return nil, heldBody{}, e
	}
	return body, held, nil
}

// registrationBody reads a registration request into rr, checks the relay
// id header against the body's relay_id, and turns every relay away under
// Config.DenyRelays.
func (s *Server) registrationBody(req *http.Request, c *counters, rr *registrationRequest) (body []byte, held heldBody, e *httpError) {
	return s.postBody(req, c, func(body []byte) *httpError {
		hdr := req.Header.Get("X-Sentry-Relay-Id")
		switch e := decodeJSON(body, rr, "registration request"); {
		case e != nil:
			return e
		case hdr == "":
			return newError(http.StatusUnauthorized, "missing_relay_id", "missing X-Sentry-Relay-Id header")
		case hdr != rr.RelayID:
			return newError(http.StatusBadRequest, "relay_id_mismatch", "X-Sentry-Relay-Id does not match relay_id in the body")
		case s.cfg.DenyRelays:
			return relayStop("relay registration denied (--deny-relays)")
		}
		return nil
	})
}

// signedBody reads a POST body signed by a registered relay.
func (s *Server) signedBody(req *http.Request, c *counters) (body []byte, held heldBody, e *httpError) {
	return s.postBody(req, c, func(body []byte) *httpError { return s.authRelay(req, c, body) })
}

// maxQueryBytes bounds the decoded body of a config or public-key query,
// far above Relay's largest: decoding millions of tiny keys costs many
// times the body in memory.
const maxQueryBytes = 1 << 20

// signedQuery reads a signed JSON query (what: for the answer) into q.
func (s *Server) signedQuery(req *http.Request, c *counters, q any, what string) *httpError {
	body, held, e := s.signedBody(req, c)
	if e != nil {
		return e
	}
	defer s.releaseBody(held)
	if len(body) > maxQueryBytes {
		return newError(http.StatusRequestEntityTooLarge, "too_large_query", what+" too large",
			fmt.Sprintf("%d bytes > limit %d", len(body), maxQueryBytes))
	}
	return decodeJSON(body, q, what)
}

func relayStop(detail string) *httpError {
	e := newError(http.StatusForbidden, "relay_denied", detail)
	e.body.Relay = "stop"
	return e
}

// admitRelay decides whether relay id with key pub may register and, with
// store, marks it registered: a known or registered relay id keeps its key,
// as in Sentry, so nobody takes over an id; with an allow-list only known
// relays may register. Registrations hold regMu, so that of two at once of
// a new id, the second sees the first.
func (s *Server) admitRelay(id string, pub relayauth.PublicKey, store bool) *httpError {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	known := s.lookupRelay(id)
	switch {
	case known != nil && !known.pub.Equal(pub):
		return newError(http.StatusBadRequest, "public_key_mismatch", "Attempted to register agent with a different public key",
			"relay id "+id+" is registered with another public key")
	case s.cfg.AllowList && (known == nil || !known.known):
		return newError(http.StatusForbidden, "unknown_relay", "relay not allowed to register", "relay id "+id+" is not in the allow-list")
	case known == nil && s.nSelfRegistered >= MaxRegisteredRelays:
		return newError(http.StatusForbidden, "too_many_relays", "too many relays registered",
			fmt.Sprintf("at most %d relays may register; pre-register more with --relay-credentials", MaxRegisteredRelays))
	case !store || known != nil && known.registered:
		return nil // registering again (every auth_interval) changes nothing
	case known == nil:
		s.nSelfRegistered++
	}
	s.relays.Store(id, &relay{pub: pub, registered: true, known: known != nil && known.known})
	return nil
}

// registration counts a failed registration step, which is also an error.
func (c *counters) registration(e *httpError) *httpError {
	if e != nil {
		c.regFail.Add(e.reason)
	}
	return e
}

// challenge is registration step 1 (docs/protocol.md, Registration).
func (s *Server) challenge(w http.ResponseWriter, req *http.Request, c *counters) *httpError {
	var cr registrationRequest
	body, held, e := s.registrationBody(req, c, &cr)
	if e != nil {
		return e
	}
	defer s.releaseBody(held)
	if cr.Version == "" {
		return newError(http.StatusBadRequest, "missing_version", "missing relay version")
	}
	if len(cr.PublicKey) > maxPublicKeyLen {
		return newError(http.StatusBadRequest, "bad_public_key", "public_key too long")
	}
	pub, err := relayauth.ParsePublicKey(cr.PublicKey)
	if err != nil {
		return newError(http.StatusBadRequest, "bad_public_key", "invalid public_key", err.Error())
	}
	if e := s.admitRelay(cr.RelayID, pub, false); e != nil {
		return e
	}
	if e := s.verifySignature(req, c, pub, body, s.cfg.RegistrationMaxAge); e != nil {
		return e
	}
	token, err := relayauth.MintToken(s.cfg.TokenSecret, cr.RelayID, pub, s.cfg.Now(), nil)
	if err != nil {
		return newError(http.StatusBadRequest, "bad_relay_id", "cannot mint a token", err.Error())
	}
	writeJSON(w, http.StatusOK, map[string]string{"relay_id": cr.RelayID, "token": token})
	return nil
}

// response is registration step 2 (docs/protocol.md, Registration).
func (s *Server) response(w http.ResponseWriter, req *http.Request, c *counters) *httpError {
	var rr registrationRequest
	body, held, e := s.registrationBody(req, c, &rr)
	if e != nil {
		return e
	}
	defer s.releaseBody(held)
	st, err := relayauth.ValidateToken(s.cfg.TokenSecret, rr.Token, s.cfg.RegistrationMaxAge, s.cfg.Now())
	if err != nil {
		reason := "bad_token"
		if errors.Is(err, relayauth.ErrExpired) {
			reason = "expired_token"
		}
		return newError(http.StatusBadRequest, reason, "invalid registration token", err.Error())
	}
	if st.RelayID != rr.RelayID {
		return newError(http.StatusBadRequest, "relay_id_mismatch", "token was issued to another relay")
	}
	pub, err := relayauth.ParsePublicKey(st.PublicKey)
	if err != nil {
		return newError(http.StatusBadRequest, "bad_token", "token carries an invalid public key", err.Error())
	}
	if e := s.verifySignature(req, c, pub, body, s.cfg.RegistrationMaxAge); e != nil {
		return e
	}
	if e := s.admitRelay(rr.RelayID, pub, true); e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, map[string]string{"relay_id": rr.RelayID})
	return nil
}

type publicKeyInfo struct {
	PublicKey string `json:"publicKey"`
	Internal  bool   `json:"internal"`
}

// handlePublicKeys answers a downstream relay's key lookup (docs/protocol.md,
// Public keys).
func (s *Server) handlePublicKeys(w http.ResponseWriter, req *http.Request, c *counters) *httpError {
	var q struct {
		RelayIDs []string `json:"relay_ids"`
	}
	if e := s.signedQuery(req, c, &q, "publickeys request"); e != nil {
		return e
	}
	if len(q.RelayIDs) > MaxKeysPerRequest {
		return newError(http.StatusBadRequest, "too_many_keys", "too many relay ids")
	}
	relays := map[string]*publicKeyInfo{}
	keys := map[string]*string{}
	for _, id := range q.RelayIDs {
		rl := s.lookupRelay(id)
		if rl == nil || !(rl.registered || rl.known) {
			relays[id], keys[id] = nil, nil
			continue
		}
		k := rl.pub.String()
		relays[id] = &publicKeyInfo{PublicKey: k, Internal: true}
		keys[id] = &k
	}
	writeJSON(w, http.StatusOK, map[string]any{"relays": relays, "public_keys": keys})
	return nil
}

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
