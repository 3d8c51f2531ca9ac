package standinrelay

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxRateLimitScopes bounds the rate-limit cache.
const maxRateLimitScopes = 10_000

// maxRetryAfter caps a limit's duration (guards against overflow).
const maxRetryAfter = 30 * 24 * time.Hour

func retryDuration(secs float64) time.Duration {
	if secs*float64(time.Second) >= float64(maxRetryAfter) {
		return maxRetryAfter
	}
	return time.Duration(math.Ceil(secs)) * time.Second
}

// rateLimit is one active limit learned from the upstream's 429.
type rateLimit struct {
	categories []string // data category names; empty = all
	scope      string   // organization | project | key
	reason     string   // reason code ("" = none)
	until      time.Time
}

func (l rateLimit) covers(category string) bool {
	return len(l.categories) == 0 || containsString(l.categories, category)
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// parseRateLimits reads X-Sentry-Rate-Limits
// ("60:error;transaction:project:rate_limited, 10::key:generic"); without
// that header Retry-After gives one key-scoped limit on all categories with
// reason "generic"; without either, 60 s (Relay's default).
func parseRateLimits(header, retryAfter string, now time.Time) []rateLimit {
	var out []rateLimit
	for part := range strings.SplitSeq(header, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, ":")
		secs, err := strconv.ParseFloat(f[0], 64)
		if err != nil || secs < 0 || math.IsNaN(secs) {
			continue
		}
		l := rateLimit{scope: "organization", until: now.Add(retryDuration(secs))}
		if len(f) > 1 && f[1] != "" {
			for c := range strings.SplitSeq(f[1], ";") {
				if c = strings.TrimSpace(c); c != "" {
					l.categories = append(l.categories, c)
				}
			}
		}
		if len(f) > 2 && f[2] != "" {
			l.scope = f[2]
		}
		if len(f) > 3 {
			l.reason = f[3]
		}
		out = append(out, l)
	}
	if len(out) > 0 {
		return out
	}
	secs := 60.0
	if v, err := strconv.ParseFloat(strings.TrimSpace(retryAfter), 64); err == nil && v >= 0 && !math.IsNaN(v) {
		secs = v
	}
	return []rateLimit{{scope: "key", reason: "generic", until: now.Add(retryDuration(secs))}}
}

// scoping identifies who a limit applies to.
type scoping struct {
	orgID, projectID int64
	key              string
}

func (s scoping) scopeID(scope string) string {
	switch scope {
	case "organization":
		return "o" + strconv.FormatInt(s.orgID, 10)
	case "project":
		return "p" + strconv.FormatInt(s.projectID, 10)
	default:
		return "k" + s.key
	}
}

// rateLimits caches active limits per scope.
type rateLimits struct {
	mu      sync.Mutex
	byScope map[string][]rateLimit
}

func newRateLimits() *rateLimits { return &rateLimits{byScope: map[string][]rateLimit{}} }

func (rl *rateLimits) add(s scoping, limits []rateLimit, now time.Time) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.byScope) >= maxRateLimitScopes {
		rl.expireLocked(now)
	}
	for _, l := range limits {
		id := s.scopeID(l.scope)
		if _, ok := rl.byScope[id]; !ok && len(rl.byScope) >= maxRateLimitScopes {
			continue
		}
		kept := rl.byScope[id][:0]
		for _, old := range rl.byScope[id] {
			if old.until.After(now) && !(slices.Equal(old.categories, l.categories) && old.reason == l.reason) {
				kept = append(kept, old)
			}
		}
		rl.byScope[id] = append(kept, l)
	}
}

func (rl *rateLimits) expireLocked(now time.Time) {
	for id, ls := range rl.byScope {
		kept := ls[:0]
		for _, l := range ls {
			if l.until.After(now) {
				kept = append(kept, l)
			}
		}
		if len(kept) == 0 {
			delete(rl.byScope, id)
		} else {
			rl.byScope[id] = kept
		}
	}
}

// check returns the longest active limit covering category for s.
func (rl *rateLimits) check(s scoping, category string, now time.Time) (rateLimit, bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if len(rl.byScope) == 0 {
		return rateLimit{}, false
	}
	var best rateLimit
	found := false
	for _, scope := range [...]string{"organization", "project", "key"} {
		for _, l := range rl.byScope[s.scopeID(scope)] {
			if l.scope == scope && l.until.After(now) && l.covers(category) && (!found || l.until.After(best.until)) {
				best, found = l, true
			}
		}
	}
	return best, found
}

// formatRateLimits renders limits for X-Sentry-Rate-Limits and returns the
// longest remaining time in whole seconds for Retry-After.
func formatRateLimits(limits []rateLimit, now time.Time) (header string, retryAfter int64) {
	var sb strings.Builder
	for i, l := range limits {
		secs := int64(math.Ceil(l.until.Sub(now).Seconds()))
		secs = max(secs, 1)
		retryAfter = max(retryAfter, secs)
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(secs, 10))
		sb.WriteByte(':')
		sb.WriteString(strings.Join(l.categories, ";"))
		sb.WriteByte(':')
		sb.WriteString(l.scope)
		if l.reason != "" {
			sb.WriteByte(':')
			sb.WriteString(l.reason)
		}
	}
	return sb.String(), retryAfter
}
