package relayauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
)

// randBytes is the size of the token nonce (relay-auth: 64 random bytes).
const randBytes = 64

// TokenState is the payload of a registration token. Field order matches
// relay-auth's RegisterState, which is what the JSON carries.
type TokenState struct {
	Timestamp int64  `json:"timestamp"`
	RelayID   string `json:"relay_id"`
	PublicKey string `json:"public_key"`
	Rand      string `json:"rand"`
}

// MintToken mints a stateless registration token the way Sentry does in the
// challenge step:
//
//	state = base64url(JSON{timestamp, relay_id, public_key, rand})
//	token = state ":" base64url(HMAC-SHA512(secret, state))
//
// rand is base64url of 64 bytes read from r (crypto/rand if r is nil).
func MintToken(secret []byte, relayID string, pub PublicKey, now time.Time, r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	id, err := uuid.Parse(relayID)
	if err != nil {
		return "", fmt.Errorf("%w: relay id %q is not a UUID", ErrMalformed, relayID)
	}
	if len(pub.pub) == 0 {
		return "", fmt.Errorf("%w: empty public key", ErrMalformed)
	}
	nonce := make([]byte, randBytes)
	if _, err := io.ReadFull(r, nonce); err != nil {
		return "", fmt.Errorf("relayauth: reading token nonce: %w", err)
	}
	js, err := json.Marshal(TokenState{
		Timestamp: now.Unix(),
		RelayID:   id.String(), // canonical lowercase hyphenated, as serde writes a Uuid
		PublicKey: pub.String(),
		Rand:      b64.EncodeToString(nonce),
	})
	if err != nil {
		return "", fmt.Errorf("relayauth: encoding token state: %w", err)
	}
	state := b64.EncodeToString(js)
	return state + ":" + b64.EncodeToString(tokenMAC(secret, state)), nil
}

func tokenMAC(secret []byte, state string) []byte {
	m := hmac.New(sha512.New, secret)
	m.Write([]byte(state))
	return m.Sum(nil)
}

// ValidateToken checks a token minted by MintToken (or by Sentry) with the
// same secret and returns its state. The MAC is checked first
// (ErrBadSignature), then the state is decoded (ErrMalformed). Time checks
// (ErrExpired) compare whole seconds, as relay-auth does: with maxAge > 0 a
// state whose timestamp + maxAge lies before now is expired (maxAge 0: no
// age check); a timestamp more than 15 s after now is always rejected, as
// sentry_relay 0.10.1 does. A token without ':' is ErrMalformed (relay-auth
// reports that case as a bad signature, since it checks an empty MAC).
func ValidateToken(secret []byte, token string, maxAge time.Duration, now time.Time) (TokenState, error) {
	state, macPart, ok := strings.Cut(token, ":")
	if !ok {
		return TokenState{}, fmt.Errorf("%w: token has no ':' separator", ErrMalformed)
	}
	mac, err := decodeB64(macPart)
	if err != nil {
		return TokenState{}, fmt.Errorf("token mac: %w", err)
	}
	if !hmac.Equal(mac, tokenMAC(secret, state)) {
		return TokenState{}, fmt.Errorf("%w: token mac does not match", ErrBadSignature)
	}
	js, err := decodeB64(state)
	if err != nil {
		return TokenState{}, fmt.Errorf("token state: %w", err)
	}
	st, err := parseTokenState(js)
	if err != nil {
		return TokenState{}, err
	}
	// Whole seconds, as relay-auth compares: timestamp + max_age < now.
	if maxAge > 0 && st.Timestamp+int64(maxAge/time.Second) < now.Unix() {
		return TokenState{}, fmt.Errorf("%w: token minted at %s is older than %s", ErrExpired, time.Unix(st.Timestamp, 0).UTC().Format(time.RFC3339), maxAge)
	}
	if st.Timestamp > now.Unix()+int64(maxFutureSkew/time.Second) {
		return TokenState{}, fmt.Errorf("%w: token minted at %s is more than %s in the future", ErrExpired, time.Unix(st.Timestamp, 0).UTC().Format(time.RFC3339), maxFutureSkew)
	}
	return st, nil
}

// parseTokenState decodes the state JSON with exact key names (serde is case
// sensitive, encoding/json struct decoding is not) and checks every field.
func parseTokenState(js []byte) (TokenState, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(js, &fields); err != nil {
		return TokenState{}, fmt.Errorf("%w: token state is not a JSON object: %w", ErrMalformed, err)
	}
	var st TokenState
	for _, f := range []struct {
		name string
		dst  any
	}{
		{"timestamp", &st.Timestamp},
		{"relay_id", &st.RelayID},
		{"public_key", &st.PublicKey},
		{"rand", &st.Rand},
	} {
		raw, ok := fields[f.name]
		if !ok {
			return TokenState{}, fmt.Errorf("%w: token state lacks %q", ErrMalformed, f.name)
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return TokenState{}, fmt.Errorf("%w: token state %q: %w", ErrMalformed, f.name, err)
		}
	}
	if _, err := uuid.Parse(st.RelayID); err != nil {
		return TokenState{}, fmt.Errorf("%w: token state relay_id %q is not a UUID", ErrMalformed, st.RelayID)
	}
	if _, err := ParsePublicKey(st.PublicKey); err != nil {
		return TokenState{}, fmt.Errorf("token state public_key: %w", err)
	}
	return st, nil
}
