package relayauth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"strings"
)

// Text lengths of Relay's key encodings (unpadded base64url).
const (
	publicKeyLen     = 43 // 32 bytes
	secretSeedLen    = 43 // 32-byte seed
	secretKeypairLen = 86 // 64 bytes = seed ‖ public key
)

// SecretKey is a Relay secret key (an Ed25519 private key). The zero value
// is not a key (signing with it panics); obtain one from GenerateKey or
// ParseSecretKey.
type SecretKey struct {
	priv ed25519.PrivateKey
}

// PublicKey is a Relay public key (an Ed25519 public key). The zero value is
// not a key; obtain one from ParsePublicKey or SecretKey.Public.
type PublicKey struct {
	pub ed25519.PublicKey
}

// b64 is Relay's encoding: URL-safe alphabet, no padding, strict trailing bits.
var b64 = base64.RawURLEncoding.Strict()

// decodeB64 decodes s strictly. encoding/base64 silently skips CR and LF even
// in strict mode; Relay's decoder does not, so they are rejected here.
func decodeB64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, fmt.Errorf("%w: line break in base64", ErrMalformed)
	}
	b, err := b64.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: bad base64url encoding: %w", ErrMalformed, err)
	}
	return b, nil
}

// GenerateKey makes a new key pair from 32 bytes of r (crypto/rand if r is nil).
// A deterministic r gives a deterministic key.
func GenerateKey(r io.Reader) (SecretKey, error) {
	if r == nil {
		r = rand.Reader
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(r, seed); err != nil {
		return SecretKey{}, fmt.Errorf("relayauth: reading key seed: %w", err)
	}
	return SecretKey{priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// ParseSecretKey parses a secret key in either of Relay's forms: the 43-char
// seed form (what Relay writes) or the 86-char keypair form (seed ‖ public
// key), whose second half must be the public key of the first.
func ParseSecretKey(s string) (SecretKey, error) {
	if len(s) != secretSeedLen && len(s) != secretKeypairLen {
		return SecretKey{}, fmt.Errorf("%w: secret key is %d chars, want %d or %d", ErrMalformed, len(s), secretSeedLen, secretKeypairLen)
	}
	b, err := decodeB64(s)
	if err != nil {
		return SecretKey{}, fmt.Errorf("secret key: %w", err)
	}
	priv := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
	if len(b) == ed25519.PrivateKeySize && !bytes.Equal(priv[ed25519.SeedSize:], b[ed25519.SeedSize:]) {
		return SecretKey{}, fmt.Errorf("%w: keypair-form secret key: second half is not the public key of the seed", ErrMalformed)
	}
	return SecretKey{priv: priv}, nil
}

// ParsePublicKey parses a 43-char public key. Like Relay (ed25519-dalek), it
// rejects 32-byte strings that do not decode to a point on the curve.
func ParsePublicKey(s string) (PublicKey, error) {
	if len(s) != publicKeyLen {
		return PublicKey{}, fmt.Errorf("%w: public key is %d chars, want %d", ErrMalformed, len(s), publicKeyLen)
	}
	b, err := decodeB64(s)
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key: %w", err)
	}
	if !onCurve(b) {
		return PublicKey{}, fmt.Errorf("%w: public key is not an Ed25519 curve point", ErrMalformed)
	}
	return PublicKey{pub: ed25519.PublicKey(b)}, nil
}

// String returns the 43-char seed form, the form Relay writes.
func (k SecretKey) String() string {
	if len(k.priv) != ed25519.PrivateKeySize {
		return ""
	}
	return b64.EncodeToString(k.priv.Seed())
}

// Public returns the public key belonging to k.
func (k SecretKey) Public() PublicKey {
	if len(k.priv) != ed25519.PrivateKeySize {
		return PublicKey{}
	}
	return PublicKey{pub: ed25519.PublicKey(bytes.Clone(k.priv[ed25519.SeedSize:]))}
}

// String returns the 43-char text form.
func (k PublicKey) String() string {
	if len(k.pub) != ed25519.PublicKeySize {
		return ""
	}
	return b64.EncodeToString(k.pub)
}

// Equal reports whether k and o are the same key.
func (k PublicKey) Equal(o PublicKey) bool {
	return bytes.Equal(k.pub, o.pub)
}

// Curve constants for the point check: p = 2^255-19, d = -121665/121666 mod p.
var (
	curveP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	curveD = func() *big.Int {
		d := new(big.Int).ModInverse(big.NewInt(121666), curveP)
		d.Mul(d, big.NewInt(-121665))
		return d.Mod(d, curveP)
	}()
)

// onCurve reports whether the 32-byte compressed Edwards point decompresses
// the way curve25519-dalek does it: y is taken mod p (sign bit ignored) and
// x² = (y²-1)/(d·y²+1) must have a square root. Legendre(u/v) = Legendre(u·v).
func onCurve(b []byte) bool {
	le := bytes.Clone(b)
	le[31] &= 0x7f
	for i, j := 0, len(le)-1; i < j; i, j = i+1, j-1 {
		le[i], le[j] = le[j], le[i]
	}
	y := new(big.Int).SetBytes(le)
	y2 := new(big.Int).Mul(y, y)
	y2.Mod(y2, curveP)
	u := new(big.Int).Sub(y2, big.NewInt(1))
	v := new(big.Int).Mul(curveD, y2)
	v.Add(v, big.NewInt(1))
	u.Mul(u, v)
	u.Mod(u, curveP)
	return big.Jacobi(u, curveP) >= 0
}
