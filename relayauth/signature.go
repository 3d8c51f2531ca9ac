package relayauth

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxFutureSkew is how far in the future a signature or token timestamp may
// lie. Sentry's verifier (sentry_relay 0.10.1, measured by the interop suite)
// accepts up to 15 s ahead of its clock, whatever the max age, and rejects
// later timestamps as expired; newer relay-auth code compares |now - t| with
// the max age instead. 15 s is the stricter of the two for max ages >= 15 s.
const maxFutureSkew = 15 * time.Second

// Signature algorithms of the header's optional "a" field (relay-auth
// SignatureAlgorithm). Absent means regular.
const (
	algRegular   = "v0" // Ed25519 over header ‖ 0x00 ‖ data
	algPrehashed = "v1" // Ed25519ph over SHA-512(header ‖ 0x00 ‖ data), empty context
)

// Sign signs data the way Relay signs upstream requests and returns the
// X-Sentry-Relay-Signature value:
//
//	base64url(ed25519(header ‖ 0x00 ‖ data)) "." base64url(header)
//
// where header is {"t":"<now, RFC 3339 UTC>"}. The timestamp is formatted like
// Relay's chrono serializer: fraction omitted when zero, else 3, 6 or 9 digits.
func (k SecretKey) Sign(data []byte, now time.Time) string {
	return k.sign(data, signatureHeader(now), false)
}

// SignWithHeader signs data with a caller-chosen header JSON. Ed25519 is
// deterministic, so the result is reproducible; it exists for test vectors and
// for playing a misbehaving signer. Like relay-auth's sign_with_header, a
// header with "a":"v1" selects the pre-hashed algorithm (Ed25519ph over
// SHA-512(header ‖ 0x00 ‖ data)); anything else signs the regular way.
func (k SecretKey) SignWithHeader(data, headerJSON []byte) string {
	prehashed := false
	if bytes.Contains(headerJSON, []byte(`"a"`)) {
		var h struct {
			A string `json:"a"`
		}
		prehashed = json.Unmarshal(headerJSON, &h) == nil && h.A == algPrehashed
	}
	return k.sign(data, headerJSON, prehashed)
}

func (k SecretKey) sign(data, headerJSON []byte, prehashed bool) string {
	var sig []byte
	if prehashed {
		digest := prehash(headerJSON, data)
		var err error
		sig, err = k.priv.Sign(nil, digest[:], &ed25519.Options{Hash: crypto.SHA512})
		if err != nil { // only for a zero SecretKey
			panic("relayauth: sign with an invalid secret key: " + err.Error())
		}
	} else {
		msg := make([]byte, 0, len(headerJSON)+1+len(data))
		msg = append(msg, headerJSON...)
		msg = append(msg, 0)
		msg = append(msg, data...)
		sig = ed25519.Sign(k.priv, msg)
	}
	var sb strings.Builder
	sb.Grow(b64.EncodedLen(len(sig)) + 1 + b64.EncodedLen(len(headerJSON)))
	sb.WriteString(b64.EncodeToString(sig))
	sb.WriteByte('.')
	sb.WriteString(b64.EncodeToString(headerJSON))
	return sb.String()
}

