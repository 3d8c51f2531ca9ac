package upstream

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/relayload/relayload/relayauth"
)

// maxPublicKeyLen is Sentry's limit on public_key in a challenge.
const maxPublicKeyLen = 64

type challengeRequest struct {
	RelayID   string `json:"relay_id"`
	PublicKey string `json:"public_key"`
	Version   string `json:"version"`
}

type responseRequest struct {
	RelayID string `json:"relay_id"`
	Token   string `json:"token"`
	Version string `json:"version"`
}

// registrationBody reads a registration request, checks the relay id
// header against the body's relay_id, and turns every relay away under
// --deny-relays.
func (s *Server) registrationBody(w http.ResponseWriter, req *http.Request, c *counters, v any, bodyRelayID func() string) ([]byte, func(), bool) {
	if req.Method != http.MethodPost {
		s.regFail(w, c, methodNotAllowed(req))
		return nil, nil, false
	}
	body, release, e := s.readDecoded(req, c)
	if e != nil {
		s.regFail(w, c, e)
		return nil, nil, false
	}
	if e := decodeJSON(body, v, "registration request"); e != nil {
		release()
		s.regFail(w, c, e)
		return nil, nil, false
	}
	hdr := req.Header.Get("X-Sentry-Relay-Id")
	if hdr == "" {
		release()
		s.regFail(w, c, newError(http.StatusUnauthorized, "missing_relay_id", "missing X-Sentry-Relay-Id header"))
		return nil, nil, false
	}
	if hdr != bodyRelayID() {
		release()
		s.regFail(w, c, newError(http.StatusBadRequest, "relay_id_mismatch", "X-Sentry-Relay-Id does not match relay_id in the body"))
		return nil, nil, false
	}
	if s.cfg.DenyRelays {
		release()
		s.regFail(w, c, relayStop("relay registration denied (--deny-relays)"))
		return nil, nil, false
	}
	return body, release, true
}

// regFail answers a failed registration step and counts it both as an error
// and as a registration failure.
func (s *Server) regFail(w http.ResponseWriter, c *counters, e *httpError) {
	c.regFail.add(e.reason, 1)
	s.writeError(w, c, e)
}

func relayStop(detail string) *httpError {
	e := newError(http.StatusForbidden, "relay_denied", detail)
	e.body.Relay = "stop"
	return e
}

// verifyRegistration checks a registration step's signature over body with
// pub (the key from the challenge body, or the one the token carries).
func (s *Server) verifyRegistration(req *http.Request, c *counters, pub relayauth.PublicKey, body []byte) *httpError {
	if !s.cfg.VerifySignatures {
		c.sigNotChecked.Add(1)
		return nil
	}
	sig := req.Header.Get("X-Sentry-Relay-Signature")
	if sig == "" {
		return newError(http.StatusUnauthorized, "missing_signature", "missing X-Sentry-Relay-Signature header")
	}
	if err := pub.Verify(body, sig, s.cfg.RegistrationMaxAge, s.now()); err != nil {
		return signatureError(err)
	}
	c.sigVerified.Add(1)
	return nil
}

// admitRelay decides whether relay id with key pub may register: a relay
// id already known (allow-listed) or registered keeps its key, as in Sentry,
// so nobody takes over a relay's id by registering it with their own key;
// with an allow-list only known relays may register. It returns the relay's
// current entry, if any.
func (s *Server) admitRelay(id string, pub relayauth.PublicKey) (*relay, *httpError) {
	known := s.lookupRelay(id)
	if known != nil && !known.pub.Equal(pub) {
		return nil, keyMismatch(id)
	}
	if s.cfg.AllowList && (known == nil || !known.known) {
		return nil, newError(http.StatusForbidden, "unknown_relay", "relay not allowed to register", "relay id "+id+" is not in the allow-list")
	}
	if known == nil && s.nSelfRegistered.Load() >= MaxRegisteredRelays {
		return nil, newError(http.StatusForbidden, "too_many_relays", "too many relays registered",
			fmt.Sprintf("at most %d relays may register; pre-register more with --relay-credentials", MaxRegisteredRelays))
	}
	return known, nil
}

// keyMismatch is Sentry's answer to a registration of a known relay id with
// another public key (400, api/endpoints/relay register_challenge and
// register_response).
func keyMismatch(id string) *httpError {
	return newError(http.StatusBadRequest, "public_key_mismatch", "Attempted to register agent with a different public key",
		"relay id "+id+" is registered with another public key")
}

