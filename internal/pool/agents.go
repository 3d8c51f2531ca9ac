package pool

import (
	"math/rand/v2"
	"strconv"

	"github.com/relayload/relayload/internal/useragent"
)

// agentTable holds the distinct user agents entries draw from.
type agentTable struct {
	unique bool
	seed   uint64
	list   []useragent.Agent
}

// newAgentTable generates Options.UserAgents distinct agents, in index
// order (so the table is the same on every build). A drawn agent that is
// already in the table is redrawn in unique form, which cannot collide with
// a non-unique one of the same family.
func newAgentTable(o *Options) *agentTable {
	t := &agentTable{unique: o.UniqueUserAgents, seed: o.Seed}
	if t.unique {
		return t
	}
	seen := make(map[string]bool, o.UserAgents)
	for i := 0; len(t.list) < o.UserAgents; i++ {
		a := useragent.Generate(stream(o.Seed, saltUA, uint64(i)), false, 0)
		if seen[a.UA] {
			a = useragent.Generate(stream(o.Seed, saltUA, uint64(i)), true, uint64(i))
			if seen[a.UA] {
				continue
			}
		}
		seen[a.UA] = true
		t.list = append(t.list, a)
	}
	return t
}

// pick returns the agent of the entry at index i: Zipf-ranked from the
// table (drawn from g's stream), or the entry's own unique agent (drawn
// from a stream of its own, leaving g's untouched).
func (t *agentTable) pick(g *gen, i int) useragent.Agent {
	if t.unique {
		return useragent.Generate(stream(t.seed, saltUA, uint64(i)), true, uint64(i))
	}
	return t.list[g.zipf(len(t.list))]
}

// publicIP returns a public unicast address: never private, loopback,
// link-local, CGNAT, benchmarking, documentation or multicast, so Relay's
// localhost filter keeps browser events. IPv4 85%, IPv6 15% (from RIR
// allocations in 2400::/12, 2600::/12, 2800::/12, 2a00::/12, 2c00::/12).
func publicIP(r *rand.Rand) string {
	if r.IntN(100) < 85 {
		for {
			a := 1 + r.IntN(223)
			b := r.IntN(256)
			if reservedV4(a, b) {
				continue
			}
			return strconv.Itoa(a) + "." + strconv.Itoa(b) + "." + strconv.Itoa(r.IntN(256)) + "." + strconv.Itoa(1+r.IntN(254))
		}
	}
	top := [...]uint64{0x2400, 0x2600, 0x2800, 0x2a00, 0x2c00}
	s := strconv.FormatUint(top[r.IntN(len(top))]+uint64(r.IntN(16)), 16)
	for j := 0; j < 3; j++ {
		s += ":" + strconv.FormatUint(uint64(r.IntN(0x10000)), 16)
	}
	return s + "::" + strconv.FormatUint(uint64(1+r.IntN(0xfffe)), 16)
}

// reservedV4 reports whether a.b.0.0/16 overlaps a non-public range.
func reservedV4(a, b int) bool {
	switch {
	case a == 0, a == 10, a == 127, a >= 224:
		return true
	case a == 100 && b >= 64 && b < 128: // CGNAT
		return true
	case a == 169 && b == 254, a == 172 && b >= 16 && b < 32, a == 192 && (b == 168 || b == 0):
		return true
	case a == 198 && (b == 18 || b == 19 || b == 51), a == 203 && b == 0: // benchmarking, TEST-NET-2/3
		return true
	}
	return false
}
