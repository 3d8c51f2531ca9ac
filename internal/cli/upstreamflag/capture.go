package upstreamflag

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/relayload/relayload/internal/capture"
)

// MaxCaptureCount bounds --capture-max's count, so that file names keep
// their eight digits and sort in keep order.
const MaxCaptureCount = 99_999_999

// ParseCaptureMax parses a capture bound "N[,SIZE]": at most N envelopes
// and SIZE decoded bytes ("10000", "10000,1GiB", ",512MiB"); a part left
// out takes its default (capture.DefaultMaxCount, capture.DefaultMaxBytes).
func ParseCaptureMax(s string) (count int, size int64, err error) {
	count, size = capture.DefaultMaxCount, capture.DefaultMaxBytes
	n, sz, hasSize := strings.Cut(s, ",")
	if n = strings.TrimSpace(n); n == "" && !hasSize {
		return 0, 0, fmt.Errorf("capture bound %q: want N[,SIZE], e.g. 10000,1GiB", s)
	}
	if n != "" {
		v, err := strconv.Atoi(n)
		if err != nil || v < 1 || v > MaxCaptureCount {
			return 0, 0, fmt.Errorf("capture bound %q: envelope count %q: want 1..%d", s, n, MaxCaptureCount)
		}
		count = v
	}
	if hasSize {
		if size, err = ParseSize(sz); err != nil {
			return 0, 0, fmt.Errorf("capture bound %q: %w", s, err)
		}
	}
	return count, size, nil
}
