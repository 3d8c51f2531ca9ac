package configerr

import (
	"errors"
	"io/fs"
	"testing"
)

func TestRender(t *testing.T) {
	flags := map[string]string{"FindMax": "--find-max", "Rates": "--rates", "StatsD": "--statsd"}
	name := func(f string) string {
		if n, ok := flags[f]; ok {
			return n
		}
		return f
	}
	for _, tc := range []struct {
		err        *Error
		lib, flags string
	}{
		{New("FindMax", "wants two %s, the bounds", "Rates"), "FindMax: wants two Rates, the bounds", "--find-max: wants two --rates, the bounds"},
		{Errorf("Rates", "rate %v: want a number above 0 (100%% sure)", -5), "Rates: rate -5: want a number above 0 (100% sure)", "--rates: rate -5: want a number above 0 (100% sure)"},
		{Wrap("Perf", errors.New("mkdir /x: 50% full")), "Perf: mkdir /x: 50% full", "Perf: mkdir /x: 50% full"},
		{New("", "no rates"), "no rates", "no rates"},
		{New("StatsDListen", "excludes %s", "StatsD"), "StatsDListen: excludes StatsD", "StatsDListen: excludes --statsd"},
	} {
		if got := tc.err.Error(); got != tc.lib {
			t.Errorf("Error() = %q, want %q", got, tc.lib)
		}
		if got := tc.err.Render(name); got != tc.flags {
			t.Errorf("Render = %q, want %q", got, tc.flags)
		}
		if !errors.Is(tc.err, ErrConfig) {
			t.Errorf("%q does not match ErrConfig", tc.err)
		}
	}
	cause := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	if err := Wrap("RelayConfig", cause); !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrConfig) {
		t.Errorf("wrapped cause lost: %v", err)
	}
}
