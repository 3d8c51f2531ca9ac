package pool

import (
	"math/rand/v2"
	"strconv"
)

// agentTable holds the distinct user agents entries draw from.
type agentTable struct {
	unique bool
	seed   uint64
	list   []string
}

func newAgentTable(o *Options) *agentTable {
	t := &agentTable{unique: o.UniqueUserAgents, seed: o.Seed}
	if t.unique {
		return t
	}
	seen := make(map[string]bool, o.UserAgents)
	for i := 0; len(t.list) < o.UserAgents; i++ {
		r := stream(o.Seed, saltUA, uint64(i))
		ua := userAgent(r, uint64(i), false)
		if seen[ua] {
			ua = userAgent(r, uint64(i), true)
			if seen[ua] {
				continue
			}
		}
		seen[ua] = true
		t.list = append(t.list, ua)
	}
	return t
}

// pick returns the agent of the entry at index i.
func (t *agentTable) pick(g *gen, i int) string {
	if t.unique {
		return userAgent(stream(t.seed, saltUA, uint64(i)), uint64(i), true)
	}
	return t.list[g.zipf(len(t.list))]
}

// userAgent builds one agent. With unique set, the string encodes v so that
// different v never give the same string.
func userAgent(r *rand.Rand, v uint64, unique bool) string {
	m := 120 + r.IntN(25)
	ver := strconv.Itoa(m) + ".0.0.0"
	if unique {
		ver = strconv.Itoa(m) + ".0." + strconv.FormatUint(6000+v/250, 10) + "." + strconv.FormatUint(v%250, 10)
	}
	return "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" + ver + " Safari/537.36"
}

// publicIP returns a public unicast address (never private, loopback,
// link-local, CGNAT, documentation or multicast), mostly IPv4.
func publicIP(r *rand.Rand) string {
	if r.IntN(100) < 85 {
		for {
			a := 1 + r.IntN(223)
			b := r.IntN(256)
			if a == 10 || a == 127 || a == 0 || (a == 100 && b >= 64 && b < 128) || (a == 169 && b == 254) ||
				(a == 172 && b >= 16 && b < 32) || (a == 192 && (b == 168 || b == 0)) || (a == 198 && (b == 18 || b == 19 || b == 51)) ||
				(a == 203 && b == 0) {
				continue
			}
			return strconv.Itoa(a) + "." + strconv.Itoa(b) + "." + strconv.Itoa(r.IntN(256)) + "." + strconv.Itoa(1+r.IntN(254))
		}
	}
	prefixes := [...]string{"2a00", "2a01", "2a02", "2a03", "2a0a", "2600", "2601", "2602", "2603", "2604", "2605", "2606", "2607", "2400", "2401", "2402", "2403", "2404", "2405", "2406", "2407", "2408", "2409", "2800", "2803", "2c0f"}
	s := prefixes[r.IntN(len(prefixes))]
	for j := 0; j < 3; j++ {
		s += ":" + strconv.FormatUint(uint64(r.IntN(0x10000)), 16)
	}
	s += "::" + strconv.FormatUint(uint64(1+r.IntN(0xfffe)), 16)
	return s
}
