package pool

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/relayload/relayload/internal/useragent"
)

// agentTable holds the distinct user agents entries draw from.
type agentTable struct {
	unique bool
	seed   uint64
	list   []useragent.Agent
	// cum holds the running sums of Options.Agents' weights when they
	// have weights: entries then draw in proportion to them.
	cum []float64
}

// newAgentTable classifies Options.Agents or, without them, generates
// Options.UserAgents distinct agents, in index order (so the table is the
// same on every build). A drawn agent that is already in the table is
// redrawn in unique form, which cannot collide with a non-unique one of
// the same family.
func newAgentTable(o *Options) *agentTable {
	t := &agentTable{unique: o.UniqueUserAgents, seed: o.Seed}
	if len(o.Agents) > 0 {
		t.list = make([]useragent.Agent, len(o.Agents))
		total := 0.0
		for k, w := range o.Agents {
			t.list[k] = useragent.Classify(w.UA)
			if w.Weight > 0 && !t.unique {
				total += w.Weight
				t.cum = append(t.cum, total)
			}
		}
		return t
	}
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

// pick returns the agent of the entry at index i: drawn from the table
// (from g's stream: Zipf-ranked, or by weight), or the entry's own unique
// agent (the list's next in turn, or generated from a stream of its own,
// leaving g's untouched).
func (t *agentTable) pick(g *gen, i int) useragent.Agent {
	switch {
	case t.unique && len(t.list) > 0:
		return t.list[i%len(t.list)]
	case t.unique:
		return useragent.Generate(stream(t.seed, saltUA, uint64(i)), true, uint64(i))
	case t.cum != nil:
		u := g.r.Float64() * t.cum[len(t.cum)-1]
		k := sort.Search(len(t.cum), func(k int) bool { return t.cum[k] > u })
		return t.list[min(k, len(t.list)-1)]
	}
	return t.list[g.zipf(len(t.list))]
}

// CheckAgents refuses a list of agents (Options.Agents) a pool cannot
// draw from as documented: an agent useragent.Check refuses, one given
// twice, more than MaxSize, or weights on some agents only.
func CheckAgents(l []useragent.Weighted) error {
	if len(l) > MaxSize {
		return fmt.Errorf("%d agents: want at most %d", len(l), MaxSize)
	}
	seen := make(map[string]bool, len(l))
	for k, w := range l {
		if err := useragent.Check(w.UA); err != nil {
			return fmt.Errorf("agent %d: %w", k, err)
		}
		if seen[w.UA] {
			return fmt.Errorf("agent %d: %q given twice", k, w.UA)
		}
		seen[w.UA] = true
		if !(w.Weight >= 0) || math.IsInf(w.Weight, 0) || (w.Weight > 0) != (l[0].Weight > 0) {
			return fmt.Errorf("agent %d: weight %v: want a positive finite number for every agent, or 0 for every agent", k, w.Weight)
		}
	}
	return nil
}

// AgentsNote says how a pool of o with UniqueUserAgents spreads its Agents
// over the entries ("" without both): each agent serves about Size/len
// entries in turn, or every entry has its own.
func (o *Options) AgentsNote() string {
	if !o.UniqueUserAgents || len(o.Agents) == 0 {
		return ""
	}
	from := o.AgentsFrom
	if from == "" {
		from = "the list"
	}
	n, m := len(o.Agents), o.Size
	if n >= m {
		return fmt.Sprintf("%d user agents in %s for a pool of %d envelopes: every envelope has its own (the first %d)", n, from, m, m)
	}
	return fmt.Sprintf("%d user agents in %s for a pool of %d envelopes: each agent serves about %d envelopes, in turn",
		n, from, m, int(math.Round(float64(m)/float64(n))))
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
