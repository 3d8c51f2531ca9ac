package upstream

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/projects"
)

func TestFaultsWith(t *testing.T) {
	base := Faults{Latency: map[string]Latency{"envelope": {Fixed: Duration(time.Millisecond)}, "*": {Fixed: Duration(2 * time.Millisecond)}},
		Inject: []Injection{{Route: "outcomes", Status: 500, Probability: 0.5}}}
	storm := Faults{Inject: []Injection{{Route: "envelope", Status: 429, Probability: 1, RetryAfter: 1}}}
	got := base.With(storm)
	if len(got.Inject) != 2 || got.Inject[0].Status != 429 || got.Inject[1].Route != "outcomes" || len(got.Latency) != 2 {
		t.Errorf("with a storm: %+v", got)
	}
	slow := Faults{Latency: map[string]Latency{"*": {Fixed: Duration(300 * time.Millisecond)}}}
	got = base.With(slow)
	if got.Latency["*"].Fixed != Duration(300*time.Millisecond) || got.Latency["envelope"].Fixed != Duration(time.Millisecond) {
		t.Errorf("with latency: %+v", got.Latency)
	}
	if len(base.Latency) != 2 || base.Latency["*"].Fixed != Duration(2*time.Millisecond) || len(base.Inject) != 1 {
		t.Errorf("With changed its receiver: %+v", base)
	}
	out := Faults{Outage: &Outage{Mode: OutageHang, Duration: Duration(5 * time.Second)}}
	if got := base.With(out); got.Outage == nil || got.Outage.Mode != OutageHang || got.Validate() != nil {
		t.Errorf("with an outage: %+v", got.Outage)
	}
}

// TestQuotaCategories: a quota names Relay's data categories; blast's kind
// names, which match nothing in Relay, are refused with a hint naming the
// Config field.
func TestQuotaCategories(t *testing.T) {
	ps, err := projects.Generate(7, 2)
	if err != nil {
		t.Fatal(err)
	}
	quota := func(cats string) json.RawMessage {
		return json.RawMessage(`{"id":"q","scope":"project","limit":0,"categories":` + cats + `}`)
	}
	for _, ok := range []string{`["error"]`, `["transaction","span"]`, `["log_item","log_byte"]`, `["trace_metric_byte"]`, `[]`} {
		if _, err := newServer(Config{Projects: ps, Quotas: []json.RawMessage{quota(ok)}}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, tc := range []struct{ cats, want string }{
		{`["errors"]`, `Quotas[0]: unknown data category "errors" (blast's kind "errors" is the data category "error")`},
		{`["transactions"]`, `(blast's kind "transactions" is the data category "transaction")`},
		{`["error","bogus"]`, `unknown data category "bogus"; Relay's categories: default, error, transaction`},
	} {
		if _, err := newServer(Config{Projects: ps, Quotas: []json.RawMessage{quota(tc.cats)}}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.cats, err, tc.want)
		}
	}
}
