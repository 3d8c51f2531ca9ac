package pool

import (
	"context"
	"strings"
	"testing"

	"github.com/relayload/relayload/internal/useragent"
)

// fileAgents is testdata/agents.txt: twelve real agents of every class.
func fileAgents(t testing.TB) []useragent.Weighted {
	t.Helper()
	l, err := useragent.ReadFile("testdata/agents.txt")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// agentCounts counts the entries of each agent of l, in l's order, and
// fails on an agent not in l.
func agentCounts(t *testing.T, p *Pool, l []useragent.Weighted) []int {
	t.Helper()
	rank := map[string]int{}
	for k, w := range l {
		rank[w.UA] = k
	}
	counts := make([]int, len(l))
	for i, e := range p.Entries {
		k, ok := rank[e.UserAgent]
		if !ok {
			t.Fatalf("entry %d: agent %q is not in the list", i, e.UserAgent)
		}
		counts[k]++
	}
	return counts
}

// A list of N agents and a pool much larger: the entries use exactly the
// N agents, rank 1 (the first line) most, with Zipf's skew.
func TestAgentsZipf(t *testing.T) {
	l := fileAgents(t)
	p := build(t, Options{Seed: 3, Size: 6000, Agents: l, AgentsFrom: "agents.txt", Mix: Mix{KindSession: 1}})
	counts := agentCounts(t, p, l)
	for k, c := range counts {
		if c == 0 {
			t.Fatalf("agent %d never drawn: %v", k, counts)
		}
	}
	// s = 1.1 over 12 ranks: rank 1 about 30%, rank 12 about 2%.
	if !(counts[0] > counts[1] && counts[1] > counts[2]) || counts[0] < 5*counts[len(l)-1] || counts[0] < len(p.Entries)/5 {
		t.Fatalf("not Zipf-skewed by rank: %v", counts)
	}
	if p.Options.UserAgents != len(l) || p.Options.AgentsFrom != "agents.txt" {
		t.Fatalf("options %d agents from %q, want %d", p.Options.UserAgents, p.Options.AgentsFrom, len(l))
	}
	// Deterministic, and another list makes another pool.
	q := build(t, Options{Seed: 3, Size: 6000, Agents: l, Mix: Mix{KindSession: 1}})
	r := build(t, Options{Seed: 3, Size: 6000, Agents: l[1:], Mix: Mix{KindSession: 1}})
	if q.Hash() != p.Hash() || r.Hash() == p.Hash() {
		t.Fatalf("same list: hashes equal %v; another list: equal %v", q.Hash() == p.Hash(), r.Hash() == p.Hash())
	}
}

// Weights, not ranks, decide the shares when the list has them.
func TestAgentsWeighted(t *testing.T) {
	l := fileAgents(t)[:4]
	weights := []float64{1, 2, 4, 8} // rising: the last line gets the most
	for k := range l {
		l[k].Weight = weights[k]
	}
	const size = 6000
	p := build(t, Options{Seed: 5, Size: size, Agents: l, Mix: Mix{KindSession: 1}})
	counts := agentCounts(t, p, l)
	for k, c := range counts {
		want := size * weights[k] / 15
		if float64(c) < 0.85*want || float64(c) > 1.15*want {
			t.Errorf("agent %d (weight %v): %d entries, want about %.0f (all: %v)", k, weights[k], c, want, counts)
		}
	}
}

// With UniqueUserAgents a list is taken in turn: cycled when the pool is
// larger, every entry its own when it is not.
func TestAgentsUnique(t *testing.T) {
	l := fileAgents(t)
	o := Options{Seed: 1, Size: 100, Agents: l, AgentsFrom: "agents.txt", UniqueUserAgents: true, Mix: Mix{KindSession: 1, KindCheckIn: 1}}
	p := build(t, o)
	for i, e := range p.Entries {
		if e.UserAgent != l[i%len(l)].UA {
			t.Fatalf("entry %d: %q, want the list's agent %d", i, e.UserAgent, i%len(l))
		}
	}
	if n := o.AgentsNote(); n != "12 user agents in agents.txt for a pool of 100 envelopes: each agent serves about 8 envelopes, in turn" {
		t.Errorf("note %q", n)
	}
	o.Size = 10
	p = build(t, o)
	seen := map[string]bool{}
	for _, e := range p.Entries {
		seen[e.UserAgent] = true
	}
	if len(seen) != 10 {
		t.Fatalf("%d distinct agents in a pool of 10 from a list of 12", len(seen))
	}
	if n := o.AgentsNote(); n != "12 user agents in agents.txt for a pool of 10 envelopes: every envelope has its own (the first 10)" {
		t.Errorf("note %q", n)
	}
	o.UniqueUserAgents = false
	if n := o.AgentsNote(); n != "" {
		t.Errorf("note without unique agents: %q", n)
	}
}

// The payload fits the agent: no browser SDK without a browser, the iOS
// SDK only with an iOS app client.
func TestAgentsFitPayload(t *testing.T) {
	for _, tc := range []struct {
		agent    string
		allowed  []string // error platforms
		sessions string   // session SDK
	}{
		{"ShopApp/5821 CFNetwork/1568.100.1 Darwin/24.0.0", []string{"cocoa", "node", "python", "java", "go"}, "sentry.cocoa"},
		{"python-requests/2.32.3", []string{"node", "python", "java", "go"}, "sentry.python"},
		{"Dalvik/2.1.0 (Linux; U; Android 14; Pixel 8 Build/UP1A.231005.007)", []string{"node", "python", "java", "go"}, "sentry.java.android"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", []string{"javascript", "node", "python", "java", "go"}, "sentry.javascript.browser"},
	} {
		p := build(t, Options{Seed: 2, Size: 200, Agents: []useragent.Weighted{{UA: tc.agent}}, Mix: Mix{KindError: 1, KindSession: 1}})
		seen := map[string]bool{}
		for i, e := range p.Entries {
			if e.UserAgent != tc.agent {
				t.Fatalf("entry %d: agent %q", i, e.UserAgent)
			}
			switch e.Kind {
			case KindError:
				pl := decode(t, p, i, 0)["platform"].(string)
				if !contains(tc.allowed, pl) {
					t.Fatalf("%q: a %s error", tc.agent, pl)
				}
				seen[pl] = true
			case KindSession:
				if sdk := header(t, p, i)["sdk"].(map[string]any)["name"]; sdk != tc.sessions {
					t.Fatalf("%q: sessions from %v, want %s", tc.agent, sdk, tc.sessions)
				}
			}
		}
		// The first allowed platform is the one only this class of agent gets.
		if !seen[tc.allowed[0]] {
			t.Errorf("%q: no %s errors among %v", tc.agent, tc.allowed[0], seen)
		}
	}
}

func TestAgentsRefused(t *testing.T) {
	ps := testProjects(t, 3)
	for _, tc := range []struct {
		agents []useragent.Weighted
		want   string
	}{
		{[]useragent.Weighted{{UA: "a/1"}, {UA: "a/1"}}, `agent 1: "a/1" given twice`},
		{[]useragent.Weighted{{UA: "a/1", Weight: 1}, {UA: "b/1"}}, "agent 1: weight 0"},
		{[]useragent.Weighted{{UA: "a/1"}, {UA: "b/1", Weight: 2}}, "agent 1: weight 2"},
		{[]useragent.Weighted{{UA: "a/1", Weight: -1}}, "agent 0: weight -1"},
		{[]useragent.Weighted{{UA: ""}}, "agent 0: no agent"},
		{[]useragent.Weighted{{UA: "a\nb"}}, "control character"},
	} {
		_, err := Build(context.Background(), Options{Size: 10, Projects: ps, Agents: tc.agents})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "pool: agents: ") {
			t.Errorf("%+v: %v, want %q", tc.agents, err, tc.want)
		}
	}
}
