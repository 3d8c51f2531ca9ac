package blast

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/projects"
)

// CheckPoolMemory holds a pool's estimate against MemAvailable (here a
// fake proc with 100 MiB available): a pool that fits passes, one that
// does not is a ConfigError naming Pool, before anything is built.
func TestCheckPoolMemory(t *testing.T) {
	ps, err := projects.Generate(1, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size int
		dump bool
		want string // "" fits
	}{
		{500, false, ""},
		{500, true, ""},
		{20000, false, "--pool: 20000 envelopes need about "},
		{20000, true, "more than the 100 MiB available (MemAvailable)"},
	} {
		m, err := CheckPoolMemory(context.Background(), pool.Options{Seed: 1, Size: tc.size, Projects: ps}, tc.dump, "testdata/proc")
		t.Logf("%d (dump %v): %+v, %v", tc.size, tc.dump, m, err)
		if m.Available != 100<<20 || m.Limit != "MemAvailable" || m.Need <= 0 {
			t.Errorf("%+v, want 100 MiB available from MemAvailable", m)
		}
		if tc.want == "" {
			if err != nil {
				t.Errorf("size %d: %v", tc.size, err)
			}
			continue
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(ce.Render(func(string) string { return "--pool" }), tc.want) {
			t.Errorf("size %d: %v, want a ConfigError with %q", tc.size, err, tc.want)
		}
	}
}
