package relayauth

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxFutureSkew is how far in the future a signature timestamp may lie when
// the age check is on. Relay's own check (relay-auth SignatureHeader::expired)
// only rejects old signatures; we also reject timestamps far in the future, but
// allow this much clock skew between signer and verifier.
const maxFutureSkew = 60 * time.Second

// Sign signs data the way Relay signs upstream requests and returns the
// X-Sentry-Relay-Signature value:
//
//	base64url(ed25519(header ‖ 0x00 ‖ data)) "." base64url(header)
//
// where header is {"t":"<now, RFC 3339 UTC>"}. The timestamp is formatted like
// Relay's chrono serializer: fraction omitted when zero, else 3, 6 or 9 digits.
func (k SecretKey) Sign(data []byte, now time.Time) string {
	return k.SignWithHeader(data, signatureHeader(now))
}

// SignWithHeader signs data with a caller-chosen header JSON. Ed25519 is
// deterministic, so the result is reproducible; it exists for test vectors and
// for playing a misbehaving signer.
func (k SecretKey) SignWithHeader(data, headerJSON []byte) string {
	msg := make([]byte, 0, len(headerJSON)+1+len(data))
	msg = append(msg, headerJSON...)
	msg = append(msg, 0)
	msg = append(msg, data...)
	sig := ed25519.Sign(k.priv, msg)
	var sb strings.Builder
	sb.Grow(b64.EncodedLen(len(sig)) + 1 + b64.EncodedLen(len(headerJSON)))
	sb.WriteString(b64.EncodeToString(sig))
	sb.WriteByte('.')
	sb.WriteString(b64.EncodeToString(headerJSON))
	return sb.String()
}

// signatureHeader returns the compact JSON {"t":"..."} for now.
func signatureHeader(now time.Time) []byte {
	b := make([]byte, 0, 40)
	b = append(b, `{"t":"`...)
	b = appendChronoTime(b, now)
	b = append(b, `"}`...)
	return b
}

// appendChronoTime formats t in UTC like chrono's DateTime<Utc> serializer
// (SecondsFormat::AutoSi with Z): 2020-09-08T13:33:35.993904Z.
func appendChronoTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	b = t.AppendFormat(b, "2006-01-02T15:04:05")
	ns := t.Nanosecond()
	switch {
	case ns == 0:
	case ns%1_000_000 == 0:
		b = appendFrac(b, ns/1_000_000, 3)
	case ns%1_000 == 0:
		b = appendFrac(b, ns/1_000, 6)
	default:
		b = appendFrac(b, ns, 9)
	}
	return append(b, 'Z')
}

func appendFrac(b []byte, v, digits int) []byte {
	s := strconv.Itoa(v)
	b = append(b, '.')
	for i := len(s); i < digits; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// Verify checks an X-Sentry-Relay-Signature value sig over data.
//
// The value is split at the first '.'; a value without a header part is
// rejected (ErrMalformed), as Relay does. The Ed25519 signature covers
// header ‖ 0x00 ‖ data (ErrBadSignature if it does not match). With maxAge > 0
// the header's "t" must not be older than now-maxAge (ErrExpired) nor more
// than 60 s in the future (clock skew allowance; Relay itself never rejects
// future timestamps). A header without "t" (or with "t": null) never expires.
// maxAge 0 disables the age check.
func (k PublicKey) Verify(data []byte, sig string, maxAge time.Duration, now time.Time) error {
	if len(k.pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: verify with an empty public key", ErrMalformed)
	}
	sigPart, headerPart, ok := strings.Cut(sig, ".")
	if !ok {
		return fmt.Errorf("%w: signature has no header part", ErrMalformed)
	}
	rawSig, err := decodeB64(sigPart)
	if err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	if len(rawSig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: signature is %d bytes, want %d", ErrMalformed, len(rawSig), ed25519.SignatureSize)
	}
	header, err := decodeB64(headerPart)
	if err != nil {
		return fmt.Errorf("signature header: %w", err)
	}
	msg := make([]byte, 0, len(header)+1+len(data))
	msg = append(msg, header...)
	msg = append(msg, 0)
	msg = append(msg, data...)
	if !ed25519.Verify(k.pub, msg, rawSig) {
		return fmt.Errorf("%w: ed25519 signature does not match data", ErrBadSignature)
	}
	ts, hasT, err := parseSignatureHeader(header)
	if err != nil {
		return err
	}
	if maxAge <= 0 || !hasT {
		return nil
	}
	if ts.Before(now.Add(-maxAge)) {
		return fmt.Errorf("%w: signature time %s is older than %s", ErrExpired, ts.UTC().Format(time.RFC3339Nano), maxAge)
	}
	if ts.After(now.Add(maxFutureSkew)) {
		return fmt.Errorf("%w: signature time %s is more than %s in the future", ErrExpired, ts.UTC().Format(time.RFC3339Nano), maxFutureSkew)
	}
	return nil
}

// parseSignatureHeader reads "t" from the header JSON. Keys are matched
// exactly (encoding/json struct decoding would match "T" too; serde does not).
func parseSignatureHeader(header []byte) (t time.Time, ok bool, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(header, &fields); err != nil {
		return time.Time{}, false, fmt.Errorf("%w: signature header is not a JSON object: %v", ErrMalformed, err)
	}
	raw, found := fields["t"]
	if !found || string(raw) == "null" {
		return time.Time{}, false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, false, fmt.Errorf("%w: signature header \"t\" is not a string", ErrMalformed)
	}
	t, err = time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%w: signature header \"t\": %v", ErrMalformed, err)
	}
	return t, true, nil
}
