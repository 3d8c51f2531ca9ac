// Package projects derives the load test's Sentry projects from a seed.
//
// fake-upstream serves these projects' configs and blast addresses its
// envelopes to them, so both programs must derive exactly the same list from
// the same seed and count. The derivation uses math/rand/v2's PCG seeded with
// (seed, index), so project i does not depend on how many projects follow it:
// --projects 10 is a prefix of --projects 100.
package projects

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
)

// MaxProjects bounds --projects; Relay fetches configs in batches of 500 and a
// larger set would only measure the config cache.
const MaxProjects = 100_000

// Project is one Sentry project with a single DSN key, as Relay sees it.
type Project struct {
	ID        int64  `json:"id"`
	OrgID     int64  `json:"org_id"`
	Slug      string `json:"slug"`
	PublicKey string `json:"public_key"` // 32 lowercase hex chars, the DSN's public key
	KeyID     int64  `json:"key_id"`     // the DSN key's numeric id ("numericId" in project configs)
}

// DSN returns the project's DSN for a Sentry (or Relay) reachable at origin,
// e.g. "http://127.0.0.1:3000" → "http://<key>@127.0.0.1:3000/<id>".
func (p Project) DSN(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil {
		return "", fmt.Errorf("projects: origin %q: %w", origin, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("projects: origin %q: want http(s)://host[:port]", origin)
	}
	return u.Scheme + "://" + p.PublicKey + "@" + u.Host + "/" + strconv.FormatInt(p.ID, 10), nil
}

// EnvelopePath is the ingest path for the project's envelopes.
func (p Project) EnvelopePath() string {
	return "/api/" + strconv.FormatInt(p.ID, 10) + "/envelope/"
}

// AuthHeader is the X-Sentry-Auth value an SDK sends for this project.
func (p Project) AuthHeader(client string) string {
	return "Sentry sentry_key=" + p.PublicKey + ", sentry_version=7, sentry_client=" + client
}

// projectsPerOrg groups projects into organizations, so org-scoped quotas and
// rate limits have something to bite on.
const projectsPerOrg = 10

var slugWords = [...]string{
	"checkout", "storefront", "payments", "search", "accounts", "inventory", "shipping",
	"billing", "mobile-ios", "mobile-android", "admin", "reports", "gateway", "notifications",
	"recommendations", "media", "auth-service", "catalog", "support", "analytics",
}

// Generate derives n projects from seed. Project ids start at 1 (Relay
// reserves nothing below), org ids group every ten projects.
func Generate(seed uint64, n int) ([]Project, error) {
	if n < 1 || n > MaxProjects {
		return nil, fmt.Errorf("projects: count %d out of range 1..%d", n, MaxProjects)
	}
	out := make([]Project, n)
	var key [16]byte
	for i := range out {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		for j := 0; j < len(key); j += 8 {
			v := r.Uint64()
			for k := 0; k < 8; k++ {
				key[j+k] = byte(v >> (8 * k))
			}
		}
		out[i] = Project{
			ID:        int64(i + 1),
			OrgID:     int64(i/projectsPerOrg + 1),
			Slug:      slugWords[r.IntN(len(slugWords))] + "-" + strconv.Itoa(i+1),
			PublicKey: hex.EncodeToString(key[:]),
			KeyID:     int64(100000 + i),
		}
	}
	return out, nil
}

// Index maps public keys to positions in a project list.
type Index map[string]int

// NewIndex indexes ps by public key.
func NewIndex(ps []Project) Index {
	idx := make(Index, len(ps))
	for i, p := range ps {
		idx[p.PublicKey] = i
	}
	return idx
}

// ParseAuthKey extracts sentry_key from an X-Sentry-Auth or "Authorization:
// Sentry …" value, without allocating. It returns "" when there is none.
func ParseAuthKey(h string) string {
	const prefix = "sentry "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return ""
	}
	for part := range strings.SplitSeq(h[len(prefix):], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && strings.TrimSpace(k) == "sentry_key" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
