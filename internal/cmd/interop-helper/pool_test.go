package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDumpPoolAndParseEnvelope(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if rc := run([]string{"dump-pool", "--dir", dir, "--size", "20", "--now", "2026-01-01T00:00:00Z"}, &out, &errb); rc != 0 {
		t.Fatalf("dump-pool exit %d: %s", rc, errb.String())
	}
	var res struct {
		Entries  int
		Hash     string
		Canaries []struct{ Name, Code, Expect string }
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Entries != 20 || len(res.Hash) != 64 || len(res.Canaries) == 0 {
		t.Fatalf("dump-pool output %s (%v)", out.String(), err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.envelope"))
	if len(files) != 20 {
		t.Fatalf("%d envelope files", len(files))
	}
	out.Reset()
	if rc := run(append([]string{"parse-envelope"}, files...), &out, &errb); rc != 0 {
		t.Fatalf("parse-envelope exit %d: %s", rc, errb.String())
	}
	var parsed map[string]parsedEnvelope
	if err := json.Unmarshal(out.Bytes(), &parsed); err != nil || len(parsed) != 20 {
		t.Fatalf("parse-envelope output: %v", err)
	}
	for f, p := range parsed {
		if len(p.Items) == 0 || len(p.Scan) != len(p.Items) || p.Items[0].Type != p.Scan[0] {
			t.Fatalf("%s: %+v", f, p)
		}
	}

	bad := filepath.Join(dir, "bad.envelope")
	os.WriteFile(bad, []byte("{}\n{\"type\":\"event\",\"length\":99}\nshort\n"), 0o600)
	out.Reset()
	if rc := run([]string{"parse-envelope", bad}, &out, &errb); rc != 1 || !strings.HasPrefix(out.String(), "malformed:") {
		t.Fatalf("bad envelope: exit %d, %q", rc, out.String())
	}
	for _, args := range [][]string{
		{"dump-pool"},
		{"dump-pool", "--dir", dir, "--mix", "spans=1"},
		{"dump-pool", "--dir", dir, "--encoding", "lz4"},
		{"dump-pool", "--dir", dir, "--now", "yesterday"},
		{"parse-envelope"},
		{"parse-envelope", filepath.Join(dir, "missing")},
	} {
		if rc := run(args, &bytes.Buffer{}, &bytes.Buffer{}); rc != 2 {
			t.Errorf("%v: exit %d, want 2", args, rc)
		}
	}
}
