package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Help is a program's --help: what it does, how it is called, examples,
// then its flags in groups, each written --name VALUE with its meaning
// and default, wrapped to Width.
type Help struct {
	// About says what the program does, a paragraph or two.
	About string
	// Usage are the ways to call it, one per line, shown as they are.
	Usage []string
	// Examples are shown before the flags.
	Examples []Example
	// Groups list every flag once, in the order shown.
	Groups []Group
	// After ends the help (e.g. the exit statuses), a paragraph or more.
	After string
}

// Group is a titled list of flags, by name without dashes.
type Group struct {
	Title string
	Flags []string
}

// Example is what a command does and the command: one or more lines,
// shown as they are (a command must fit Width less two columns).
type Example struct {
	What, Command string
}

// flagColumn is where a flag's meaning starts; a longer --name VALUE puts
// its meaning on the next line.
const flagColumn = 30

// Check reports flags of fs that no group lists, flags listed twice and
// names that fs does not define: a help that leaves a flag out or names
// one that is gone.
func (h Help) Check(fs *flag.FlagSet) error {
	var errs []error
	seen := map[string]bool{}
	for _, g := range h.Groups {
		for _, name := range g.Flags {
			switch {
			case fs.Lookup(name) == nil:
				errs = append(errs, fmt.Errorf("group %q lists --%s, which is not a flag", g.Title, name))
			case seen[name]:
				errs = append(errs, fmt.Errorf("--%s is listed twice", name))
			}
			seen[name] = true
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] {
			errs = append(errs, fmt.Errorf("--%s is in no group", f.Name))
		}
	})
	return errors.Join(errs...)
}

// CheckOutput reports what in out, the help as written, a reader should
// not meet: a line wider than Width, a flag in -flag form, or other than
// three examples.
func (h Help) CheckOutput(out string) error {
	var errs []error
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > Width {
			errs = append(errs, fmt.Errorf("line %d is %d wide: %q", i+1, n, l))
		}
		if strings.HasPrefix(l, "  -") && !strings.HasPrefix(l, "  --") {
			errs = append(errs, fmt.Errorf("a flag in -flag form: %q", l))
		}
	}
	if len(h.Examples) != 3 || strings.Count(out, "\n  # ") != 3 {
		errs = append(errs, fmt.Errorf("want three examples:\n%s", out))
	}
	return errors.Join(errs...)
}

// Write writes the help for the flags of fs. A flag in no group is shown
// under "Other flags" rather than hidden (Check finds it in a test).
func (h Help) Write(w io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	if h.About != "" {
		b.WriteString(Wrap(strings.TrimSpace(h.About), Width, "") + "\n\n")
	}
	if len(h.Usage) > 0 {
		b.WriteString("Usage:\n")
		for _, u := range h.Usage {
			b.WriteString("  " + u + "\n") // as it is, to be copied
		}
		b.WriteString("\n")
	}
	if len(h.Examples) > 0 {
		b.WriteString("Examples:\n")
		for i, e := range h.Examples {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString(Wrap("# "+e.What, Width, "  ") + "\n")
			// Commands are not wrapped, so that they can be copied.
			for _, line := range strings.Split(e.Command, "\n") {
				b.WriteString("  " + line + "\n")
			}
		}
		b.WriteString("\n")
	}
	listed := map[string]bool{}
	groups := slices.Clone(h.Groups)
	for _, g := range groups {
		for _, n := range g.Flags {
			listed[n] = true
		}
	}
	var other []string
	fs.VisitAll(func(f *flag.Flag) {
		if !listed[f.Name] {
			other = append(other, f.Name)
		}
	})
	if len(other) > 0 {
		groups = append(groups, Group{Title: "Other flags", Flags: other})
	}
	for _, g := range groups {
		b.WriteString(g.Title + ":\n")
		for _, name := range g.Flags {
			if f := fs.Lookup(name); f != nil {
				writeFlag(&b, f)
			}
		}
		b.WriteString("\n")
	}
	if h.After != "" {
		b.WriteString(Wrap(strings.TrimSpace(h.After), Width, "") + "\n")
	}
	io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
}

// writeFlag writes one flag: "  --name VALUE" then its meaning and
// default, wrapped at flagColumn.
func writeFlag(b *strings.Builder, f *flag.Flag) {
	value, usage := flag.UnquoteUsage(f)
	head := "  --" + f.Name
	if value != "" {
		head += " " + valueName(value)
	}
	if d := defaultOf(f); d != "" {
		usage += " (default " + d + ")"
	}
	pad := strings.Repeat(" ", flagColumn)
	text := Wrap(usage, Width, pad)
	if n := utf8.RuneCountInString(head); n+2 <= flagColumn {
		text = head + strings.Repeat(" ", flagColumn-n) + strings.TrimPrefix(text, pad)
	} else {
		text = head + "\n" + text
	}
	b.WriteString(text + "\n")
}

// valueName is the placeholder for a flag's value: a name the usage gives
// in `backquotes` as is, a type's name in capitals.
func valueName(v string) string {
	switch v {
	case "int", "uint":
		return "N"
	case "float":
		return "X"
	case "value", "string":
		return "VALUE"
	}
	return strings.ToUpper(v)
}

// defaultOf is a flag's default worth showing: not for a zero value.
func defaultOf(f *flag.Flag) string {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return ""
	}
	return f.DefValue
}

// ParseHelp is Parse with the help h: --help writes h for fs's flags to
// stdout and returns flag.ErrHelp.
func ParseHelp(fs *flag.FlagSet, args []string, stdout io.Writer, h Help) error {
	return parse(fs, args, func() { h.Write(stdout, fs) })
}
