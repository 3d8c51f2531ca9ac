package upstream

import (
	"strings"
	"testing"
	"time"
)

func TestParseFaultSpec(t *testing.T) {
	tests := []struct {
		spec    string
		kind    string
		dur     time.Duration
		start   time.Duration
		wantErr string
	}{
		{"outage=10s", "outage", 10 * time.Second, -1, ""},
		{"outage=2s:refuse@1s", "outage", 2 * time.Second, time.Second, ""},
		{"429-storm", "429-storm", 10 * time.Second, -1, ""},
		{"429-storm=3s", "429-storm", 3 * time.Second, -1, ""},
		{"errors=5s:503:0.5", "errors", 5 * time.Second, -1, ""},
		{"latency=5s:200ms", "latency", 5 * time.Second, -1, ""},
		{"outage", "", 0, 0, "needs a duration"},
		{"outage=10s:melt", "", 0, 0, "outage mode"},
		{"errors=5s:200", "", 0, 0, "status"},
		{"errors=5s:500:2", "", 0, 0, "share"},
		{"latency=5s", "", 0, 0, "DELAY"},
		{"flood=1s", "", 0, 0, "unknown kind"},
		{"outage=10s@soon", "", 0, 0, "start"},
		{"outage=-1s", "", 0, 0, "duration"},
	}
	for _, tc := range tests {
		f, err := ParseFaultSpec(tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if f.Kind != tc.kind || f.Duration != tc.dur || f.Start != tc.start {
			t.Errorf("%q: %+v", tc.spec, f)
		}
		uf := f.Faults()
		if err := uf.Validate(); err != nil {
			t.Errorf("%q: upstream rejects %+v: %v", tc.spec, uf, err)
		}
	}
}

func TestFaultsWith(t *testing.T) {
	base := Faults{Latency: map[string]Latency{"envelope": {Fixed: Duration(time.Millisecond)}, "*": {Fixed: Duration(2 * time.Millisecond)}},
		Inject: []Injection{{Route: "outcomes", Status: 500, Probability: 0.5}}}
	storm, _ := ParseFaultSpec("429-storm=3s")
	got := base.With(storm.Faults())
	if len(got.Inject) != 2 || got.Inject[0].Status != 429 || got.Inject[1].Route != "outcomes" || len(got.Latency) != 2 {
		t.Errorf("with a storm: %+v", got)
	}
	slow, _ := ParseFaultSpec("latency=2s:300ms")
	got = base.With(slow.Faults())
	if got.Latency["*"].Fixed != Duration(300*time.Millisecond) || got.Latency["envelope"].Fixed != Duration(time.Millisecond) {
		t.Errorf("with latency: %+v", got.Latency)
	}
	if len(base.Latency) != 2 || base.Latency["*"].Fixed != Duration(2*time.Millisecond) || len(base.Inject) != 1 {
		t.Errorf("With changed its receiver: %+v", base)
	}
	out, _ := ParseFaultSpec("outage=5s:hang")
	if got := base.With(out.Faults()); got.Outage == nil || got.Outage.Mode != OutageHang || got.Validate() != nil {
		t.Errorf("with an outage: %+v", got.Outage)
	}
}

// TestParseQuotaCategories: a quota names Relay's data categories; blast's
// kind names, which match nothing in Relay, are refused with a hint.
func TestParseQuotaCategories(t *testing.T) {
	for _, ok := range []string{"error", "transaction;span", "monitor:0", "log_item;log_byte:0:logs_off", "trace_metric_byte", "all"} {
		if _, err := ParseQuota(ok, 0); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"errors:0", `unknown data category "errors" (blast's kind "errors" is the data category "error")`},
		{"transactions", `(blast's kind "transactions" is the data category "transaction")`},
		{"error;bogus:0", `unknown data category "bogus"; Relay's categories: default, error, transaction`},
		{"error;", "empty category"},
		{"error:0:x:y", "quoted: ';' ends a shell command"},
	} {
		if _, err := ParseQuota(tc.spec, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.spec, err, tc.want)
		}
	}
}
