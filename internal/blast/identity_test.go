package blast

import (
	"context"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/useragent"
	"github.com/relayload/relayload/projects"
)

// The pool digest tells lists of agents apart by their content: the same
// list read from another file is the same pool, another list, other
// weights or no list are not.
func TestPoolDigestAgents(t *testing.T) {
	ps, err := projects.Generate(7, 3)
	if err != nil {
		t.Fatal(err)
	}
	digest := func(from string, agents ...useragent.Weighted) string {
		t.Helper()
		p, err := pool.Build(context.Background(), pool.Options{Seed: 1, Size: 20, Projects: ps, Agents: agents, AgentsFrom: from,
			UserAgents: len(agents), Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return poolDigest(p)
	}
	a, b := useragent.Weighted{UA: "curl/8.5.0"}, useragent.Weighted{UA: "Wget/1.21.4"}
	base := digest("a.txt", a, b)
	for _, tc := range []struct {
		name string
		d    string
		same bool
	}{
		{"the list from another file", digest("copy/a.txt", a, b), true},
		{"the list in another order", digest("a.txt", b, a), false},
		{"another agent", digest("a.txt", a, useragent.Weighted{UA: "Wget/1.21.3"}), false},
		{"weights", digest("a.txt", useragent.Weighted{UA: a.UA, Weight: 1}, useragent.Weighted{UA: b.UA, Weight: 1}), false},
		{"generated agents", digest(""), false},
	} {
		if (tc.d == base) != tc.same {
			t.Errorf("%s: digest %s, the list's %s: want same %v", tc.name, tc.d, base, tc.same)
		}
	}
}
