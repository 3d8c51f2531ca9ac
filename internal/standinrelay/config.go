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
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/relayload/relayload/compression"
)

// Config is the effective configuration, read from the subset of Relay's
// config.yml keys named in the fields' comments. Durations that Relay
// takes as whole seconds (or milliseconds) may be fractional here so tests
// can run fast; a real Relay would reject fractions.
type Config struct {
	Upstream *url.URL // relay.upstream, a bare origin
	Host     string   // relay.host
	Port     int      // relay.port (0 = any free port)

	HTTPTimeout       time.Duration        // http.timeout (5 s)
	Encoding          compression.Encoding // http.encoding (zstd)
	AuthInterval      time.Duration        // http.auth_interval (600 s)
	RetryDelay        time.Duration        // http.retry_delay (1 s)
	MaxRetryInterval  time.Duration        // http.max_retry_interval (60 s)
	OutageGracePeriod time.Duration        // http.outage_grace_period (10 s)

	EmitOutcomes  OutcomeMode // outcomes.emit_outcomes (as_client_reports)
	OutcomeSource string      // outcomes.source

	BucketInterval time.Duration // aggregator.bucket_interval (10 s)
	InitialDelay   time.Duration // aggregator.initial_delay (30 s)

	BatchInterval       time.Duration // cache.batch_interval (100 ms)
	BatchSize           int           // cache.batch_size (500)
	GlobalFetchInterval time.Duration // cache.global_config_fetch_interval (10 s)
	ProjectExpiry       time.Duration // cache.project_expiry (300 s)
	ProjectGracePeriod  time.Duration // cache.project_grace_period (120 s)

	MaxThreadCount        int           // limits.max_thread_count (0 = leave GOMAXPROCS)
	MaxConcurrentRequests int           // limits.max_concurrent_requests (100)
	MaxConcurrentQueries  int           // limits.max_concurrent_queries (5)
	QueryTimeout          time.Duration // limits.query_timeout (30 s)
	ShutdownTimeout       time.Duration // limits.shutdown_timeout (10 s)
	IdleTimeout           time.Duration // limits.idle_timeout (0 = none)
	MaxEnvelopeSize       int64         // limits.max_envelope_size (200 MiB, decoded)
	MaxEventSize          int64         // limits.max_event_size (1 MiB; event, transaction)
	MaxCheckInSize        int64         // limits.max_check_in_size (100 KiB)
	MaxLogSize            int64         // limits.max_log_size (2 MiB per log; container ≤ max_container_size)
	MaxContainerSize      int64         // limits.max_container_size (12 MiB)
	MaxAttachmentSize     int64         // limits.max_attachment_size (200 MiB)
	MaxSessionCount       int           // limits.max_session_count (100)

	LogLevel LogLevel // logging.level (info)

	StatsdAddr   string // metrics.statsd ("" = off)
	StatsdPrefix string // metrics.prefix (sentry.relay)

	// Stand-in extensions (a real Relay ignores the unknown "standin" section).
	MaxBufferedEnvelopes int   // standin.max_buffered_envelopes (10 000)
	MaxBufferedBytes     int64 // standin.max_buffered_bytes (256 MiB)
	// Capacity is standin.capacity: envelopes per second that the
	// processing workers handle in total (0 = unlimited). Above it,
	// envelopes are still accepted and wait in the buffer.
	Capacity float64
}

// OutcomeMode is outcomes.emit_outcomes.
type OutcomeMode string

// Outcome modes (docs/protocol.md, Outcomes).
const (
	OutcomesOff             OutcomeMode = "false"
	OutcomesAsClientReports OutcomeMode = "as_client_reports"
	OutcomesOn              OutcomeMode = "true"
)

