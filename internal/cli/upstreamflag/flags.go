// Package upstreamflag parses the command-line forms of the fake upstream's
// settings that orchestrate and fake-upstream share: byte sizes, quotas,
// networks, fault specs, injected latencies and errors.
package upstreamflag

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/upstream"
)

// parseLatency parses a latency spec: terms joined by '+', each a fixed
// duration ("50ms"; fixed terms add up), a uniform range ("10ms-100ms", at
// most one) or an exponential draw with a mean ("exp:20ms", at most one).
// Example: "5ms+exp:20ms".
func parseLatency(spec string) (upstream.Latency, error) {
	var l upstream.Latency
	if strings.TrimSpace(spec) == "" {
		return l, fmt.Errorf("latency: empty spec")
	}
	var haveRange, haveExp bool
	for _, term := range strings.Split(spec, "+") {
		term = strings.TrimSpace(term)
		switch {
		case strings.HasPrefix(term, "exp:"):
			if haveExp {
				return l, fmt.Errorf("latency %q: more than one exp: term", spec)
			}
			haveExp = true
			d, err := time.ParseDuration(term[4:])
			if err != nil {
				return l, fmt.Errorf("latency %q: %w", spec, err)
			}
			l.Mean = upstream.Duration(d)
		case strings.Contains(term, "-"):
			if haveRange {
				return l, fmt.Errorf("latency %q: more than one range term", spec)
			}
			haveRange = true
			a, b, _ := strings.Cut(term, "-")
			lo, err := time.ParseDuration(a)
			if err != nil {
				return l, fmt.Errorf("latency %q: %w", spec, err)
			}
			hi, err := time.ParseDuration(b)
			if err != nil {
				return l, fmt.Errorf("latency %q: %w", spec, err)
			}
			l.Min, l.Max = upstream.Duration(lo), upstream.Duration(hi)
		default:
			d, err := time.ParseDuration(term)
			if err != nil {
				return l, fmt.Errorf("latency %q: %w", spec, err)
			}
			if d < 0 || d > maxLatencyTerm || l.Fixed > upstream.Duration(maxLatencyTerm) {
				return l, fmt.Errorf("latency %q: term %s not in [0, %s]", spec, term, maxLatencyTerm)
			}
			l.Fixed += upstream.Duration(d)
		}
	}
	f := upstream.Faults{Latency: map[string]upstream.Latency{"*": l}}
	return l, f.Validate()
}

// ParseRouteLatency parses "ROUTE=SPEC" (ROUTE a route name or *).
func ParseRouteLatency(s string) (string, upstream.Latency, error) {
	route, spec, ok := strings.Cut(s, "=")
	if !ok {
		return "", upstream.Latency{}, fmt.Errorf("latency %q: want ROUTE=SPEC, e.g. envelope=10ms-50ms", s)
	}
	l, err := parseLatency(spec)
	if err != nil {
		return "", l, err
	}
	f := upstream.Faults{Latency: map[string]upstream.Latency{route: l}}
	return route, l, f.Validate()
}

// ParseInjection parses "ROUTE=STATUS@P", "ROUTE=429:RETRY_AFTER@P" or
// "ROUTE=reset@P", e.g. "envelope=503@0.1".
func ParseInjection(s string) (upstream.Injection, error) {
	route, rest, ok := strings.Cut(s, "=")
	what, prob, ok2 := strings.Cut(rest, "@")
	if !ok || !ok2 {
		return upstream.Injection{}, fmt.Errorf("inject %q: want ROUTE=STATUS@PROBABILITY, e.g. envelope=503@0.1", s)
	}
	p, err := strconv.ParseFloat(prob, 64)
	if err != nil {
		return upstream.Injection{}, fmt.Errorf("inject %q: probability: %w", s, err)
	}
	in := upstream.Injection{Route: route, Probability: p}
	if what == "reset" {
		in.Reset = true
	} else {
		code, ra, hasRA := strings.Cut(what, ":")
		if in.Status, err = strconv.Atoi(code); err != nil {
			return upstream.Injection{}, fmt.Errorf("inject %q: status: %w", s, err)
		}
		if hasRA {
			if in.RetryAfter, err = strconv.Atoi(ra); err != nil {
				return upstream.Injection{}, fmt.Errorf("inject %q: retry-after: %w", s, err)
			}
		}
	}
	f := upstream.Faults{Inject: []upstream.Injection{in}}
	if err := f.Validate(); err != nil {
		return upstream.Injection{}, err
	}
	return in, nil
}

