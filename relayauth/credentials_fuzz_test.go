package relayauth

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
)

// FuzzLoadCredentials: whatever credentials.json holds, LoadCredentials
// either rejects it with ErrMalformed or returns credentials whose keys
// belong together and whose id is a UUID, and that survive Save and Load.
func FuzzLoadCredentials(f *testing.F) {
	c, err := GenerateCredentials(&counterReader{})
	if err != nil {
		f.Fatal(err)
	}
	good := `{"secret_key":"` + c.SecretKey + `","public_key":"` + c.PublicKey + `","id":"` + c.ID + `"}`
	for _, s := range []string{good, `{}`, `[]`, `null`, `{"secret_key":"` + testKeypair + `","public_key":"` + testPublic + `","id":"not-a-uuid"}`,
		`{"secret_key":"` + testSeed + `","public_key":"` + testPublic + `","id":"` + c.ID + `","extra":1}`,
		`{"secret_key":"` + testSeed + `","public_key":"` + c.PublicKey + `","id":"` + c.ID + `"}`} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "in.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := LoadCredentials(path)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if _, _, err := got.Keys(); err != nil {
			t.Fatalf("loaded credentials with bad keys: %v", err)
		}
		if _, err := uuid.Parse(got.ID); err != nil {
			t.Fatalf("loaded id %q: %v", got.ID, err)
		}
		out := filepath.Join(dir, "out.json")
		if err := got.Save(out); err != nil {
			t.Fatal(err)
		}
		again, err := LoadCredentials(out)
		if err != nil || again != got {
			t.Fatalf("Save/Load: %+v, %v; want %+v", again, err, got)
		}
	})
}
