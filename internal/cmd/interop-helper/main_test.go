package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayload/relayload/relayauth"
)

// The exit-code contract the interop suite relies on: 0 ok, 1 rejected, 2 usage.
func TestRunExitCodes(t *testing.T) {
	var creds relayauth.Credentials
	var out bytes.Buffer
	if rc := run([]string{"keygen"}, &out, &bytes.Buffer{}); rc != 0 {
		t.Fatalf("keygen exit %d", rc)
	}
	if err := json.Unmarshal(out.Bytes(), &creds); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	os.WriteFile(data, []byte("payload"), 0o600)
	out.Reset()
	if rc := run([]string{"sign", "--secret", creds.SecretKey, "--data-file", data}, &out, &bytes.Buffer{}); rc != 0 {
		t.Fatalf("sign exit %d", rc)
	}
	sig := strings.TrimSpace(out.String())

	for _, tc := range []struct {
		name   string
		args   []string
		rc     int
		prefix string
	}{
		{"no subcommand", nil, 2, ""},
		{"unknown subcommand", []string{"nope"}, 2, ""},
		{"bad flag", []string{"verify", "--bogus"}, 2, ""},
		{"stray argument", []string{"keygen", "extra"}, 2, ""},
		{"valid", []string{"verify", "--public", creds.PublicKey, "--data-file", data, "--sig", sig, "--max-age", "1m"}, 0, "ok"},
		{"tampered", []string{"verify", "--public", creds.PublicKey, "--data-file", data, "--sig", "A" + sig[1:]}, 1, "bad_signature:"},
		{"no header", []string{"verify", "--public", creds.PublicKey, "--data-file", data, "--sig", sig[:86]}, 1, "malformed:"},
		{"missing data file", []string{"verify", "--public", creds.PublicKey, "--data-file", data + ".missing", "--sig", sig}, 2, ""},
		{"bad token", []string{"validate-token", "--secret", "s", "--token", "a:b"}, 1, "malformed:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if rc := run(tc.args, &stdout, &stderr); rc != tc.rc {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", rc, tc.rc, stdout.String(), stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), tc.prefix) {
				t.Errorf("stdout %q, want prefix %q", stdout.String(), tc.prefix)
			}
			if tc.rc == 2 && strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("usage errors print one line, got %q", stderr.String())
			}
		})
	}
}