// DefaultConfig returns Relay's defaults for every key the stand-in reads.
func DefaultConfig() Config {
	return Config{
		Host:                  "127.0.0.1",
		Port:                  3000,
		HTTPTimeout:           5 * time.Second,
		Encoding:              compression.Zstd,
		AuthInterval:          600 * time.Second,
		RetryDelay:            time.Second,
		MaxRetryInterval:      60 * time.Second,
		OutageGracePeriod:     10 * time.Second,
		EmitOutcomes:          OutcomesAsClientReports,
		BucketInterval:        10 * time.Second,
		InitialDelay:          30 * time.Second,
		BatchInterval:         100 * time.Millisecond,
		BatchSize:             500,
		GlobalFetchInterval:   10 * time.Second,
		ProjectExpiry:         300 * time.Second,
		ProjectGracePeriod:    120 * time.Second,
		MaxConcurrentRequests: 100,
		MaxConcurrentQueries:  5,
		QueryTimeout:          30 * time.Second,
		ShutdownTimeout:       10 * time.Second,
		MaxEnvelopeSize:       200 << 20,
		MaxEventSize:          1 << 20,
		MaxCheckInSize:        100 << 10,
		MaxLogSize:            2 << 20,
		MaxContainerSize:      12 << 20,
		MaxAttachmentSize:     200 << 20,
		MaxSessionCount:       100,
		LogLevel:              LevelInfo,
		StatsdPrefix:          "sentry.relay",
		MaxBufferedEnvelopes:  10_000,
		MaxBufferedBytes:      256 << 20,
	}
}

// fileConfig mirrors the YAML. Pointers distinguish "absent" from zero.
type fileConfig struct {
	Relay struct {
		Mode     string `yaml:"mode"`
		Upstream string `yaml:"upstream"`
		Host     string `yaml:"host"`
		Port     *int   `yaml:"port"`
	} `yaml:"relay"`
	HTTP struct {
		Timeout          *float64 `yaml:"timeout"`
		Encoding         *string  `yaml:"encoding"`
		AuthInterval     *float64 `yaml:"auth_interval"`
		RetryDelay       *float64 `yaml:"retry_delay"`
		MaxRetryInterval *float64 `yaml:"max_retry_interval"`
		OutageGrace      *float64 `yaml:"outage_grace_period"`
	} `yaml:"http"`
	Outcomes struct {
		EmitOutcomes yaml.Node `yaml:"emit_outcomes"`
		Source       string    `yaml:"source"`
	} `yaml:"outcomes"`
	Aggregator struct {
		BucketInterval *float64 `yaml:"bucket_interval"`
		InitialDelay   *float64 `yaml:"initial_delay"`
	} `yaml:"aggregator"`
	Cache struct {
		BatchInterval       *float64 `yaml:"batch_interval"` // milliseconds
		BatchSize           *int     `yaml:"batch_size"`
		GlobalFetchInterval *float64 `yaml:"global_config_fetch_interval"`
		ProjectExpiry       *float64 `yaml:"project_expiry"`
		ProjectGracePeriod  *float64 `yaml:"project_grace_period"`
	} `yaml:"cache"`
	Limits struct {
		MaxThreadCount        *int      `yaml:"max_thread_count"`
		MaxConcurrentRequests *int      `yaml:"max_concurrent_requests"`
		MaxConcurrentQueries  *int      `yaml:"max_concurrent_queries"`
		QueryTimeout          *float64  `yaml:"query_timeout"`
		ShutdownTimeout       *float64  `yaml:"shutdown_timeout"`
		IdleTimeout           *float64  `yaml:"idle_timeout"`
		MaxEnvelopeSize       yaml.Node `yaml:"max_envelope_size"`
		MaxEventSize          yaml.Node `yaml:"max_event_size"`
		MaxCheckInSize        yaml.Node `yaml:"max_check_in_size"`
		MaxLogSize            yaml.Node `yaml:"max_log_size"`
		MaxContainerSize      yaml.Node `yaml:"max_container_size"`
		MaxAttachmentSize     yaml.Node `yaml:"max_attachment_size"`
		MaxSessionCount       *int      `yaml:"max_session_count"`
	} `yaml:"limits"`
	Logging struct {
		Level string `yaml:"level"`
	} `yaml:"logging"`
	Metrics struct {
		Statsd string  `yaml:"statsd"`
		Prefix *string `yaml:"prefix"`
	} `yaml:"metrics"`
	Standin struct {
		MaxBufferedEnvelopes *int      `yaml:"max_buffered_envelopes"`
		MaxBufferedBytes     yaml.Node `yaml:"max_buffered_bytes"`
		Capacity             *float64  `yaml:"capacity"`
	} `yaml:"standin"`
}

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

