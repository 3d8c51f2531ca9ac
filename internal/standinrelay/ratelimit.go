package standinrelay

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rateLimit is one limit learned from an upstream 429.
type rateLimit struct {
	categories []string // data categories; none: all
	until      time.Time
}

// parseRateLimits reads a 429's X-Sentry-Rate-Limits
// ("60:error;transaction:organization:reason, …"; invalid parts skipped),
// or without one a limit on all categories for Retry-After seconds (0 when
// absent), like Relay's UpstreamRateLimits::scope
// (relay-server/src/services/upstream.rs, utils/rate_limits.rs). Scopes
// and reasons are not kept: Relay merges a 429's limits into the rate
// limits of the one project whose envelope got it.
func parseRateLimits(header, retryAfter string, now time.Time) []rateLimit {
	var out []rateLimit
	for part := range strings.SplitSeq(header, ",") {
		f := strings.Split(strings.TrimSpace(part), ":")
		secs, err := strconv.ParseFloat(f[0], 64)
		if err != nil || !(secs >= 0) {
			continue
		}
		l := rateLimit{until: now.Add(seconds(secs))}
		if len(f) > 1 {
			for c := range strings.SplitSeq(f[1], ";") {
				if c != "" {
					l.categories = append(l.categories, c)
				}
			}
		}
		out = append(out, l)
	}
	if len(out) > 0 {
		return out
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(retryAfter), 64)
	if err != nil || !(secs >= 0) {
		secs = 0
	}
	return []rateLimit{{until: now.Add(seconds(secs))}}
}

// seconds is s whole seconds, rounded up, at most a day.
func seconds(s float64) time.Duration {
	return time.Duration(math.Ceil(min(s, 86400))) * time.Second
}

// itemCategory is the data category a rate limit names for an item type
// of relayload's traffic (other items are limited only by limits on all
// categories).
func itemCategory(typ string) string {
	switch typ {
	case "event":
		return "error"
	case "transaction":
		return "transaction"
	case "session", "sessions":
		return "session"
	case "check_in":
		return "monitor"
	case "log":
		return "log_item"
	}
	return ""
}

// rateLimits holds the active limits per project key.
type rateLimits struct {
	mu    sync.Mutex
	byKey map[string][]rateLimit
}

func (rl *rateLimits) add(key string, ls []rateLimit) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.byKey == nil {
		rl.byKey = map[string][]rateLimit{}
	}
	rl.byKey[key] = append(rl.byKey[key], ls...)
}

// check reports whether an item of type typ for key is limited now, and
// until when.
func (rl *rateLimits) check(key, typ string, now time.Time) (time.Time, bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.byKey[key]) == 0 {
		return time.Time{}, false
	}
	ls := slices.DeleteFunc(rl.byKey[key], func(l rateLimit) bool { return !l.until.After(now) })
	rl.byKey[key] = ls
	var until time.Time
	cat := itemCategory(typ)
	for _, l := range ls {
		if len(l.categories) == 0 || cat != "" && slices.Contains(l.categories, cat) {
			if l.until.After(until) {
				until = l.until
			}
		}
	}
	return until, !until.IsZero()
}
