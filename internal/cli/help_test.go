package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// helpFlags is a small program's flags and its help.
func helpFlags() (*flag.FlagSet, Help) {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.String("target", "", "base `URL` to send to")
	fs.String("rates", "", "target envelopes per second, comma-separated, or max: as fast as the other side answers, "+
		"with as many senders as --concurrency says (with --find-max: the two bounds of the search)")
	fs.Duration("duration", 30*time.Second, "measured window")
	fs.Bool("keep", false, "keep the work directory")
	fs.Int("rounds", 1, "rounds")
	fs.String("out", "", "write the report into `DIR`")
	fs.String("relay-bin", "", "Relay binary")
	fs.String("relay-name", "baseline", "name of --relay-bin")
	h := Help{
		About: "prog sends envelopes.",
		Usage: []string{"prog --target URL [flags]"},
		Examples: []Example{
			{"one rate", "prog --target http://127.0.0.1:3000 --rates 100"},
			{"two rates, kept", "prog --target http://127.0.0.1:3000 --rates 100,200 --keep"},
			{"a report", "prog --target http://127.0.0.1:3000 --rates 100 --out out/"},
		},
		Groups: []Group{
			{"Traffic", []string{"target", "rates", "duration", "rounds"}},
			{"Relay", []string{"relay-bin", "relay-name"}},
			{"Output", []string{"out", "keep"}},
		},
		After: "Exit status: 0 done, 2 bad usage.",
	}
	return fs, h
}

func TestHelpGroups(t *testing.T) {
	fs, h := helpFlags()
	if err := h.Check(fs); err != nil {
		t.Fatalf("check: %v", err)
	}
	var out bytes.Buffer
	if err := ParseHelp(fs, []string{"--help"}, &out, h); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	help := out.String()
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n > Width {
			t.Errorf("line %d is %d wide: %q", i+1, n, l)
		}
	}
	// Groups in the order given, each flag under its group, in --name form
	// with its value's name and a default that is not zero.
	pos := func(s string) int {
		i := strings.Index(help, s)
		if i < 0 {
			t.Errorf("help lacks %q:\n%s", s, help)
		}
		return i
	}
	order := []string{"Usage:\n  prog --target URL [flags]", "Examples:", "  # one rate\n  prog --target http://127.0.0.1:3000 --rates 100\n",
		"Traffic:\n  --target URL", "  --rates VALUE", "  --duration DURATION", "measured window (default 30s)", "  --rounds N",
		"Relay:\n  --relay-bin VALUE", "name of --relay-bin (default baseline)", "Output:\n  --out DIR", "  --keep ", "Exit status:"}
	last := -1
	for _, s := range order {
		if i := pos(s); i >= 0 && i < last {
			t.Errorf("%q is out of order:\n%s", s, help)
		} else {
			last = i
		}
	}
	if n := strings.Count(help, "\n  # "); n != 3 {
		t.Errorf("%d examples, want 3", n)
	}
	if strings.Contains(help, "(default false)") || strings.Contains(help, "(default 1)") == false {
		t.Errorf("defaults: zero values shown or others missing:\n%s", help)
	}
	// A long meaning wraps under its column, not under the flag.
	for _, l := range lines {
		if strings.HasPrefix(l, " ") && !strings.HasPrefix(strings.TrimSpace(l), "-") && !strings.HasPrefix(strings.TrimSpace(l), "#") &&
			!strings.HasPrefix(strings.TrimSpace(l), "prog") && !strings.HasPrefix(l, strings.Repeat(" ", flagColumn)) {
			t.Errorf("continuation not under the meanings' column: %q", l)
		}
	}
}

// TestHelpCheck: a flag left out of every group, one listed twice and a
// name that is no flag are each found; the help still shows every flag.
func TestHelpCheck(t *testing.T) {
	fs, h := helpFlags()
	h.Groups[2].Flags = []string{"out"}                                 // keep in no group
	h.Groups[1].Flags = append(h.Groups[1].Flags, "relay-bin", "relay") // twice, and no flag
	err := h.Check(fs)
	for _, want := range []string{"--keep is in no group", "--relay-bin is listed twice", `group "Relay" lists --relay, which is not a flag`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("check: %v, want %q", err, want)
		}
	}
	var out bytes.Buffer
	h.Write(&out, fs)
	if !strings.Contains(out.String(), "Other flags:\n  --keep") {
		t.Errorf("a flag in no group is hidden:\n%s", out.String())
	}
}