// ParseQuota parses "CATEGORIES[:LIMIT[:REASON]]" into a project quota:
// CATEGORIES is a ';'-separated list of data-category names or "all";
// LIMIT defaults to 0 (reject everything), REASON to "relayload_quota".
// A managed, non-processing Relay enforces only limit-0 quotas (anything else
// needs Redis); n numbers the quota id.
func ParseQuota(s string, n int) (json.RawMessage, error) {
	parts := strings.Split(s, ":")
	if len(parts) > 3 || parts[0] == "" {
		return nil, fmt.Errorf("quota %q: want CATEGORIES[:LIMIT[:REASON]], e.g. 'error;transaction:0' (quoted: ';' ends a shell command)", s)
	}
	q := map[string]any{"id": fmt.Sprintf("relayload-quota-%d", n), "scope": "project", "limit": 0, "reasonCode": "relayload_quota"}
	cats := []string{}
	if parts[0] != "all" {
		for _, c := range strings.Split(parts[0], ";") {
			if c = strings.TrimSpace(c); c == "" {
				return nil, fmt.Errorf("quota %q: empty category", s)
			}
			cats = append(cats, c)
		}
	}
	q["categories"] = cats
	if len(parts) > 1 {
		limit, err := strconv.ParseUint(parts[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("quota %q: limit: %w", s, err)
		}
		q["limit"] = limit
		if limit > 0 {
			q["window"] = 60
		}
	}
	if len(parts) > 2 && parts[2] != "" {
		q["reasonCode"] = parts[2]
	}
	return json.Marshal(q)
}

// LoadQuotas reads a JSON array of quota objects.
func LoadQuotas(path string) ([]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("quotas: %w", err)
	}
	var qs []json.RawMessage
	if err := json.Unmarshal(b, &qs); err != nil {
		return nil, fmt.Errorf("quotas %s: want a JSON array of quota objects: %w", path, err)
	}
	for i, q := range qs {
		var obj map[string]any
		if err := json.Unmarshal(q, &obj); err != nil {
			return nil, fmt.Errorf("quotas %s: entry %d is not an object: %w", path, i, err)
		}
	}
	return qs, nil
}

// LoadFaults reads an upstream.Faults JSON file (the POST /control body).
func LoadFaults(path string) (upstream.Faults, error) {
	var f upstream.Faults
	b, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("faults: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("faults %s: %w", path, err)
	}
	return f, f.Validate()
}

// MaxSize bounds ParseSize: 1 TiB, beyond any bound the programs take.
const MaxSize = 1 << 40

// ParseSize parses a byte size from 1 to MaxSize: "1048576", "16MiB",
// "20MB", "512KiB", "1GiB", "1TiB".
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"kB", 1000}, {"KB", 1000}, {"MB", 1000 * 1000},
		{"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000}, {"B", 1}}
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a byte count from 1 to 1TiB, like 16MiB", s)
	}
	if n > MaxSize/mult {
		return 0, fmt.Errorf("size %q: want at most 1TiB (%d bytes)", s, int64(MaxSize))
	}
	return n * mult, nil
}

// maxLatencyTerm bounds each fixed term of a latency spec, so that their sum
// cannot overflow before Faults.Validate sees it.
const maxLatencyTerm = time.Hour