// handleChallenge is registration step 1 (docs/protocol.md, Registration).
func (s *Server) handleChallenge(w http.ResponseWriter, req *http.Request, c *counters) {
	c.challenges.Add(1)
	var cr challengeRequest
	body, release, ok := s.registrationBody(w, req, c, &cr, func() string { return cr.RelayID })
	if !ok {
		return
	}
	defer release()
	if cr.Version == "" {
		s.regFail(w, c, newError(http.StatusBadRequest, "missing_version", "missing relay version"))
		return
	}
	if len(cr.PublicKey) > maxPublicKeyLen {
		s.regFail(w, c, newError(http.StatusBadRequest, "bad_public_key", "public_key too long"))
		return
	}
	pub, err := relayauth.ParsePublicKey(cr.PublicKey)
	if err != nil {
		s.regFail(w, c, newError(http.StatusBadRequest, "bad_public_key", "invalid public_key", err.Error()))
		return
	}
	if _, e := s.admitRelay(cr.RelayID, pub); e != nil {
		s.regFail(w, c, e)
		return
	}
	if e := s.verifyRegistration(req, c, pub, body); e != nil {
		s.regFail(w, c, e)
		return
	}
	token, err := relayauth.MintToken(s.secret, cr.RelayID, pub, s.now(), nil)
	if err != nil {
		s.regFail(w, c, newError(http.StatusBadRequest, "bad_relay_id", "cannot mint a token", err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"relay_id": cr.RelayID, "token": token})
}

// handleResponse is registration step 2 (docs/protocol.md, Registration).
func (s *Server) handleResponse(w http.ResponseWriter, req *http.Request, c *counters) {
	c.responses.Add(1)
	var rr responseRequest
	body, release, ok := s.registrationBody(w, req, c, &rr, func() string { return rr.RelayID })
	if !ok {
		return
	}
	defer release()
	st, err := relayauth.ValidateToken(s.secret, rr.Token, s.cfg.RegistrationMaxAge, s.now())
	if err != nil {
		reason := "bad_token"
		if errors.Is(err, relayauth.ErrExpired) {
			reason = "expired_token"
		}
		s.regFail(w, c, newError(http.StatusBadRequest, reason, "invalid registration token", err.Error()))
		return
	}
	if st.RelayID != rr.RelayID {
		s.regFail(w, c, newError(http.StatusBadRequest, "relay_id_mismatch", "token was issued to another relay"))
		return
	}
	pub, err := relayauth.ParsePublicKey(st.PublicKey)
	if err != nil {
		s.regFail(w, c, newError(http.StatusBadRequest, "bad_token", "token carries an invalid public key", err.Error()))
		return
	}
	if e := s.verifyRegistration(req, c, pub, body); e != nil {
		s.regFail(w, c, e)
		return
	}
	known, e := s.admitRelay(rr.RelayID, pub)
	if e != nil {
		s.regFail(w, c, e)
		return
	}
	if e := s.storeRegistered(rr.RelayID, pub, known); e != nil {
		s.regFail(w, c, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"relay_id": rr.RelayID})
}

// storeRegistered marks relay id (with key pub, admitted with entry known)
// registered. Two registrations of a new id may pass admitRelay at once: the
// first to store its entry wins and a later one with another key is
// refused, never swapped in.
func (s *Server) storeRegistered(id string, pub relayauth.PublicKey, known *relay) *httpError {
	for {
		if known == nil {
			v, loaded := s.relays.LoadOrStore(id, &relay{id: id, pub: pub, registered: true})
			if !loaded {
				s.nSelfRegistered.Add(1)
				return nil
			}
			known = v.(*relay)
		}
		if !known.pub.Equal(pub) {
			return keyMismatch(id)
		}
		if known.registered {
			return nil // registering again (every auth_interval): nothing changes
		}
		if s.relays.CompareAndSwap(id, known, &relay{id: id, pub: pub, registered: true, known: known.known}) {
			return nil
		}
		known = s.lookupRelay(id)
	}
}

// signedQuery reads a signed JSON query body and authenticates the relay.
func (s *Server) signedQuery(w http.ResponseWriter, req *http.Request, c *counters) ([]byte, func(), *relay, bool) {
	if req.Method != http.MethodPost {
		s.writeError(w, c, methodNotAllowed(req))
		return nil, nil, nil, false
	}
	body, release, e := s.readDecoded(req, c)
	if e != nil {
		s.writeError(w, c, e)
		return nil, nil, nil, false
	}
	rl, e := s.authRelay(req, c, body)
	if e != nil {
		release()
		s.writeError(w, c, e)
		return nil, nil, nil, false
	}
	return body, release, rl, true
}

type publicKeyInfo struct {
	PublicKey string `json:"publicKey"`
	Internal  bool   `json:"internal"`
}

// handlePublicKeys answers a downstream relay's key lookup (docs/protocol.md,
// Public keys).
func (s *Server) handlePublicKeys(w http.ResponseWriter, req *http.Request, c *counters) {
	body, release, _, ok := s.signedQuery(w, req, c)
	if !ok {
		return
	}
	defer release()
	var q struct {
		RelayIDs []string `json:"relay_ids"`
	}
	if e := decodeQuery(body, &q, "publickeys request"); e != nil {
		s.writeError(w, c, e)
		return
	}
	if len(q.RelayIDs) > MaxKeysPerRequest {
		s.writeError(w, c, newError(http.StatusBadRequest, "too_many_keys", "too many relay ids"))
		return
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
}
