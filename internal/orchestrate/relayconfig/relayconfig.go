// Package relayconfig writes the config directory a Relay under test runs
// from: credentials.json and a config.yml for managed mode against the fake
// upstream, with user overrides merged in. The config is built as nested
// maps and marshalled with yaml.v3, so any key Relay accepts can be set or
// removed by an override file without this package knowing about it.
package relayconfig

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/relayload/relayload/relayauth"
)

// Options are the values orchestrate decides for each step.
type Options struct {
	// Upstream is the fake upstream's origin, e.g. "http://127.0.0.1:9000/".
	Upstream string
	// Host and Port are where Relay listens.
	Host string
	Port int
	// LogLevel is Relay's logging.level ("info" if empty).
	LogLevel string
	// Threads, when > 0, sets limits.max_thread_count (the pinned core count).
	Threads int
	// StatsD, when set, sends Relay's metrics to this host:port.
	StatsD string
}

// Config is a Relay config.yml as nested maps.
type Config = map[string]any

// DefaultShutdownTimeout is the limits.shutdown_timeout Default sets, in
// seconds. On SIGTERM Relay waits this long before it exits, whatever is
// left to do (relay-system's Controller; Relay's default is 10 s), so it
// is what a step's shutdown costs.
const DefaultShutdownTimeout = 2

// Default returns the config for o: managed mode; outcomes on, aggregated
// and flushed every second (Relay's defaults are 60 s buckets flushed every
// 120 s, so a step would end before any outcome arrived); 1 s metric
// buckets; 100 ms project-config batching; Relay's own error reporting
// off; the health status refreshed every 500 ms (default 3 s) so readiness
// is seen promptly; and a shutdown timeout of DefaultShutdownTimeout.
func Default(o Options) Config {
	logLevel := o.LogLevel
	if logLevel == "" {
		logLevel = "info"
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	c := Config{
		"relay": map[string]any{
			"mode":     "managed",
			"upstream": o.Upstream,
			"host":     host,
			"port":     o.Port,
		},
		"logging": map[string]any{"level": logLevel, "format": "simplified"},
		"sentry":  map[string]any{"enabled": false},
		"http": map[string]any{
			"timeout":        5,
			"encoding":       "zstd",
			"global_metrics": false,
		},
		"outcomes": map[string]any{
			"emit_outcomes": true,
			"source":        "relayload",
			"aggregator":    map[string]any{"bucket_interval": 1, "flush_interval": 1},
		},
		"aggregator": map[string]any{
			"bucket_interval": 1,
			"initial_delay":   0,
		},
		"cache": map[string]any{
			"batch_interval":               100,
			"project_expiry":               300,
			"project_grace_period":         120,
			"global_config_fetch_interval": 10,
		},
		"health": map[string]any{"refresh_interval_ms": 500},
		"limits": map[string]any{"max_concurrent_requests": 100, "shutdown_timeout": DefaultShutdownTimeout},
	}
	if o.Threads > 0 {
		c["limits"].(map[string]any)["max_thread_count"] = o.Threads
	}
	if o.StatsD != "" {
		c["metrics"] = map[string]any{"statsd": o.StatsD, "prefix": "sentry.relay"}
	}
	return c
}

// LoadOverrides reads a YAML (or JSON) file of overrides. The top level must
// be a mapping.
func LoadOverrides(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("relay config overrides: %w", err)
	}
	return ParseOverrides(b)
}

// ParseOverrides parses YAML overrides.
func ParseOverrides(b []byte) (Config, error) {
	var c Config
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("relay config overrides: %w", err)
	}
	if c == nil {
		return Config{}, nil
	}
	return c, nil
}

// Merge returns base with over merged in: mappings merge key by key at every
// depth, any other value (scalar, list) replaces, and a null removes the key.
// Neither argument is modified.
func Merge(base, over Config) Config {
	out := maps.Clone(base)
	if out == nil {
		out = Config{}
	}
	for k, ov := range over {
		if ov == nil {
			delete(out, k)
			continue
		}
		om, oIsMap := ov.(map[string]any)
		bm, bIsMap := out[k].(map[string]any)
		if oIsMap && bIsMap {
			out[k] = Merge(bm, om)
		} else if oIsMap {
			out[k] = Merge(nil, om) // copy, dropping nulls
		} else {
			out[k] = ov
		}
	}
	return out
}

// ShutdownTimeout is c's limits.shutdown_timeout (Relay's default, 10 s,
// when it is not set or not a whole number of seconds).
func ShutdownTimeout(c Config) time.Duration {
	if v, ok := Lookup(c, "limits", "shutdown_timeout"); ok {
		if n, ok := v.(int); ok && n >= 0 {
			return time.Duration(n) * time.Second
		}
	}
	return 10 * time.Second
}

// Lookup returns the value at a dotted path such as "relay.port".
func Lookup(c Config, path ...string) (any, bool) {
	var cur any = c
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[k]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// Write creates dir's config.yml from c and credentials.json from creds.
func Write(dir string, c Config, creds relayauth.Credentials) error {
	if c == nil {
		return errors.New("relayconfig: nil config")
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("relayconfig: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), b, 0o644); err != nil {
		return fmt.Errorf("relayconfig: %w", err)
	}
	if err := creds.Save(filepath.Join(dir, "credentials.json")); err != nil {
		return fmt.Errorf("relayconfig: %w", err)
	}
	return nil
}
