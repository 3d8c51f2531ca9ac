// Package relayauth implements the cryptographic parts of the protocol between
// Sentry's Relay and its upstream: Ed25519 keys in Relay's text form, the
// credentials.json file, X-Sentry-Relay-Signature request signatures and the
// stateless registration tokens Sentry mints during registration.
//
// Every encoding is unpadded base64 with the URL-safe alphabet, decoded
// strictly (no padding, no standard alphabet, no line breaks, no stray
// trailing bits), as Relay's relay-auth crate does.
//
// Errors are classified by three sentinels, always returned wrapped with
// detail: ErrMalformed (cannot be decoded at all), ErrBadSignature (well
// formed, but the signature or MAC does not match) and ErrExpired (valid, but
// its timestamp is too old or too far in the future). Test with errors.Is.
package relayauth

import "errors"

var (
	// ErrMalformed reports input that is not well formed: bad base64, wrong
	// length, invalid JSON, a signature without a header part, ...
	ErrMalformed = errors.New("relayauth: malformed")
	// ErrBadSignature reports a well-formed signature or token MAC that does
	// not match the data.
	ErrBadSignature = errors.New("relayauth: bad signature")
	// ErrExpired reports a valid signature or token whose timestamp is older
	// than the allowed maximum age (or too far in the future).
	ErrExpired = errors.New("relayauth: expired")
)