func TestSuggest(t *testing.T) {
	fs, _ := helpFlags()
	fs.Bool("find-max", false, "")
	for _, tc := range []struct{ typed, want string }{
		{"rate", "rates"},             // one letter short
		{"duraton", "duration"},       // one letter left out
		{"druation", "duration"},      // two letters swapped
		{"find_max", "find-max"},      // underscore
		{"relaybin", "relay-bin"},     // dash left out
		{"relay-binary", "relay-bin"}, // a flag and more
		{"relay", ""},                 // the start of two flags
		{"tar", "target"},             // the start of one
		{"outdir", "out"},             // a flag and more
		{"kep", "keep"},               // short names: one edit
		{"kip", ""},                   // two edits is too far for a short name
		{"verbose", ""},               // nothing close
		{"Duration", "duration"},      // case
		{"rounds-max", "rounds"},      // a flag and more
		{"target-url", "target"},      // likewise
		{"relay-nam", "relay-name"},   // one short
	} {
		if got := Suggest(fs, tc.typed); got != tc.want {
			t.Errorf("Suggest(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
	// The parse error names the flag meant, on one line.
	err := Parse(fs, []string{"--rate", "100"}, &bytes.Buffer{}, "")
	var ue *UsageError
	if !errors.As(err, &ue) || err.Error() != "unknown flag --rate: did you mean --rates?" {
		t.Errorf("--rate: %v", err)
	}
	var b bytes.Buffer
	if code := Exit("prog", err, &b, nil); code != Usage || b.String() != "prog: unknown flag --rate: did you mean --rates? (see --help)\n" {
		t.Errorf("exit %d, %q", code, b.String())
	}
}

func TestWrap(t *testing.T) {
	text := "forwarded/s: data envelopes that reached the fake upstream per second over the measured window.\n\nbacklog: " +
		strings.Repeat("x", 30) + " end"
	got := Wrap(text, 24, "  ")
	want := "  forwarded/s: data\n  envelopes that reached\n  the fake upstream per\n  second over the\n  measured window.\n\n" +
		"  backlog:\n  xxxxxxxxxxxxxxxxxxxxxx\n  xxxxxxxx end"
	if got != want {
		t.Errorf("wrap:\n%s\nwant\n%s", got, want)
	}
	var b bytes.Buffer
	w := WrapLines(&b, 30)
	_, _ = w.Write([]byte("step 1: harness, round 1, 4000/s\n  kept up: sent 4000/s, accepted 4000/s, forwarded 4000/s, p99 6.0 ms\n  dr"))
	_, _ = w.Write([]byte("ain\n"))
	want = "step 1: harness, round 1,\n    4000/s\n  kept up: sent 4000/s,\n      accepted 4000/s,\n" +
		"      forwarded 4000/s, p99\n      6.0 ms\n  drain\n"
	if b.String() != want {
		t.Errorf("wrapped lines:\n%s\nwant\n%s", b.String(), want)
	}
}

// TestCheckOutput: a help as written is refused for a line wider than
// Width, a flag in -flag form, or other than three examples.
func TestCheckOutput(t *testing.T) {
	h := Help{Examples: []Example{{What: "a", Command: "x"}, {What: "b", Command: "x"}, {What: "c", Command: "x"}}}
	good := "Examples:\n  # a\n  x\n  # b\n  x\n  # c\n  x\n  --rate N  sends\n"
	for _, tc := range []struct {
		name, out, want string
	}{
		{"good", good, ""},
		{"wide", good + strings.Repeat("x", Width+1) + "\n", "wide"},
		{"single dash", good + "  -rate N\n", "-flag form"},
		{"two examples", "Examples:\n  # a\n  x\n  # b\n  x\n", "three examples"},
	} {
		err := h.CheckOutput(tc.out)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
