package standinrelay

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/relayload/relayload/internal/compression"
)

// Config is what the stand-in reads from Relay's config.yml. Other keys
// are ignored. Durations may be fractional (tests run fast); Relay wants
// whole seconds (milliseconds for cache.batch_interval).
type Config struct {
	Upstream *url.URL // relay.upstream, a bare origin
	Host     string   // relay.host
	Port     int      // relay.port (0: any free port)

	Encoding         compression.Encoding // http.encoding (zstd)
	RetryDelay       time.Duration        // http.retry_delay (1 s)
	MaxRetryInterval time.Duration        // http.max_retry_interval (60 s)

	BatchInterval       time.Duration // cache.batch_interval (100 ms)
	GlobalFetchInterval time.Duration // cache.global_config_fetch_interval (10 s)

	MaxConcurrentRequests int           // limits.max_concurrent_requests (100)
	ShutdownTimeout       time.Duration // limits.shutdown_timeout (10 s)

	StatsdAddr   string // metrics.statsd ("": off)
	StatsdPrefix string // metrics.prefix (sentry.relay)

	// Capacity is standin.capacity, a key of the stand-in's own (Relay
	// ignores it): envelopes per second the processing workers handle in
	// total (0: unlimited).
	Capacity float64
}

// DefaultConfig returns Relay 26.4.0's defaults (relay-config/src/config.rs)
// for the keys the stand-in reads.
func DefaultConfig() Config {
	return Config{
		Host:                  "127.0.0.1",
		Port:                  3000,
		Encoding:              compression.Zstd,
		RetryDelay:            time.Second,
		MaxRetryInterval:      60 * time.Second,
		BatchInterval:         100 * time.Millisecond,
		GlobalFetchInterval:   10 * time.Second,
		MaxConcurrentRequests: 100,
		ShutdownTimeout:       10 * time.Second,
		StatsdPrefix:          "sentry.relay",
	}
}

// fileConfig mirrors the YAML; pointers tell absent from zero.
type fileConfig struct {
	Relay struct {
		Mode     string `yaml:"mode"`
		Upstream string `yaml:"upstream"`
		Host     string `yaml:"host"`
		Port     *int   `yaml:"port"`
	} `yaml:"relay"`
	HTTP struct {
		Encoding         *string  `yaml:"encoding"`
		RetryDelay       *float64 `yaml:"retry_delay"`
		MaxRetryInterval *float64 `yaml:"max_retry_interval"`
	} `yaml:"http"`
	Cache struct {
		BatchInterval       *float64 `yaml:"batch_interval"` // milliseconds
		GlobalFetchInterval *float64 `yaml:"global_config_fetch_interval"`
	} `yaml:"cache"`
	Limits struct {
		MaxConcurrentRequests *int     `yaml:"max_concurrent_requests"`
		ShutdownTimeout       *float64 `yaml:"shutdown_timeout"`
	} `yaml:"limits"`
	Metrics struct {
		Statsd string  `yaml:"statsd"`
		Prefix *string `yaml:"prefix"`
	} `yaml:"metrics"`
	Standin struct {
		Capacity *float64 `yaml:"capacity"`
	} `yaml:"standin"`
}

// maxCapacity bounds standin.capacity (one envelope per microsecond).
const maxCapacity = 1e6

// LoadConfig reads dir/config.yml.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "config.yml")
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("standinrelay: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses config.yml contents: managed mode only; known keys
// with bad values are errors.
func ParseConfig(b []byte) (Config, error) {
	var f fileConfig
	if err := yaml.Unmarshal(b, &f); err != nil {
		return Config{}, fmt.Errorf("standinrelay: config: %w", err)
	}
	c := DefaultConfig()
	var errs []error
	if f.Relay.Mode != "managed" {
		errs = append(errs, fmt.Errorf("relay.mode is %q, the stand-in only does managed", f.Relay.Mode))
	}
	u, err := url.Parse(f.Relay.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		errs = append(errs, fmt.Errorf("relay.upstream %q: want a bare origin http://host:port/", f.Relay.Upstream))
	} else {
		u.Path = ""
		c.Upstream = u
	}
	if f.Relay.Host != "" {
		c.Host = f.Relay.Host
	}
	if p := f.Relay.Port; p != nil {
		if *p < 0 || *p > 65535 {
			errs = append(errs, fmt.Errorf("relay.port %d out of range", *p))
		}
		c.Port = *p
	}
	secs := func(name string, v *float64, dst *time.Duration, unit time.Duration, allowZero bool) {
		switch {
		case v == nil:
		case math.IsNaN(*v) || *v < 0 || *v == 0 && !allowZero || *v > 1e7:
			errs = append(errs, fmt.Errorf("%s: %v out of range", name, *v))
		default:
			*dst = time.Duration(*v * float64(unit))
		}
	}
	if f.HTTP.Encoding != nil {
		if c.Encoding, err = compression.ParseEncoding(*f.HTTP.Encoding); err != nil {
			errs = append(errs, fmt.Errorf("http.encoding: %w", err))
		}
	}
	secs("http.retry_delay", f.HTTP.RetryDelay, &c.RetryDelay, time.Second, false)
	secs("http.max_retry_interval", f.HTTP.MaxRetryInterval, &c.MaxRetryInterval, time.Second, false)
	secs("cache.batch_interval", f.Cache.BatchInterval, &c.BatchInterval, time.Millisecond, true)
	secs("cache.global_config_fetch_interval", f.Cache.GlobalFetchInterval, &c.GlobalFetchInterval, time.Second, false)
	secs("limits.shutdown_timeout", f.Limits.ShutdownTimeout, &c.ShutdownTimeout, time.Second, true)
	if n := f.Limits.MaxConcurrentRequests; n != nil {
		if *n <= 0 {
			errs = append(errs, fmt.Errorf("limits.max_concurrent_requests: %d out of range", *n))
		}
		c.MaxConcurrentRequests = *n
	}
	c.StatsdAddr = f.Metrics.Statsd
	if f.Metrics.Prefix != nil {
		c.StatsdPrefix = *f.Metrics.Prefix
	}
	if v := f.Standin.Capacity; v != nil {
		if math.IsNaN(*v) || *v < 0 || *v > maxCapacity {
			errs = append(errs, fmt.Errorf("standin.capacity: %v: want envelopes per second, 0 (unlimited) to %g", *v, float64(maxCapacity)))
		}
		c.Capacity = *v
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("standinrelay: config: %w", errors.Join(errs...))
	}
	return c, nil
}

// ListenAddr is host:port to listen on.
func (c Config) ListenAddr() string {
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}
