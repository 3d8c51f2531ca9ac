package standinrelay

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// A small imitation of Relay's default data scrubbing (docs/canaries.md):
// enough to remove the canary kinds and to cost real, deterministic CPU per
// event, transaction and log container. It is not Relay's PII engine: no pair normalization of query
// strings, headers or cookies, no IP scrubbing, no sensitiveFields.

const filtered = "[Filtered]"

var (
	urlAuth    = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^:/@\s]+:([^@/\s]+)@`)
	pemBody    = regexp.MustCompile(`(?s)-----BEGIN[A-Z ]* (?:PRIVATE|PUBLIC) KEY-----(.+?)-----END[A-Z ]* (?:PRIVATE|PUBLIC) KEY-----`)
	creditCard = regexp.MustCompile(`\b(?:(?:4\d{3}|5[1-5]\d{2}|6011|65\d{2})[- ]?\d{4}[- ]?\d{4}[- ]?\d{4}|3[47]\d{2}[- ]?\d{6}[- ]?\d{5})\b`)
	iban       = regexp.MustCompile(`\b[A-Z]{2}\d{2}[A-Z0-9]{11,29}\b`)
	usSSN      = regexp.MustCompile(`\b\d{3}-\d{2}-\d{4}\b`)
	email      = regexp.MustCompile(`[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}`)
)

// passwordWords is @password:filter's word list; keys additionally match
// anything containing "token", values only "token…:" / "token…=".
var passwordWords = []string{"password", "secret", "passwd", "api_key", "api-key", "apikey", "auth", "credentials", "mysql_pwd", "privatekey", "private_key", "private-key"}

// lowerASCII lowercases ASCII letters, allocating only when needed.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

func containsWord(l string) bool {
	for _, w := range passwordWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// passwordKey reports whether a key matches @password:filter.
func passwordKey(k string) bool {
	l := lowerASCII(k)
	return containsWord(l) || strings.Contains(l, "token")
}

// passwordValue reports whether a value matches @password:filter.
func passwordValue(v string) bool {
	l := lowerASCII(v)
	if containsWord(l) {
		return true
	}
	for i := 0; ; {
		j := strings.Index(l[i:], "token")
		if j < 0 {
			break
		}
		rest := l[i+j+5:]
		if k := strings.IndexAny(rest, ":= \t\n"); k >= 0 && (rest[k] == ':' || rest[k] == '=') {
			return true
		}
		i += j + 5
	}
	if i := strings.Index(l, "bearer"); i >= 0 && i+6 < len(l) && (l[i+6] == ' ' || l[i+6] == '\t') {
		return true
	}
	return false
}

// plausible says which partial rules could match s, from one cheap pass;
// the regular expressions only run where they might.
type plausible struct{ digits, at, scheme, pem, upper bool }

func scan(s string) plausible {
	var p plausible
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			n++
		case c == '@':
			p.at = true
		case c >= 'A' && c <= 'Z':
			p.upper = true
		}
	}
	p.digits = n >= 9
	p.scheme = strings.Contains(s, "://")
	p.pem = strings.Contains(s, "-----BEGIN")
	return p
}

func (p plausible) allows(re *regexp.Regexp) bool {
	switch re {
	case creditCard, usSSN:
		return p.digits
	case iban:
		return p.digits && p.upper
	case pemBody:
		return p.pem
	case urlAuth:
		return p.scheme && p.at
	case email:
		return p.at
	}
	return true
}

// sessionCookies are the cookie names scrubDefaults filters (@anything:filter).
var sessionCookies = map[string]bool{
	"sentrysid": true, "sudo": true, "su": true, "session": true, "__session": true, "sessionid": true,
	"user_session": true, "symfony": true, "phpsessid": true, "fasthttpsessionid": true, "mysession": true,
	"irissessionid": true, "_vercel_jwt": true, "csrf": true, "xsrf": true, "_xsrf": true, "_csrf": true,
	"csrf-token": true, "csrf_token": true, "xsrf-token": true, "xsrf_token": true, "fastcsrf": true, "_iris_csrf": true,
}

// partialRule masks the matched part of a string.
type partialRule struct {
	id          string
	re          *regexp.Regexp
	replacement string
	group       bool // replace only submatch 1
}

var legacyRules = []partialRule{
	{id: "@creditcard:filter", re: creditCard, replacement: filtered},
	{id: "@iban:filter", re: iban, replacement: filtered},
	{id: "@usssn:filter", re: usSSN, replacement: filtered},
	{id: "@pemkey:filter", re: pemBody, replacement: "\n" + filtered + "\n", group: true},
	{id: "@urlauth:legacy", re: urlAuth, replacement: filtered, group: true},
}

// replaceRules apply to logentry.formatted (and would to log bodies).
var replaceRules = []partialRule{
	{id: "@email:replace", re: email, replacement: "[email]"},
	{id: "@creditcard:replace", re: creditCard, replacement: "[creditcard]"},
	{id: "@iban:replace", re: iban, replacement: "[iban]"},
	{id: "@usssn:replace", re: usSSN, replacement: "[us-ssn]"},
}

// metaNode is the _meta tree: children by path segment, remarks at "".
type metaNode map[string]any

func (m metaNode) at(path []string) metaNode {
	n := m
	for _, p := range path {
		c, ok := n[p].(metaNode)
		if !ok {
			c = metaNode{}
			n[p] = c
		}
		n = c
	}
	return n
}

// remark records a rule application at path: kind "s" (substituted, with the
// replacement's offsets) or "x" (removed).
func (m metaNode) remark(path []string, rule, kind string, start, end, origLen int) {
	n := m.at(path)
	leaf, _ := n[""].(map[string]any)
	if leaf == nil {
		leaf = map[string]any{}
		n[""] = leaf
	}
	var rem []any
	if kind == "x" {
		rem = []any{rule, "x"}
	} else {
		rem = []any{rule, kind, start, end}
	}
	rems, _ := leaf["rem"].([]any)
	leaf["rem"] = append(rems, rem)
	if origLen >= 0 {
		leaf["len"] = origLen
	}
}

// scrubEvent scrubs an event or transaction payload in place and adds the
// remarks to its _meta. It returns the number of values changed.
func scrubEvent(ev map[string]any) int {
	meta := metaNode{}
	n := scrubValue(ev, nil, meta)
	if n > 0 {
		if old, ok := ev["_meta"].(map[string]any); ok {
			for k, v := range meta {
				if _, exists := old[k]; !exists {
					old[k] = v
				}
			}
		} else {
			ev["_meta"] = meta
		}
	}
	return n
}

func scrubValue(v any, path []string, meta metaNode) int {
	switch t := v.(type) {
	case map[string]any:
		n := 0
		for k, child := range t {
			if len(path) == 0 && k == "_meta" {
				continue
			}
			if k == "debug_meta" {
				continue
			}
			p := append(path[:len(path):len(path)], k)
			if rule, ok := keyRule(path, k); ok {
				switch c := child.(type) {
				case string:
					t[k] = filtered
					meta.remark(p, rule, "s", 0, len(filtered), len(c))
					n++
					continue
				case map[string]any, []any:
					t[k] = nil
					meta.remark(p, rule, "x", 0, 0, -1)
					n++
					continue
				case nil:
					continue
				default: // numbers and booleans under a sensitive key
					t[k] = filtered
					meta.remark(p, rule, "s", 0, len(filtered), -1)
					n++
					continue
				}
			}
			if s, ok := child.(string); ok {
				if out, changed := scrubString(p, s, meta); changed {
					t[k] = out
					n++
				}
				continue
			}
			n += scrubValue(child, p, meta)
		}
		return n
	case []any:
		n := 0
		for i, child := range t {
			p := append(path[:len(path):len(path)], strconv.Itoa(i))
			if s, ok := child.(string); ok {
				if out, changed := scrubString(p, s, meta); changed {
					t[i] = out
					n++
				}
				continue
			}
			n += scrubValue(child, p, meta)
		}
		return n
	}
	return 0
}

// keyRule reports whether the value under key k at path is filtered as a whole.
func keyRule(path []string, k string) (string, bool) {
	if len(path) > 0 && path[len(path)-1] == "cookies" && sessionCookies[strings.ToLower(k)] {
		return "@anything:filter", true
	}
	if exemptKey(path, k) {
		return "", false
	}
	if passwordKey(k) {
		return "@password:filter", true
	}
	if k == "otp" || k == "two-factor" || k == "two_factor" {
		return "@password:filter", true
	}
	return "", false
}

// exemptKey reports the fields default scrubbing leaves alone.
func exemptKey(path []string, k string) bool {
	switch k {
	case "filename", "abs_path":
		return true
	case "value":
		// exception.values[i].value
		return len(path) == 3 && path[0] == "exception" && path[1] == "values"
	}
	if len(path) >= 1 && path[len(path)-1] == "headers" && strings.EqualFold(k, "User-Agent") {
		return true
	}
	return false
}

func isLogentryFormatted(path []string) bool {
	return len(path) == 2 && path[0] == "logentry" && path[1] == "formatted"
}

// scrubString applies value rules to s at path.
func scrubString(path []string, s string, meta metaNode) (string, bool) {
	k := path[len(path)-1]
	if exemptKey(path[:len(path)-1], k) {
		return s, false
	}
	if isLogentryFormatted(path) {
		return applyPartial(path, s, replaceRules, meta)
	}
	if passwordValue(s) {
		meta.remark(path, "@password:filter", "s", 0, len(filtered), len(s))
		return filtered, true
	}
	return applyPartial(path, s, legacyRules, meta)
}

func applyPartial(path []string, s string, rules []partialRule, meta metaNode) (string, bool) {
	orig := len(s)
	changed := false
	p := scan(s)
	for _, r := range rules {
		if !p.allows(r.re) {
			continue
		}
		locs := r.re.FindAllStringSubmatchIndex(s, -1)
		if len(locs) == 0 {
			continue
		}
		var sb strings.Builder
		last := 0
		for _, loc := range locs {
			start, end := loc[0], loc[1]
			if r.group {
				start, end = loc[2], loc[3]
			}
			sb.WriteString(s[last:start])
			off := sb.Len()
			sb.WriteString(r.replacement)
			meta.remark(path, r.id, "s", off, off+len(r.replacement), -1)
			last = end
		}
		sb.WriteString(s[last:])
		s = sb.String()
		changed = true
	}
	if changed {
		n := meta.at(path)
		if leaf, ok := n[""].(map[string]any); ok {
			leaf["len"] = orig
		}
	}
	return s, changed
}

// scrubLogs scrubs a log container ({"items":[log, …]}): attribute values
// under sensitive names become "[Filtered]", bodies get the replace rules
// (a body matching the password rule is filtered whole). Remarks go to each
// log's _meta. It returns the re-serialized container.
func scrubLogs(payload []byte) ([]byte, error) {
	var c map[string]any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errNotObject
	}
	if dec.More() {
		return nil, errTrailing
	}
	logs, ok := c["items"].([]any)
	if !ok {
		return nil, jsonError("log container without items array")
	}
	for _, l := range logs {
		lm, ok := l.(map[string]any)
		if !ok {
			continue
		}
		meta := metaNode{}
		if body, ok := lm["body"].(string); ok {
			path := []string{"body"}
			if passwordValue(body) {
				meta.remark(path, "@password:filter", "s", 0, len(filtered), len(body))
				lm["body"] = filtered
			} else if out, changed := applyPartial(path, body, replaceRules, meta); changed {
				lm["body"] = out
			}
		}
		if attrs, ok := lm["attributes"].(map[string]any); ok {
			for name, a := range attrs {
				am, ok := a.(map[string]any)
				if !ok {
					continue
				}
				path := []string{"attributes", name, "value"}
				if passwordKey(name) {
					if s, ok := am["value"].(string); ok {
						meta.remark(path, "@password:filter", "s", 0, len(filtered), len(s))
					} else {
						meta.remark(path, "@password:filter", "s", 0, len(filtered), -1)
					}
					am["value"] = filtered
					continue
				}
				if s, ok := am["value"].(string); ok {
					if out, changed := scrubString(path, s, meta); changed {
						am["value"] = out
					}
				}
			}
		}
		if len(meta) > 0 {
			lm["_meta"] = meta
		}
	}
	return json.Marshal(c)
}
