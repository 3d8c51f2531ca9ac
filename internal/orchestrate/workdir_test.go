package orchestrate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// The work directories of runs whose process is gone (pid dead, or reused
// by another process) are removed; a live run's, a kept one and anything
// not marked stay.
func TestRemoveStaleWorkDirs(t *testing.T) {
	parent := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	self, err := processID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{ // name → owner ("": no mark)
		"relayload-dead":    fmt.Sprintf("%d 12345", gone.Process.Pid),
		"relayload-reused":  fmt.Sprintf("%d 1", os.Getpid()),
		"relayload-live":    self,
		"relayload-kept":    "",
		"relayload-garbled": "not a pid",
		"other-dead":        fmt.Sprintf("%d 12345", gone.Process.Pid),
	}
	for name, owner := range dirs {
		d := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(d, "config"), 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	removed := removeStaleWorkDirs(parent)
	slices.Sort(removed)
	want := []string{filepath.Join(parent, "relayload-dead"), filepath.Join(parent, "relayload-reused")}
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	for name := range dirs {
		_, err := os.Stat(filepath.Join(parent, name))
		if gone := os.IsNotExist(err); gone != slices.Contains(want, filepath.Join(parent, name)) {
			t.Errorf("%s: gone %v", name, gone)
		}
	}
	// A new work directory is marked with this process, unless kept.
	d, _, err := makeWorkDir(parent, false)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(d, ownerFile)); err != nil || string(b) != self+"\n" {
		t.Errorf("owner %q, %v; want %q", b, err, self)
	}
	d, _, err = makeWorkDir(parent, true)
	if _, serr := os.Stat(filepath.Join(d, ownerFile)); err != nil || !os.IsNotExist(serr) {
		t.Errorf("a kept work directory is marked (%v, %v)", err, serr)
	}
}
