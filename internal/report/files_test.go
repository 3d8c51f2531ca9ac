package report

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/relayload/relayload/internal/orchestrate"
)

// A rerun into the same directory with fewer steps leaves no chart of the
// earlier run's steps beside the new report; files that are not a
// report's are left alone.
func TestWriteReplacesEarlierReport(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(dir, sample()); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := sample()
	rep.Steps = rep.Steps[:2]
	paths, err := Write(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "notes.txt") {
		t.Errorf("a file not of the report was removed: %v", names)
	}
	for _, n := range names {
		if n == "notes.txt" {
			continue
		}
		if !slices.Contains(paths, filepath.Join(dir, n)) {
			t.Errorf("%s is left from the earlier run (written now: %v)", n, paths)
		}
	}
	if !slices.Contains(names, "step-02.svg") || slices.Contains(names, "step-03.svg") {
		t.Errorf("files %v: want step-01 and step-02 charts only", names)
	}
}

// A report that fails half way (a value JSON cannot hold) leaves the
// earlier results.json whole, and no temporary file.
func TestWriteWholeOrNothing(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(dir, sample()); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, JSONFile))
	rep := sample()
	rep.Steps[0].CPU.LoadCores = math.NaN()
	if _, err := Write(dir, rep); err == nil || !strings.Contains(err.Error(), JSONFile) {
		t.Fatalf("err %v, want one naming %s", err, JSONFile)
	}
	after, _ := os.ReadFile(filepath.Join(dir, JSONFile))
	var back orchestrate.Report
	if err := json.Unmarshal(after, &back); err != nil || string(after) != string(before) {
		t.Errorf("results.json after a failed write: %d bytes (was %d), %v", len(after), len(before), err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, err string
	}{
		{filepath.Join(dir, "new", "deeper"), ""},
		{dir, ""},
		{file, "is a file, not a directory"},
		{filepath.Join(file, "sub"), "not a directory"},
	} {
		err := CheckDir(tc.dir)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckDir(%s) = %v, want %q", tc.dir, err, tc.err)
		}
	}
	// It makes nothing: no directory, no file left behind.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("CheckDir left files: %v", ents)
	}
}
