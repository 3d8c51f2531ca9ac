package upstream

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzCheckRateLimits: an accepted rate_limits value is bounded in length
// and every quota's retry_after in seconds.
func FuzzCheckRateLimits(f *testing.F) {
	for _, s := range []string{"60::organization", "60:error;transaction:project:quota, 30::key", "3601:error", "x:error", ",,", "1.5:error", "-1:error", "NaN:error"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if checkRateLimits(v) != nil {
			return
		}
		if len(v) > maxRateLimitsLen {
			t.Fatalf("accepted %d bytes", len(v))
		}
		for _, q := range strings.Split(v, ",") {
			ra, _, _ := strings.Cut(strings.TrimSpace(q), ":")
			if ra == "" && strings.TrimSpace(q) == "" {
				continue
			}
			if secs, err := strconv.ParseFloat(ra, 64); err != nil || secs < 0 || secs > maxRetryAfter {
				t.Fatalf("accepted %q with retry_after %q", v, ra)
			}
		}
	})
}
