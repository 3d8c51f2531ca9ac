package blast

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/projects"
)

// CheckPoolMemory holds a pool's estimate against the limits (here 100
// MiB available): a pool that fits passes, one that does not is a
// ConfigError naming Pool, before anything is built; a streamed dump
// holds one batch, so a pool too large to send can still be dumped.
func TestCheckPoolMemory(t *testing.T) {
	ps, err := projects.Generate(1, 5)
	if err != nil {
		t.Fatal(err)
	}
	lim := Limits{MemAvailable: 100 << 20}
	for _, tc := range []struct {
		size int
		use  Use
		want string // "" fits
	}{
		{500, Send, ""},
		{500, Dump, ""},
		{500, StreamedDump, ""},
		{20000, Send, "--pool: 20000 envelopes need about "},
		{20000, Dump, "more than the 100 MiB available (MemAvailable)"},
		{20000, StreamedDump, ""},
		{pool.MaxSize, StreamedDump, ""},
	} {
		m, err := CheckPoolMemory(context.Background(), pool.Options{Seed: 1, Size: tc.size, Projects: ps}, tc.use, lim)
		t.Logf("%d (use %d): %+v, %v", tc.size, tc.use, m, err)
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

// The smallest of the limits a process runs under wins, whichever it is,
// and the refusal names it; with none known nothing is refused.
func TestMemoryLimitsSmallestWins(t *testing.T) {
	const gib = 1 << 30
	est := pool.Estimate{Entries: pool.MaxSize, HeldBytes: 18 * gib, EncodedBytes: 3 * gib, EntryBytes: 200 << 20}
	for _, tc := range []struct {
		name string
		lim  Limits
		want string
		size int64
	}{
		{"nothing known", Limits{}, "", math.MaxInt64},
		{"free memory", Limits{MemAvailable: 16 * gib}, "MemAvailable", 16 * gib},
		{"ulimit -v", Limits{MemAvailable: 16 * gib, AddressSpace: 3 * gib}, "RLIMIT_AS", 3 * gib},
		{"a container", Limits{MemAvailable: 16 * gib, Cgroup: 2 * gib, AddressSpace: 3 * gib}, "cgroup memory.max", 2 * gib},
		{"GOMEMLIMIT", Limits{MemAvailable: 16 * gib, Cgroup: 2 * gib, AddressSpace: 3 * gib, GoMemLimit: gib}, "GOMEMLIMIT", gib},
	} {
		v, name := tc.lim.Smallest()
		if v != tc.size || name != tc.want {
			t.Errorf("%s: smallest %d %q, want %d %q", tc.name, v, name, tc.size, tc.want)
		}
		for _, use := range []Use{Send, Dump, StreamedDump} {
			m, err := CheckMemory(est, use, tc.lim)
			refused := tc.want != "" && use != StreamedDump
			if (err != nil) != refused {
				t.Errorf("%s, use %d: %+v, %v; want refused %v", tc.name, use, m, err, refused)
				continue
			}
			if err != nil && !strings.Contains(err.Error(), "available ("+tc.want+")") {
				t.Errorf("%s, use %d: %v, want the limit named", tc.name, use, err)
			}
		}
	}
	// A streamed dump is refused only when a batch does not fit.
	if _, err := CheckMemory(est, StreamedDump, Limits{AddressSpace: 10 << 20}); err == nil || !strings.Contains(err.Error(), "at once") || !strings.Contains(err.Error(), "(RLIMIT_AS)") {
		t.Errorf("a batch over the limit: %v", err)
	}
}

// ReadLimits reads the cgroup v2 limit the process's own cgroup has
// (memory.max less memory.current; none when "max") and MemAvailable.
func TestReadLimits(t *testing.T) {
	l := ReadLimits("testdata/proc", "testdata/cgroup")
	if l.MemAvailable != 100<<20 || l.Cgroup != 384<<20 {
		t.Errorf("%+v, want 100 MiB available and 384 MiB left in the cgroup", l)
	}
	if l := ReadLimits("testdata/proc", "testdata/cgroup-nolimit"); l.Cgroup != 0 {
		t.Errorf("memory.max \"max\": %+v", l)
	}
	if l := ReadLimits("testdata/nonexistent", "testdata/nonexistent"); l.MemAvailable != 0 || l.Cgroup != 0 {
		t.Errorf("no proc: %+v", l)
	}
	if vmSize("testdata/proc") != 1<<30 {
		t.Errorf("VmSize %d", vmSize("testdata/proc"))
	}
}
