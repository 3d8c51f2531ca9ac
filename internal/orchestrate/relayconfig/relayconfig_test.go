package relayconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/relayload/relayload/relayauth"
)

func TestMerge(t *testing.T) {
	base := Default(Options{Upstream: "http://127.0.0.1:9/", Port: 3000, Threads: 1, StatsD: "127.0.0.1:8125"})
	tests := []struct {
		name  string
		over  string
		path  []string
		want  any
		found bool
	}{
		{"nested scalar replaced", "limits:\n  max_concurrent_requests: 500\n", []string{"limits", "max_concurrent_requests"}, 500, true},
		{"sibling kept", "limits:\n  max_concurrent_requests: 500\n", []string{"limits", "max_thread_count"}, 1, true},
		{"new section added", "spool:\n  envelopes:\n    path: /tmp/x\n", []string{"spool", "envelopes", "path"}, "/tmp/x", true},
		{"null removes", "metrics: null\n", []string{"metrics"}, nil, false},
		{"null inside new map dropped", "foo:\n  a: 1\n  b: null\n", []string{"foo", "b"}, nil, false},
		{"list replaces", "relay:\n  tags: [a, b]\n", []string{"relay", "tags"}, []any{"a", "b"}, true},
		{"map replaces scalar", "http:\n  encoding:\n    x: 1\n", []string{"http", "encoding", "x"}, 1, true},
		{"untouched default", "", []string{"relay", "mode"}, "managed", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			over, err := ParseOverrides([]byte(tc.over))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := Lookup(Merge(base, over), tc.path...)
			if ok != tc.found || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%v = %#v (%v), want %#v (%v)", tc.path, got, ok, tc.want, tc.found)
			}
		})
	}
	// Merging must not modify the base.
	over, _ := ParseOverrides([]byte("limits:\n  max_concurrent_requests: 7\nmetrics: null\n"))
	Merge(base, over)
	if v, _ := Lookup(base, "limits", "max_concurrent_requests"); v != 100 {
		t.Errorf("base modified: %v", v)
	}
	if _, ok := Lookup(base, "metrics"); !ok {
		t.Error("base lost metrics")
	}
}

func TestParseOverridesRejectsNonMapping(t *testing.T) {
	for _, in := range []string{"- a\n- b\n", "just a string", "relay: [\n"} {
		if _, err := ParseOverrides([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	creds, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Default(Options{Upstream: "http://127.0.0.1:9/", Port: 3456})
	if err := Write(dir, c, creds); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Relay struct {
			Mode     string `yaml:"mode"`
			Upstream string `yaml:"upstream"`
			Port     int    `yaml:"port"`
		} `yaml:"relay"`
		Outcomes struct {
			Emit bool `yaml:"emit_outcomes"`
		} `yaml:"outcomes"`
		Metrics map[string]any `yaml:"metrics"`
	}
	if err := yaml.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Relay.Mode != "managed" || back.Relay.Upstream != "http://127.0.0.1:9/" || back.Relay.Port != 3456 || !back.Outcomes.Emit {
		t.Errorf("config.yml round trip: %+v\n%s", back, b)
	}
	if back.Metrics != nil {
		t.Errorf("metrics present without statsd: %v", back.Metrics)
	}
	got, err := relayauth.LoadCredentials(filepath.Join(dir, "credentials.json"))
	if err != nil || got != creds {
		t.Errorf("credentials round trip: %v %+v", err, got)
	}
}

// TestDefaultsForMeasuring checks the settings a measurement depends on:
// outcomes flushed every second (Relay's defaults, 60 s buckets flushed
// every 120 s, deliver nothing within a step: seen with Relay 26.4.0 and a
// transaction:0 quota), and a short shutdown timeout (Relay waits all of
// limits.shutdown_timeout after SIGTERM; its default is 10 s).
func TestDefaultsForMeasuring(t *testing.T) {
	c := Default(Options{Upstream: "http://127.0.0.1:9/", Port: 3000})
	for _, tc := range []struct {
		path []string
		want any
	}{
		{[]string{"outcomes", "emit_outcomes"}, true},
		{[]string{"outcomes", "aggregator", "bucket_interval"}, 1},
		{[]string{"outcomes", "aggregator", "flush_interval"}, 1},
		{[]string{"aggregator", "bucket_interval"}, 1},
		{[]string{"limits", "shutdown_timeout"}, DefaultShutdownTimeout},
	} {
		if got, ok := Lookup(c, tc.path...); !ok || got != tc.want {
			t.Errorf("%v = %v (%v), want %v", tc.path, got, ok, tc.want)
		}
	}
	if got := ShutdownTimeout(c); got != DefaultShutdownTimeout*time.Second {
		t.Errorf("ShutdownTimeout %v", got)
	}
	over, err := ParseOverrides([]byte("limits:\n  shutdown_timeout: 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := ShutdownTimeout(Merge(c, over)); got != 7*time.Second {
		t.Errorf("overridden ShutdownTimeout %v", got)
	}
	if got := ShutdownTimeout(Merge(c, Config{"limits": map[string]any{"shutdown_timeout": nil}})); got != 10*time.Second {
		t.Errorf("Relay's default when removed: %v", got)
	}
}
