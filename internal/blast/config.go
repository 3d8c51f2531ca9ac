package blast

import (
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/internal/pool"
)

// Defaults applied by Run to zero Config fields.
const (
	DefaultDuration    = 10 * time.Second
	DefaultMaxInflight = 4096
	DefaultMaxConns    = 512
	DefaultConcurrency = 64
	DefaultTimeout     = 5 * time.Second
	DefaultSDKClient   = "relayload-blast/1.0"
)

// Limits of the shared schedule, refused beyond (Config fields Rate, Count,
// Warmup and Duration): the pacer releases one slot at a time, so a rate or
// count it cannot work through would spin for minutes, and slot times and
// counts must stay far from overflowing int64 nanoseconds and counters.
const (
	// MinRate and MaxRate bound an open-loop Rate, in requests per second
	// over all shards.
	MinRate = 0.001
	MaxRate = 1e7
	// MaxCount bounds Count, and every counter of a Result.
	MaxCount = int64(1e15)
	// MaxSpan bounds Warmup + Duration.
	MaxSpan = 366 * 24 * time.Hour
	// MaxConcurrency bounds the closed loop's workers, each started at
	// once with its own connection (orchestrate takes as many).
	MaxConcurrency = 10000
)

// RateLimits says, for error messages, which rates a Config takes.
var RateLimits = fmt.Sprintf("a rate from %s to %s requests/s", formatRate(MinRate), formatRate(MaxRate))

// CheckRate reports whether r (requests per second, not 0: closed loop)
// is a rate the schedule can run: MinRate to MaxRate.
func CheckRate(r float64) error {
	if !(r >= MinRate && r <= MaxRate) { // NaN too
		return fmt.Errorf("%s: want %s", formatRate(r), RateLimits)
	}
	return nil
}

