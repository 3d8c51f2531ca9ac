package upstream

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/relayauth"
)

// relay is one known relay. Entries are replaced, never mutated, except for
// the signature cache.
type relay struct {
	id         string
	pub        relayauth.PublicKey
	registered bool
	known      bool // allow-listed / pre-registered

	sigs      sync.Map // signature value → expiry (unix nanos, math.MaxInt64 = never)
	nSigs     atomic.Int64
	lastSweep atomic.Int64 // unix nanos of the last sweep of a full cache
}

// maxCachedSignatures bounds the signature cache per relay.
const maxCachedSignatures = 4096

// MaxRegisteredRelays bounds the relays that may register on their own
// (relays from Config.Relays and RegisterRelay do not count): each holds a
// signature cache of up to maxCachedSignatures values, so this keeps memory
// bounded (≈ 64 MB at worst) whatever clients do.
const MaxRegisteredRelays = 64

// lookupRelay returns the relay with the given id, or nil.
func (s *Server) lookupRelay(id string) *relay {
	if v, ok := s.relays.Load(id); ok {
		return v.(*relay)
	}
	return nil
}

// authRelay checks X-Sentry-Relay-Id and X-Sentry-Relay-Signature over data
// on a request after registration. cacheable marks signatures over empty
// data (envelopes), whose verified values may be cached.
func (s *Server) authRelay(req *http.Request, c *counters, data []byte, cacheable bool) (*relay, *httpError) {
	return s.authRelayAs(req.Header.Get("X-Sentry-Relay-Id"), req.Header.Get("X-Sentry-Relay-Signature"), c, data, cacheable, s.now())
}

// registeredRelay is the registered relay of id, or the error that
// answers a request from any other.
func (s *Server) registeredRelay(id string) (*relay, *httpError) {
	if id == "" {
		return nil, newError(http.StatusUnauthorized, "missing_relay_id", "missing X-Sentry-Relay-Id header")
	}
	rl := s.lookupRelay(id)
	if rl == nil || !rl.registered {
		return nil, newError(http.StatusForbidden, "unknown_relay", "relay not registered", "relay id "+id)
	}
	return rl, nil
}

// authRelayAs is authRelay on the two header values, for a request that
// arrived at now (a signature's age is its age then).
func (s *Server) authRelayAs(id, sig string, c *counters, data []byte, cacheable bool, now time.Time) (*relay, *httpError) {
	rl, e := s.registeredRelay(id)
	if e != nil {
		return nil, e
	}
	if !s.cfg.VerifySignatures {
		c.sigNotChecked.Add(1)
		return rl, nil
	}
	if sig == "" {
		return nil, newError(http.StatusUnauthorized, "missing_signature", "missing X-Sentry-Relay-Signature header")
	}
	if cacheable {
		if v, ok := rl.sigs.Load(sig); ok {
			if now.UnixNano() <= v.(int64) {
				c.sigCacheHits.Add(1)
				return rl, nil
			}
			rl.sigs.Delete(sig)
			rl.nSigs.Add(-1)
		}
		if n := s.cfg.VerifyEnvelopeEvery; n > 1 && s.sampleN.Add(1)%uint64(n) != 0 {
			if _, e := s.checkSignatureForm(sig, now); e != nil {
				return nil, e
			}
			c.sigSampledOut.Add(1)
			return rl, nil
		}
	}
	signed, err := rl.pub.VerifyTime(data, sig, s.cfg.MaxSignatureAge, now)
	if err != nil {
		return nil, signatureError(err)
	}
	c.sigVerified.Add(1)
	if cacheable {
		s.cacheSignature(rl, sig, signed, now)
	}
	return rl, nil
}

// cacheSignature remembers a verified empty-data signature, signed at
// signed, until it ages past MaxSignatureAge.
func (s *Server) cacheSignature(rl *relay, sig string, signed, now time.Time) {
	expiry := int64(math.MaxInt64)
	if s.cfg.MaxSignatureAge > 0 {
		expiry = signed.Add(s.cfg.MaxSignatureAge).UnixNano()
	}
	if rl.nSigs.Load() >= maxCachedSignatures {
		// Full: sweep expired entries, at most once a second (a Relay signs
		// every request afresh, so a full cache is the normal case there).
		nowNanos := now.UnixNano()
		last := rl.lastSweep.Load()
		if nowNanos-last < int64(time.Second) || !rl.lastSweep.CompareAndSwap(last, nowNanos) {
			return
		}
		rl.sigs.Range(func(k, v any) bool {
			if v.(int64) < nowNanos {
				rl.sigs.Delete(k)
				rl.nSigs.Add(-1)
			}
			return true
		})
		if rl.nSigs.Load() >= maxCachedSignatures {
			return
		}
	}
	// A copy: the value may alias a buffer the HTTP server reuses.
	if _, loaded := rl.sigs.LoadOrStore(strings.Clone(sig), expiry); !loaded {
		rl.nSigs.Add(1)
	}
}

// checkSignatureForm checks what can be checked without Ed25519: the value's
// shape, its header and the timestamp's age (relayauth's rules).
func (s *Server) checkSignatureForm(sig string, now time.Time) (time.Time, *httpError) {
	t, err := relayauth.CheckSignatureTime(sig, s.cfg.MaxSignatureAge, now)
	if err != nil {
		return t, signatureError(err)
	}
	return t, nil
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