// prehash is SHA-512(header ‖ 0x00 ‖ data), relay-auth's create_digest.
func prehash(header, data []byte) [sha512.Size]byte {
	h := sha512.New()
	h.Write(header)
	h.Write([]byte{0})
	h.Write(data)
	var d [sha512.Size]byte
	h.Sum(d[:0])
	return d
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
// rejected (ErrMalformed), as Relay does. The header must be a JSON object
// with a "t" timestamp: current relay-auth and Sentry's sentry_relay reject
// headers without one (ErrMalformed). Its optional "a" picks the algorithm:
// absent or "v0" verifies Ed25519 over header ‖ 0x00 ‖ data, "v1" verifies
// Ed25519ph over SHA-512 of the same bytes; a mismatch is ErrBadSignature.
//
// Time checks (ErrExpired), after the signature verified: with maxAge > 0, t
// must not be older than now-maxAge; maxAge 0 disables that age check. In
// every case t may lie at most 15 s after now (Sentry's tolerance for clock
// skew, see maxFutureSkew).
func (k PublicKey) Verify(data []byte, sig string, maxAge time.Duration, now time.Time) error {
	_, err := k.VerifyTime(data, sig, maxAge, now)
	return err
}

// VerifyTime is Verify that also returns the signed time once the signature
// verified, for callers that need it too (an upstream caching verified
// values until they expire): CheckSignatureTime after Verify would read the
// header a second time.
func (k PublicKey) VerifyTime(data []byte, sig string, maxAge time.Duration, now time.Time) (time.Time, error) {
	if len(k.pub) != ed25519.PublicKeySize {
		return time.Time{}, fmt.Errorf("%w: verify with an empty public key", ErrMalformed)
	}
	sigPart, headerPart, ok := strings.Cut(sig, ".")
	if !ok {
		return time.Time{}, fmt.Errorf("%w: signature has no header part", ErrMalformed)
	}
	rawSig, err := decodeB64(sigPart)
	if err != nil {
		return time.Time{}, fmt.Errorf("signature: %w", err)
	}
	if len(rawSig) != ed25519.SignatureSize {
		return time.Time{}, fmt.Errorf("%w: signature is %d bytes, want %d", ErrMalformed, len(rawSig), ed25519.SignatureSize)
	}
	header, err := decodeB64(headerPart)
	if err != nil {
		return time.Time{}, fmt.Errorf("signature header: %w", err)
	}
	ts, alg, err := parseSignatureHeader(header)
	if err != nil {
		return time.Time{}, err
	}
	if alg == algPrehashed {
		digest := prehash(header, data)
		if ed25519.VerifyWithOptions(k.pub, digest[:], rawSig, &ed25519.Options{Hash: crypto.SHA512}) != nil {
			return time.Time{}, fmt.Errorf("%w: ed25519ph signature does not match data", ErrBadSignature)
		}
	} else {
		msg := make([]byte, 0, len(header)+1+len(data))
		msg = append(msg, header...)
		msg = append(msg, 0)
		msg = append(msg, data...)
		if !ed25519.Verify(k.pub, msg, rawSig) {
			return time.Time{}, fmt.Errorf("%w: ed25519 signature does not match data", ErrBadSignature)
		}
	}
	if err := checkSignedTime(ts, maxAge, now); err != nil {
		return time.Time{}, err
	}
	return ts, nil
}

// checkSignedTime applies the time rules of Verify to the signed time ts.
func checkSignedTime(ts time.Time, maxAge time.Duration, now time.Time) error {
	if maxAge > 0 && ts.Before(now.Add(-maxAge)) {
		return fmt.Errorf("%w: signature time %s is older than %s", ErrExpired, ts.UTC().Format(time.RFC3339Nano), maxAge)
	}
	if ts.After(now.Add(maxFutureSkew)) {
		return fmt.Errorf("%w: signature time %s is more than %s in the future", ErrExpired, ts.UTC().Format(time.RFC3339Nano), maxFutureSkew)
	}
	return nil
}

// parseSignatureHeader reads "t" and "a" from the header JSON. Keys are
// matched exactly (encoding/json struct decoding would match "T" too; serde
// does not); unknown keys are ignored.
func parseSignatureHeader(header []byte) (t time.Time, alg string, err error) {
	if ts, alg, ok := parseCompactHeader(header); ok {
		return ts, alg, nil
	}
	return parseHeaderJSON(header)
}

// parseHeaderJSON is parseSignatureHeader's reading of any JSON object.
func parseHeaderJSON(header []byte) (t time.Time, alg string, err error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(header, &fields); err != nil || fields == nil {
		return time.Time{}, "", fmt.Errorf("%w: signature header is not a JSON object", ErrMalformed)
	}
	alg = algRegular
	if raw, ok := fields["a"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &alg) != nil || (alg != algRegular && alg != algPrehashed) {
			return time.Time{}, "", fmt.Errorf("%w: signature header \"a\" is %s, want \"v0\" or \"v1\"", ErrMalformed, raw)
		}
	}
	raw, ok := fields["t"]
	if !ok || string(raw) == "null" {
		return time.Time{}, "", fmt.Errorf("%w: signature header has no \"t\" timestamp", ErrMalformed)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, "", fmt.Errorf("%w: signature header \"t\" is not a string", ErrMalformed)
	}
	t, err = parseChronoTime(s)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("%w: signature header \"t\": %w", ErrMalformed, err)
	}
	return t, alg, nil
}

