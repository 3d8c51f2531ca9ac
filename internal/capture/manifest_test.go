package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestReadManifestFixture(t *testing.T) {
	got, err := ReadManifest("testdata")
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{File: "00000000.envelope", Route: "envelope", ReceivedAt: time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC), ProjectID: 42,
			PublicKey: "0123456789abcdef0123456789abcdef", UserAgent: "sentry.python/2.0", Encoding: "gzip",
			Items: map[string]int{"event": 1, "attachment": 2}, Bytes: 512, WireBytes: 300},
		{File: "00000001.envelope", Route: "envelope", ReceivedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC), ProjectID: 43,
			PublicKey: "fedcba9876543210fedcba9876543210", FromRelay: true, ForwardedFor: "10.0.0.1",
			Items: map[string]int{"transaction": 1}, Bytes: 128, WireBytes: 128},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadManifest:\n got %+v\nwant %+v", got, want)
	}
	if _, err := ReadManifest(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a directory without a manifest: %v, want ErrNotExist", err)
	}
}

func TestDecodeManifest(t *testing.T) {
	whole, err := os.ReadFile(filepath.Join("testdata", ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	killed, err := os.ReadFile(filepath.Join("testdata", "killed.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(whole), "\n")
	tests := []struct {
		name    string
		in      string
		files   []string // nil with errLine
		errLine string   // "" for success, else the error names it
	}{
		{"empty", "", []string{}, ""},
		{"two lines", string(whole), []string{"00000000.envelope", "00000001.envelope"}, ""},
		{"no final newline, whole", strings.TrimSuffix(string(whole), "\n"), []string{"00000000.envelope", "00000001.envelope"}, ""},
		{"killed mid-line", string(killed), []string{"00000000.envelope"}, ""},
		{"blank lines", "\n" + first + "\n\n", []string{"00000000.envelope"}, ""},
		{"CRLF", first + "\r\n", []string{"00000000.envelope"}, ""},
		{"bad JSON inside", first + "\n{\n" + first + "\n", nil, "line 2"},
		{"bad JSON after a blank line", "\n\nnope\n", nil, "line 3"},
		{"missing file", `{"route":"envelope"}` + "\n", nil, "line 1"},
		{"absolute file", `{"file":"/etc/passwd"}` + "\n", nil, "line 1"},
		{"file in a subdirectory", `{"file":"a/b.envelope"}` + "\n", nil, "line 1"},
		{"file up a directory", `{"file":"../x.envelope"}` + "\n", nil, "line 1"},
		{"file the directory", `{"file":"."}` + "\n", nil, "line 1"},
		{"file its parent", `{"file":".."}` + "\n", nil, "line 1"},
		{"wrong type", `{"file":"x","bytes":"many"}` + "\n", nil, "line 1"},
		{"line too long", first + "\n" + `{"file":"x","user_agent":"` + strings.Repeat("a", MaxManifestLine) + `"}` + "\n", nil, "line 2: longer than"},
		{"tail too long", `{"file":"x","user_agent":"` + strings.Repeat("a", MaxManifestLine), nil, "line 1: longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeManifest(strings.NewReader(tc.in))
			if tc.errLine != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errLine) {
					t.Fatalf("err %v, want one naming %q", err, tc.errLine)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			files := []string{}
			for _, e := range got {
				files = append(files, e.File)
			}
			if !reflect.DeepEqual(files, tc.files) {
				t.Errorf("files %v, want %v", files, tc.files)
			}
		})
	}
}

// TestDecodeManifestLongestLine: a line of exactly MaxManifestLine bytes
// reads; one byte more does not.
func TestDecodeManifestLongestLine(t *testing.T) {
	pre, post := `{"file":"x","user_agent":"`, `"}`
	for _, extra := range []int{0, 1} {
		line := pre + strings.Repeat("a", MaxManifestLine-len(pre)-len(post)+extra) + post
		_, err := DecodeManifest(strings.NewReader(line + "\n"))
		if (err == nil) != (extra == 0) {
			t.Errorf("line of %d bytes: %v", len(line), err)
		}
	}
}

func FuzzDecodeManifest(f *testing.F) {
	for _, name := range []string{ManifestName, "killed.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"", "\n", "{}\n", `{"file":"a"}`, `{"file":"a"}` + "\n" + `{"file":`, `{"file":"../a"}`, "{\"file\":\"a\"}\r\n\n", `[1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := DecodeManifest(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What decodes is well formed, and reads back the same once
		// written out again.
		var out bytes.Buffer
		for _, e := range entries {
			if e.File == "" || e.File == "." || e.File == ".." || e.File != filepath.Base(e.File) || filepath.IsAbs(e.File) {
				t.Fatalf("accepted file %q", e.File)
			}
			line, err := json.Marshal(e)
			if err != nil {
				t.Fatalf("entry %+v does not marshal: %v", e, err)
			}
			out.Write(line)
			out.WriteByte('\n')
		}
		again, err := DecodeManifest(bytes.NewReader(out.Bytes()))
		if err != nil || len(again) != len(entries) {
			t.Fatalf("written back: %d entries, %v; want %d", len(again), err, len(entries))
		}
		for i := range again {
			a, _ := json.Marshal(again[i])
			e, _ := json.Marshal(entries[i])
			if !bytes.Equal(a, e) {
				t.Fatalf("entry %d: %s, then %s", i, e, a)
			}
		}
	})
}
