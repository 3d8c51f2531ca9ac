package report

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
)

// CheckDir checks that dir is, or can be made, a directory whose files can
// be written, without making it. Call it before a sweep, so that an output
// directory that cannot be written fails before anything runs instead of
// after.
func CheckDir(dir string) error {
	// The nearest existing directory on the way: dir itself, or the
	// ancestor it would be made in.
	at := dir
	for {
		st, err := os.Stat(at)
		if err == nil && !st.IsDir() {
			if at == dir {
				return fmt.Errorf("%s is a file, not a directory", dir)
			}
			return fmt.Errorf("cannot make directory %s: %s: not a directory", dir, at)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("cannot make directory %s: %v", dir, err)
		}
		parent := filepath.Dir(at)
		if parent == at {
			return fmt.Errorf("cannot make directory %s: no existing ancestor", dir)
		}
		at = parent
	}
	f, err := os.CreateTemp(at, tempPattern)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("cannot write in %s: %v", at, pe.Err)
		}
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// tempPattern names the temporary files written files are made in.
const tempPattern = ".relayload-*.tmp"

// WriteFile writes path with fn into a temporary file in the same
// directory, synced and renamed over path once complete: a crash while
// writing leaves the earlier file (or none), never a truncated one that
// looks whole.
func WriteFile(path string, fn func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), tempPattern)
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = fn(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// ownFile matches the names of the files Write writes.
var ownFile = regexp.MustCompile(`^(` + regexp.QuoteMeta(JSONFile) + `|` + regexp.QuoteMeta(CSVFile) + `|` + regexp.QuoteMeta(MarkdownFile) +
	`|` + regexp.QuoteMeta(CPUChart) + `|` + regexp.QuoteMeta(LatencyChart) + `|` + regexp.QuoteMeta(RSSChart) +
	`|step-[0-9]{2,}\.svg)$`)

// clearStale removes the files of an earlier report in dir that this one
// did not write (written: their paths), e.g. the chart of a step the
// earlier run had and this one has not; other files are left alone.
func clearStale(dir string, written []string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, p := range written {
		keep[filepath.Base(p)] = true
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if e.Type().IsRegular() && ownFile.MatchString(name) && !keep[name] {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
