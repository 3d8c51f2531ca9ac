// Package cli is the one convention of relayload's programs (blast,
// fake-upstream, orchestrate): flags parsed in one place, help on stdout
// (flags in groups, written --name, with examples: Help), bad input
// reported on stderr in one line that names the flag (and for a typo the
// flag meant) and points to --help, exit status 2 for it, a library's
// configuration errors (package configerr, which name Config fields)
// rendered with flag names, and text for people wrapped to Width columns.
//
// Exit statuses: 0 done, 1 failed, 2 bad usage, 3 inconclusive (a CI gate
// whose interval straddles its threshold), 130 interrupted.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/configerr"
)

// Exit statuses.
const (
	OK          = 0
	Failed      = 1
	Usage       = 2
	Interrupted = 130
	// Inconclusive: a CI gate could not tell (an interval straddles a
	// threshold); a larger budget may.
	Inconclusive = 3
)

// UsageError is bad input on the command line.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, a ...any) error {
	return &UsageError{fmt.Errorf(format, a...)}
}

// Parse parses args into fs. -h or --help writes header and the flags
// (--name VALUE, alphabetically) to stdout and returns flag.ErrHelp; a flag
// that cannot be parsed is a *UsageError that names it and says what it
// wants, and for an unknown flag the one it most likely meant (Suggest).
// ParseHelp does the same with a Help: flags in groups, and examples.
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer, header string) error {
	return parse(fs, args, func() {
		var b strings.Builder
		b.WriteString(header)
		fs.VisitAll(func(f *flag.Flag) { writeFlag(&b, f) })
		io.WriteString(stdout, b.String())
	})
}

// parse parses args into fs, calling help for -h or --help.
func parse(fs *flag.FlagSet, args []string, help func()) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		help()
		return err
	}
	if err != nil {
		return &UsageError{explain(fs, err)}
	}
	return nil
}

// explain rewrites the flag package's parse errors in the programs' words.
func explain(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		if s := Suggest(fs, name); s != "" {
			return fmt.Errorf("unknown flag --%s: did you mean --%s?", name, s)
		}
		return fmt.Errorf("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("--%s needs a value", strings.TrimPrefix(name, "-"))
	}
	if rest, ok := strings.CutPrefix(msg, "invalid boolean value "); ok {
		if val, rest, ok := cutQuoted(rest); ok {
			name, _, _ := strings.Cut(strings.TrimPrefix(rest, " for -"), ":")
			return fmt.Errorf("--%s %s: want true or false", name, val)
		}
	}
	// invalid value "V" for flag -NAME: CAUSE
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		return err
	}
	val, rest, ok := cutQuoted(rest)
	if !ok {
		return err
	}
	name, cause, _ := strings.Cut(strings.TrimPrefix(rest, " for flag -"), ": ")
	f := fs.Lookup(name)
	if f == nil {
		return err
	}
	var v any
	if g, ok := f.Value.(flag.Getter); ok {
		v = g.Get()
	}
	switch v.(type) {
	case bool:
		return fmt.Errorf("--%s %s: want true or false", name, val)
	case time.Duration:
		if _, numErr := strconv.ParseFloat(val, 64); numErr == nil {
			return fmt.Errorf("--%s %s: a duration needs a unit, e.g. %ss or %sms", name, val, val, val)
		}
		return fmt.Errorf("--%s %q: not a duration (e.g. 30s, 500ms, 1m)", name, val)
	case int, int64, uint, uint64:
		return fmt.Errorf("--%s %q: want a whole number", name, val)
	case float64:
		return fmt.Errorf("--%s %q: want a number", name, val)
	}
	if cause == "parse error" {
		return fmt.Errorf("--%s %q: invalid value", name, val)
	}
	return fmt.Errorf("--%s %s: %s", name, val, cause)
}

// cutQuoted reads a Go-quoted string at the start of s.
func cutQuoted(s string) (val, rest string, ok bool) {
	for i := 1; i < len(s); i++ {
		if s[i] == '"' && s[i-1] != '\\' {
			v, err := strconv.Unquote(s[:i+1])
			return v, s[i+1:], err == nil
		}
	}
	return "", s, false
}

// Exit reports err on stderr in one line, prefixed with prog, and returns
// the exit status: OK for nil and for help; Usage for a *UsageError or a
// configuration error (rendered with flags, Config field → flag name,
// e.g. "FindMax" → "--find-max"), pointing to --help; Failed otherwise.
// A message that already starts with prog's name does not repeat it.
func Exit(prog string, err error, stderr io.Writer, flags map[string]string) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return OK
	}
	status := Failed
	msg := err.Error()
	var ce *configerr.Error
	var ue *UsageError
	switch {
	case errors.As(err, &ce):
		status = Usage
		msg = ce.Render(func(field string) string {
			if f, ok := flags[field]; ok {
				return f
			}
			return field
		})
	case errors.As(err, &ue):
		status = Usage
	}
	msg = strings.TrimPrefix(msg, prog+": ")
	if status == Usage {
		msg += " (see --help)"
	}
	fmt.Fprintf(stderr, "%s: %s\n", prog, msg)
	return status
}

// List is a flag of values given comma-separated, repeated, or both.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

// Set adds the comma-separated values of s.
func (l *List) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// Repeated is a flag given once per value, each value taken whole (a
// quota's categories are ';'-separated and its reason may hold commas).
type Repeated []string

func (r *Repeated) String() string { return strings.Join(*r, " ") }

// Set adds s.
func (r *Repeated) Set(s string) error {
	*r = append(*r, s)
	return nil
}

// Positive is a UsageError unless d > 0: a zero duration would otherwise
// silently mean a library default.
func Positive(flagName string, d time.Duration) error {
	if d <= 0 {
		return Usagef("%s %s: want a duration above 0", flagName, d)
	}
	return nil
}

// AtLeast is a UsageError unless n >= min.
func AtLeast(flagName string, n, min int) error {
	if n < min {
		return Usagef("%s %d: want %d or more", flagName, n, min)
	}
	return nil
}