// ParseConfig parses config.yml contents. Unknown keys are ignored, as Relay
// does; known keys with bad values are errors.
func ParseConfig(b []byte) (Config, error) {
	var f fileConfig
	if err := yaml.Unmarshal(b, &f); err != nil {
		return Config{}, fmt.Errorf("standinrelay: config: %w", err)
	}
	c := DefaultConfig()
	if f.Relay.Mode != "managed" {
		return Config{}, fmt.Errorf("standinrelay: config: relay.mode is %q, the stand-in only does managed", f.Relay.Mode)
	}
	if f.Relay.Upstream == "" {
		return Config{}, errors.New("standinrelay: config: relay.upstream is required")
	}
	u, err := url.Parse(f.Relay.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return Config{}, fmt.Errorf("standinrelay: config: relay.upstream %q: want a bare origin http://host:port/", f.Relay.Upstream)
	}
	u.Path = ""
	c.Upstream = u
	if f.Relay.Host != "" {
		c.Host = f.Relay.Host
	}
	if f.Relay.Port != nil {
		if *f.Relay.Port < 0 || *f.Relay.Port > 65535 {
			return Config{}, fmt.Errorf("standinrelay: config: relay.port %d out of range", *f.Relay.Port)
		}
		c.Port = *f.Relay.Port
	}

	var errs []error
	secs := func(name string, v *float64, dst *time.Duration, unit time.Duration, allowZero bool) {
		if v == nil {
			return
		}
		if math.IsNaN(*v) || *v < 0 || (!allowZero && *v == 0) || *v > 1e7 {
			errs = append(errs, fmt.Errorf("%s: %v out of range", name, *v))
			return
		}
		*dst = time.Duration(*v * float64(unit))
	}
	positive := func(name string, v *int, dst *int, allowZero bool) {
		if v == nil {
			return
		}
		if *v < 0 || (!allowZero && *v == 0) {
			errs = append(errs, fmt.Errorf("%s: %d out of range", name, *v))
			return
		}
		*dst = *v
	}
	secs("http.timeout", f.HTTP.Timeout, &c.HTTPTimeout, time.Second, false)
	secs("http.auth_interval", f.HTTP.AuthInterval, &c.AuthInterval, time.Second, false)
	secs("http.retry_delay", f.HTTP.RetryDelay, &c.RetryDelay, time.Second, false)
	secs("http.max_retry_interval", f.HTTP.MaxRetryInterval, &c.MaxRetryInterval, time.Second, false)
	secs("http.outage_grace_period", f.HTTP.OutageGrace, &c.OutageGracePeriod, time.Second, true)
	if f.HTTP.Encoding != nil {
		e, err := compression.ParseEncoding(*f.HTTP.Encoding)
		if err != nil {
			errs = append(errs, fmt.Errorf("http.encoding: %w", err))
		} else {
			c.Encoding = e
		}
	}
	if mode, err := parseOutcomeMode(&f.Outcomes.EmitOutcomes); err != nil {
		errs = append(errs, err)
	} else if mode != "" {
		c.EmitOutcomes = mode
	}
	c.OutcomeSource = f.Outcomes.Source
	secs("aggregator.bucket_interval", f.Aggregator.BucketInterval, &c.BucketInterval, time.Second, false)
	secs("aggregator.initial_delay", f.Aggregator.InitialDelay, &c.InitialDelay, time.Second, true)
	secs("cache.batch_interval", f.Cache.BatchInterval, &c.BatchInterval, time.Millisecond, true)
	positive("cache.batch_size", f.Cache.BatchSize, &c.BatchSize, false)
	secs("cache.global_config_fetch_interval", f.Cache.GlobalFetchInterval, &c.GlobalFetchInterval, time.Second, false)
	secs("cache.project_expiry", f.Cache.ProjectExpiry, &c.ProjectExpiry, time.Second, false)
	secs("cache.project_grace_period", f.Cache.ProjectGracePeriod, &c.ProjectGracePeriod, time.Second, true)
	positive("limits.max_thread_count", f.Limits.MaxThreadCount, &c.MaxThreadCount, false)
	positive("limits.max_concurrent_requests", f.Limits.MaxConcurrentRequests, &c.MaxConcurrentRequests, false)
	positive("limits.max_concurrent_queries", f.Limits.MaxConcurrentQueries, &c.MaxConcurrentQueries, false)
	secs("limits.query_timeout", f.Limits.QueryTimeout, &c.QueryTimeout, time.Second, false)
	secs("limits.shutdown_timeout", f.Limits.ShutdownTimeout, &c.ShutdownTimeout, time.Second, true)
	secs("limits.idle_timeout", f.Limits.IdleTimeout, &c.IdleTimeout, time.Second, true)
	for _, sz := range []struct {
		name string
		node *yaml.Node
		dst  *int64
	}{
		{"limits.max_envelope_size", &f.Limits.MaxEnvelopeSize, &c.MaxEnvelopeSize},
		{"limits.max_event_size", &f.Limits.MaxEventSize, &c.MaxEventSize},
		{"limits.max_check_in_size", &f.Limits.MaxCheckInSize, &c.MaxCheckInSize},
		{"limits.max_log_size", &f.Limits.MaxLogSize, &c.MaxLogSize},
		{"limits.max_container_size", &f.Limits.MaxContainerSize, &c.MaxContainerSize},
		{"limits.max_attachment_size", &f.Limits.MaxAttachmentSize, &c.MaxAttachmentSize},
	} {
		if n, ok, err := parseByteSize(sz.node); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sz.name, err))
		} else if ok {
			*sz.dst = n
		}
	}
	positive("limits.max_session_count", f.Limits.MaxSessionCount, &c.MaxSessionCount, false)
	if f.Logging.Level != "" {
		l, err := ParseLogLevel(f.Logging.Level)
		if err != nil {
			errs = append(errs, err)
		} else {
			c.LogLevel = l
		}
	}
	c.StatsdAddr = f.Metrics.Statsd
	if f.Metrics.Prefix != nil {
		c.StatsdPrefix = *f.Metrics.Prefix
	}
	positive("standin.max_buffered_envelopes", f.Standin.MaxBufferedEnvelopes, &c.MaxBufferedEnvelopes, false)
	if n, ok, err := parseByteSize(&f.Standin.MaxBufferedBytes); err != nil {
		errs = append(errs, fmt.Errorf("standin.max_buffered_bytes: %w", err))
	} else if ok {
		c.MaxBufferedBytes = n
	}
	if v := f.Standin.Capacity; v != nil {
		if math.IsNaN(*v) || *v < 0 || *v > maxCapacity {
			errs = append(errs, fmt.Errorf("standin.capacity: %v: want envelopes per second, 0 (unlimited) to %g", *v, float64(maxCapacity)))
		} else {
			c.Capacity = *v
		}
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("standinrelay: config: %w", errors.Join(errs...))
	}
	return c, nil
}