// formatRate writes a rate in plain digits (10000000, not 1e+07) unless it
// is out of any sane range.
func formatRate(r float64) string {
	if r != 0 && (abs(r) >= 1e12 || abs(r) < 1e-6) {
		return strconv.FormatFloat(r, 'g', -1, 64)
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// MaxKinds bounds the kinds of envelope in a pool: requests are counted
// per kind in fixed tables.
const MaxKinds = 256

// Validity limits: a run that exceeds them is marked Invalid.
const (
	MaxDropFraction = 0.001                // dropped / scheduled
	MaxLagP99       = 5 * time.Millisecond // schedule lag p99
	// MaxNoAnswerFraction bounds the requests sent that got no answer at
	// all (refused, reset, timed out): the latency percentiles cover only
	// answered requests (any status), so beyond 1% even p99 says nothing
	// of the run (a target that died mid-run).
	MaxNoAnswerFraction = 0.01
)

// ErrConfig is matched (errors.Is) by every error caused by a bad Config;
// the CLI turns it into exit status 2.
var ErrConfig = configerr.ErrConfig

// ConfigError is a bad Config: the field and why.
type ConfigError = configerr.Error

// Config describes one blast run.
type Config struct {
	// Target is the base URL of the Relay (or fake upstream), e.g.
	// "http://127.0.0.1:3000"; each request goes to Target + the project's
	// /api/<id>/envelope/ path. Only http:// is supported.
	Target string
	// Pool holds the envelopes to send; slot k sends entry k mod len. An
	// entry without a UserAgent (a recorded envelope that had none) is
	// sent with SDKClient as its User-Agent.
	Pool *pool.Pool

	// Rate is the total requests per second of the shared schedule, over all
	// shards. 0 means closed loop: Concurrency workers send back to back.
	Rate float64
	// Concurrency is the number of closed-loop workers (Rate 0 only).
	Concurrency int
	// Duration is the measured length of the schedule (after Warmup).
	// Count is the number of measured slots of the shared schedule (all
	// shards together). The run ends at whichever comes first; both zero
	// means DefaultDuration. (Closed loop: Count includes warm-up requests.)
	Duration time.Duration
	Count    int64
	// Warmup precedes the measured schedule: requests due in the first
	// Warmup are sent but only counted in Result.WarmupSent / Windows.
	Warmup time.Duration

	// MaxInflight bounds requests in flight; a slot due while MaxInflight
	// requests are outstanding is dropped and counted, never queued.
	MaxInflight int
	// MaxConns bounds connections to the target (default DefaultMaxConns,
	// at most MaxInflight). Requests beyond it wait for a free connection
	// inside the client, and the wait counts in their latency; without the
	// bound, a stall of a few hundred ms made blast dial thousands of
	// connections at once, which cost more than the stall itself.
	MaxConns int
	// Shard i of Shards sends the global slots k ≡ i (mod Shards).
	Shard, Shards int

	// Timeout bounds each request (connect, send, response).
	Timeout time.Duration
	// Grace is how long a cancelled run waits for in-flight requests
	// (default Timeout); requests still out after it count as Abandoned.
	Grace time.Duration
	// Client selects the HTTP client: ClientFastHTTP (default) or ClientNetHTTP.
	Client string
	// SDKClient is the sentry_client value in X-Sentry-Auth.
	SDKClient string

	// Progress, if set, receives one line per second: rate, sent, errors,
	// dropped and the latency p99 of the last complete second.
	Progress io.Writer
	// Sent, if set, counts every request as it completes (answered or
	// failed), so that a caller can watch the rate while the run goes on.
	Sent *atomic.Int64

	clock clock // nil: real time; tests inject a fake
}

// withDefaults validates c and fills defaults. Errors are *ConfigError
// (they wrap ErrConfig) naming the Config field.
func (c Config) withDefaults() (Config, *url.URL, error) {
	u, err := ParseTarget(c.Target)
	if err != nil {
		return c, nil, err
	}
	if err := c.checkPool(); err != nil {
		return c, nil, err
	}
	if err := c.scheduleDefaults(); err != nil {
		return c, nil, err
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Rate == 0 && c.Concurrency > c.MaxInflight {
		c.MaxInflight = c.Concurrency
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	c.MaxConns = min(c.MaxConns, c.MaxInflight)
	if c.Rate == 0 {
		c.MaxConns = max(c.MaxConns, c.Concurrency)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Grace == 0 {
		c.Grace = c.Timeout
	}
	if c.SDKClient == "" {
		c.SDKClient = DefaultSDKClient
	}
	switch c.Client {
	case "":
		c.Client = ClientFastHTTP
	case ClientFastHTTP, ClientNetHTTP:
	default:
		return c, nil, configerr.Errorf("Client", "%q: want %s or %s", c.Client, ClientFastHTTP, ClientNetHTTP)
	}
	return c, u, nil
}

// CheckSchedule reports what Run would refuse in the fields that define
// the schedule (Rate, Concurrency, Duration, Count, Warmup, Shard, Shards), so that a
// program can refuse them before it builds a pool. Errors are *ConfigError
// naming the field and the limit.
func (c Config) CheckSchedule() error {
	return c.scheduleDefaults()
}

// scheduleDefaults checks the schedule's fields and fills their defaults.
func (c *Config) scheduleDefaults() error {
	if err := c.check(); err != nil {
		return err
	}
	if c.Shards == 0 && c.Shard == 0 {
		c.Shards = 1
	}
	if c.Shards < 1 || c.Shard < 0 || c.Shard >= c.Shards {
		return configerr.Errorf("Shard", "%d/%d: want 0 <= i < N", c.Shard, c.Shards)
	}
	if c.Duration == 0 && c.Count == 0 {
		c.Duration = DefaultDuration
	}
	return c.checkMeasured()
}

// checkPool validates the pool.
func (c *Config) checkPool() error {
	if c.Pool == nil || len(c.Pool.Entries) == 0 {
		return configerr.New("Pool", "empty pool")
	}
	kinds := map[pool.Kind]bool{}
	for i, e := range c.Pool.Entries {
		if e.Project < 0 || e.Project >= len(c.Pool.Options.Projects) {
			return configerr.Errorf("Pool", "entry %d: project %d out of range", i, e.Project)
		}
		kinds[e.Kind] = true
	}
	if len(kinds) > MaxKinds {
		return configerr.Errorf("Pool", "%d kinds of envelope: at most %d are counted", len(kinds), MaxKinds)
	}
	return nil
}

// check validates the fields that have no default to fill.
func (c *Config) check() error {
	if c.Rate != 0 {
		if err := CheckRate(c.Rate); err != nil {
			return configerr.Errorf("Rate", "%v or max", err)
		}
	}
	for _, d := range []struct {
		field string
		v     int64
	}{{"Duration", int64(c.Duration)}, {"Count", c.Count}, {"Warmup", int64(c.Warmup)}, {"Timeout", int64(c.Timeout)},
		{"Grace", int64(c.Grace)}, {"Concurrency", int64(c.Concurrency)}, {"MaxInflight", int64(c.MaxInflight)}, {"MaxConns", int64(c.MaxConns)}} {
		if d.v < 0 {
			return configerr.New(d.field, "must not be negative")
		}
	}
	if c.Concurrency > MaxConcurrency {
		return configerr.Errorf("Concurrency", "%d: want 1 to %d", c.Concurrency, MaxConcurrency)
	}
	if c.Count > MaxCount {
		return configerr.Errorf("Count", "%d: want at most %d", c.Count, MaxCount)
	}
	if c.Warmup > MaxSpan || c.Duration > MaxSpan || c.Warmup+c.Duration > MaxSpan {
		return configerr.New("Duration", fmt.Sprintf("%v with %%s %v: want them together at most %v", c.Duration, c.Warmup, MaxSpan), "Warmup")
	}
	return nil
}

// checkMeasured refuses a measured schedule that holds no slot for some
// shard: it would send nothing, or report a rate from a single request
// timed over microseconds. Rate·Duration slots fall in the measured period,
// and a shard needs one of them; Count slots are counted over all shards.
func (c *Config) checkMeasured() error {
	if c.Count > 0 && c.Count < int64(c.Shards) {
		return configerr.New("Count", fmt.Sprintf("%d with %%s i/%d: want at least %d, one slot per shard", c.Count, c.Shards, c.Shards), "Shard")
	}
	if c.Rate > 0 && c.Duration > 0 {
		least := time.Duration(math.Ceil(float64(c.Shards) / c.Rate * 1e9))
		if c.Duration < least {
			per := ""
			if c.Shards > 1 {
				per = fmt.Sprintf(" per shard (%d)", c.Shards)
			}
			return configerr.New("Duration", fmt.Sprintf("%v at %%s %s/s holds less than one request%s: want at least %v, or a higher %%s",
				c.Duration, formatRate(c.Rate), per, least), "Rate", "Rate")
		}
	}
	return nil
}

// ParseTarget checks a target URL: http://host[:port][/prefix], no query.
func ParseTarget(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, configerr.Wrap("Target", fmt.Errorf("%q: %w", s, err))
	}
	if u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, configerr.Errorf("Target", "%q: want http://host[:port][/path]", s)
	}
	if u.Port() == "" {
		u.Host += ":80"
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// ForSending returns a copy of p holding only what sending needs, compacted:
// every body is copied into one contiguous arena and the raw envelopes
// (kept by pool for Raw and Dump) are not referenced. Once p is dropped, the
// build's scattered buffers can all be freed and returned to the OS, so
// blast's RSS while sending is about the bodies' size plus sending state.
func ForSending(p *pool.Pool) *pool.Pool {
	var total int
	for _, e := range p.Entries {
		total += len(e.Body)
	}
	arena := make([]byte, 0, total)
	out := &pool.Pool{Options: p.Options, Entries: make([]pool.Entry, len(p.Entries))}
	for i, e := range p.Entries {
		start := len(arena)
		arena = append(arena, e.Body...)
		out.Entries[i] = pool.Entry{
			Kind: e.Kind, Project: e.Project, EventID: e.EventID, UserAgent: e.UserAgent,
			ForwardedFor: e.ForwardedFor, Body: arena[start:len(arena):len(arena)], RawSize: e.RawSize, Items: e.Items,
		}
	}
	return out
}