// parseCompactHeader reads the header in the one form Relay (and Sign)
// writes it, {"t":"<time>"} or {"t":"<time>","a":"v0"|"v1"}, without
// encoding/json, which costs several times as much, and an upstream reads
// one header per envelope Relay forwards (BenchmarkCheckSignatureTime). ok is
// false for anything else (other keys, spacing, an unparsable time, which
// an escaped one is), which parseSignatureHeader then reads in full; where ok is true
// the result is the full reading's (FuzzCompactHeaderAgrees).
func parseCompactHeader(h []byte) (t time.Time, alg string, ok bool) {
	const open, mid = `{"t":"`, `","a":"`
	if len(h) < len(open)+2 || string(h[:len(open)]) != open || h[len(h)-1] != '}' {
		return time.Time{}, "", false
	}
	rest := h[len(open) : len(h)-1]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return time.Time{}, "", false
	}
	ts, tail := rest[:end], rest[end:]
	switch string(tail) {
	case `"`:
		alg = algRegular
	case mid + algRegular + `"`:
		alg = algRegular
	case mid + algPrehashed + `"`:
		alg = algPrehashed
	default:
		return time.Time{}, "", false
	}
	// An escape in ts fails parseChronoTime as it fails the JSON reading's.
	t, err := parseChronoTime(string(ts))
	if err != nil {
		return time.Time{}, "", false
	}
	return t, alg, true
}

// parseChronoTime parses an RFC 3339 timestamp as chrono's DateTime<Utc>
// deserializer does, which also accepts a lowercase 't'/'z' and a space
// between date and time.
func parseChronoTime(s string) (time.Time, error) {
	if len(s) > 10 && (s[10] == ' ' || s[10] == 't') || strings.HasSuffix(s, "z") {
		b := []byte(s)
		if len(b) > 10 && (b[10] == ' ' || b[10] == 't') {
			b[10] = 'T'
		}
		if b[len(b)-1] == 'z' {
			b[len(b)-1] = 'Z'
		}
		s = string(b)
	}
	return time.Parse(time.RFC3339Nano, s)
}

// CheckSignatureTime checks everything about a signature value that does not
// need Ed25519: its form (a 64-byte signature and a header part), the header
// (as Verify reads it) and the time rules of Verify. It returns the signed
// time. Upstreams that verify only a sample of signatures (Ed25519 costs tens
// of µs) use it for the rest, and to know how long a verified value stays
// valid.
func CheckSignatureTime(sig string, maxAge time.Duration, now time.Time) (time.Time, error) {
	sigPart, headerPart, ok := strings.Cut(sig, ".")
	if !ok {
		return time.Time{}, fmt.Errorf("%w: signature has no header part", ErrMalformed)
	}
	if n := base64.RawURLEncoding.DecodedLen(len(sigPart)); n != ed25519.SignatureSize {
		return time.Time{}, fmt.Errorf("%w: signature is %d bytes, want %d", ErrMalformed, n, ed25519.SignatureSize)
	}
	if !isStrictB64Signature(sigPart) {
		return time.Time{}, fmt.Errorf("signature: %w: bad base64url encoding", ErrMalformed)
	}
	header, err := decodeB64(headerPart)
	if err != nil {
		return time.Time{}, fmt.Errorf("signature header: %w", err)
	}
	ts, _, err := parseSignatureHeader(header)
	if err != nil {
		return time.Time{}, err
	}
	return ts, checkSignedTime(ts, maxAge, now)
}

// isStrictB64Signature reports whether s (86 characters) is what decodeB64
// accepts for a 64-byte signature, without decoding it (CheckSignatureTime
// runs on the sink's hot path and must not allocate): only base64url
// characters, and the 4 bits the last character carries beyond 512 are zero.
func isStrictB64Signature(s string) bool {
	var last byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z':
			last = c - 'A'
		case 'a' <= c && c <= 'z':
			last = c - 'a' + 26
		case '0' <= c && c <= '9':
			last = c - '0' + 52
		case c == '-':
			last = 62
		case c == '_':
			last = 63
		default:
			return false
		}
	}
	return last&0x0f == 0
}