// maxCapacity bounds standin.capacity (one envelope per microsecond; more
// than any stand-in can process).
const maxCapacity = 1e6

// parseOutcomeMode reads false / true / "as_client_reports".
func parseOutcomeMode(n *yaml.Node) (OutcomeMode, error) {
	if n.Kind == 0 {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", errors.New("outcomes.emit_outcomes: want true, false or \"as_client_reports\"")
	}
	switch strings.ToLower(n.Value) {
	case "true":
		return OutcomesOn, nil
	case "false":
		return OutcomesOff, nil
	case "as_client_reports":
		return OutcomesAsClientReports, nil
	}
	return "", fmt.Errorf("outcomes.emit_outcomes: %q: want true, false or \"as_client_reports\"", n.Value)
}

// parseByteSize reads a byte count: an integer or a string like "1MiB", "10MB", "512KiB".
func parseByteSize(n *yaml.Node) (int64, bool, error) {
	if n.Kind == 0 {
		return 0, false, nil
	}
	if n.Kind != yaml.ScalarNode {
		return 0, false, errors.New("want a byte size")
	}
	s := strings.TrimSpace(n.Value)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"kB", 1000}, {"KB", 1000}, {"MB", 1000_000}, {"GB", 1000_000_000}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > math.MaxInt64/mult {
		return 0, false, fmt.Errorf("bad byte size %q", n.Value)
	}
	return v * mult, true, nil
}

// ListenAddr is host:port to listen on.
func (c Config) ListenAddr() string {
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}
