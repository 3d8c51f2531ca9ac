package blast

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/projects"
)

// ParseRate parses a rate: requests per second from MinRate to MaxRate, or
// "max" (returned as 0: closed loop).
func ParseRate(s string) (float64, error) {
	if strings.EqualFold(s, "max") {
		return 0, nil
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || CheckRate(r) != nil {
		return 0, configerr.Errorf("Rate", "%q: want %s, or max", s, RateLimits)
	}
	return r, nil
}

// ParseShard parses a shard "i/N" (0 <= i < N).
func ParseShard(s string) (shard, shards int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 0, configerr.Errorf("Shard", "%q: want i/N with 0 <= i < N", s)
	}
	return i, n, nil
}

// FetchTimeout bounds FetchProjects.
const FetchTimeout = 30 * time.Second

// FetchProjects reads the project list a fake upstream serves at
// GET <url> (its /projects endpoint): a JSON array of projects. A URL that
// is not http:// wraps ErrConfig.
func FetchProjects(ctx context.Context, url string) ([]projects.Project, error) {
	u, err := neturl.Parse(url)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, configerr.Errorf("Projects", "from %q: want an http:// URL", url)
	}
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, configerr.Wrap("Projects", fmt.Errorf("from %s: %w", url, err))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("blast: projects from %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("blast: projects from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("blast: projects from %s: status %d: %.200s", url, resp.StatusCode, body)
	}
	ps, err := parseProjects(body)
	if err != nil {
		return nil, fmt.Errorf("blast: projects from %s: %w", url, err)
	}
	return ps, nil
}

// parseProjects decodes a /projects answer: a non-empty JSON array of
// projects, each with an id and a public key.
func parseProjects(body []byte) ([]projects.Project, error) {
	var ps []projects.Project
	if err := json.Unmarshal(body, &ps); err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, errors.New("empty list")
	}
	for i, p := range ps {
		if p.ID <= 0 || p.PublicKey == "" {
			return nil, fmt.Errorf("entry %d has no id or public_key", i)
		}
	}
	return ps, nil
}
