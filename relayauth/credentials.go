package relayauth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/uuid"
)

// Credentials is Relay's credentials.json: the fields Relay reads, in the
// order Relay writes them.
type Credentials struct {
	SecretKey string `json:"secret_key"`
	PublicKey string `json:"public_key"`
	ID        string `json:"id"`
}

// GenerateCredentials makes a fresh key pair and a random UUID v4 relay id,
// both read from r (crypto/rand if r is nil).
func GenerateCredentials(r io.Reader) (Credentials, error) {
	sk, err := GenerateKey(r)
	if err != nil {
		return Credentials{}, err
	}
	var id uuid.UUID
	if r == nil {
		id, err = uuid.NewRandom()
	} else {
		id, err = uuid.NewRandomFromReader(r)
	}
	if err != nil {
		return Credentials{}, fmt.Errorf("relayauth: generating relay id: %w", err)
	}
	return Credentials{SecretKey: sk.String(), PublicKey: sk.Public().String(), ID: id.String()}, nil
}

// LoadCredentials reads and validates a credentials file: both keys must
// parse and belong together, and id must be a UUID.
func LoadCredentials(path string) (Credentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("relayauth: %w", err)
	}
	var c Credentials
	if err := json.Unmarshal(b, &c); err != nil {
		return Credentials{}, fmt.Errorf("%w: credentials %s: %w", ErrMalformed, path, err)
	}
	if _, _, err := c.Keys(); err != nil {
		return Credentials{}, fmt.Errorf("credentials %s: %w", path, err)
	}
	if _, err := uuid.Parse(c.ID); err != nil {
		return Credentials{}, fmt.Errorf("%w: credentials %s: id %q is not a UUID", ErrMalformed, path, c.ID)
	}
	return c, nil
}

// Save writes c as Relay does: pretty JSON (2-space indent, trailing newline),
// mode 0600. The file is written to a temporary file in the same directory
// and renamed into place, so readers never see a partial file.
func (c Credentials) Save(path string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil { // Encode appends the trailing newline
		return fmt.Errorf("relayauth: encoding credentials: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".credentials-*.tmp") // created 0600
	if err != nil {
		return fmt.Errorf("relayauth: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("relayauth: %w", err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("relayauth: writing %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("relayauth: writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("relayauth: %w", err)
	}
	return nil
}

// Keys parses both keys and checks that the public key belongs to the secret key.
func (c Credentials) Keys() (SecretKey, PublicKey, error) {
	sk, err := ParseSecretKey(c.SecretKey)
	if err != nil {
		return SecretKey{}, PublicKey{}, err
	}
	pk, err := ParsePublicKey(c.PublicKey)
	if err != nil {
		return SecretKey{}, PublicKey{}, err
	}
	if !sk.Public().Equal(pk) {
		return SecretKey{}, PublicKey{}, fmt.Errorf("%w: public_key %s does not belong to secret_key", ErrMalformed, c.PublicKey)
	}
	return sk, pk, nil
}
