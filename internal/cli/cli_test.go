package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/configerr"
)

func flags() *flag.FlagSet {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.Duration("duration", time.Second, "measured window")
	fs.Int("rounds", 1, "rounds")
	fs.Float64("zipf-s", 1.1, "exponent")
	fs.Bool("keep", false, "keep")
	fs.String("rates", "", "rates")
	var l List
	fs.Var(&l, "mix", "kinds")
	fs.Func("quota", "a quota", func(s string) error { return errors.New("want CATEGORIES[:LIMIT]") })
	return fs
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "unknown flag --nope"},
		{[]string{"-nope"}, "unknown flag --nope"},
		{[]string{"--duration", "5"}, "--duration 5: a duration needs a unit, e.g. 5s or 5ms"},
		{[]string{"--duration", "soon"}, `--duration "soon": not a duration (e.g. 30s, 500ms, 1m)`},
		{[]string{"--rounds", "two"}, `--rounds "two": want a whole number`},
		{[]string{"--zipf-s", "x"}, `--zipf-s "x": want a number`},
		{[]string{"--keep=maybe"}, "--keep maybe: want true or false"},
		{[]string{"--rates"}, "--rates needs a value"},
		{[]string{"--quota", "x"}, "--quota x: want CATEGORIES[:LIMIT]"},
	} {
		err := Parse(flags(), tc.args, &bytes.Buffer{}, "")
		var ue *UsageError
		if !errors.As(err, &ue) || err.Error() != tc.want {
			t.Errorf("%v: %v, want usage error %q", tc.args, err, tc.want)
		}
	}
	var out bytes.Buffer
	if err := Parse(flags(), []string{"--help"}, &out, "Usage: prog [flags]\n"); !errors.Is(err, flag.ErrHelp) ||
		!strings.HasPrefix(out.String(), "Usage: prog [flags]\n") || !strings.Contains(out.String(), "-duration") {
		t.Errorf("help: %v\n%s", err, out.String())
	}
	if err := Parse(flags(), []string{"--duration", "2s", "--mix", "a,b", "--mix", "c"}, &out, ""); err != nil {
		t.Errorf("good flags: %v", err)
	}
}

func TestExit(t *testing.T) {
	fl := map[string]string{"FindMax": "--find-max", "Rates": "--rates"}
	for _, tc := range []struct {
		err    error
		status int
		line   string
	}{
		{nil, OK, ""},
		{flag.ErrHelp, OK, ""},
		{Usagef("unknown flag --x"), Usage, "prog: unknown flag --x (see --help)\n"},
		{configerr.New("FindMax", "wants two %s", "Rates"), Usage, "prog: --find-max: wants two --rates (see --help)\n"},
		{fmt.Errorf("orchestrate: %w", configerr.New("Seed", "odd")), Usage, "prog: Seed: odd (see --help)\n"}, // the error says it all
		{errors.New("prog: open x.json: no such file"), Failed, "prog: open x.json: no such file\n"},
		{errors.New("relay exited"), Failed, "prog: relay exited\n"},
	} {
		var b bytes.Buffer
		if got := Exit("prog", tc.err, &b, fl); got != tc.status || b.String() != tc.line {
			t.Errorf("%v: status %d, line %q; want %d, %q", tc.err, got, b.String(), tc.status, tc.line)
		}
	}
}

func TestListAndRepeated(t *testing.T) {
	var l List
	_ = l.Set("a, b,,c")
	_ = l.Set("d")
	var r Repeated
	_ = r.Set("error;transaction:0")
	_ = r.Set("a,b")
	if l.String() != "a,b,c,d" || len(r) != 2 || r[1] != "a,b" {
		t.Errorf("list %q, repeated %q", l, r)
	}
	if Positive("--duration", 0) == nil || Positive("--duration", time.Second) != nil || AtLeast("--rounds", 0, 1) == nil || AtLeast("--rounds", 1, 1) != nil {
		t.Error("bounds")
	}
}
