package pool

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/canary"
)

// Relay's default data scrubbing rules (relay-pii regexes.rs, @common:filter
// plus the replace-only rules), transcribed to RE2. interop/test_pool.py
// checks the same property against sentry_relay itself on a smaller pool.
var (
	passwordKV = regexp.MustCompile(`(?i)(password|secret|passwd|api[-_]key|apikey|auth|credentials|mysql_pwd|privatekey|private[-_]key|token[^\s]*[:=]|^otp$|^two[-_]factor$)`)
	tokenKey   = regexp.MustCompile(`(?i)token`)
	valueRules = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(Bearer\s+)([^\s]+)`),
		regexp.MustCompile(`\b((?:3[47]\d|4\d{3}|5[1-5]\d\d|65\d\d|6011)([-\s]?\d){12})\b`),
		regexp.MustCompile(`\b([0-9]{3}-[0-9]{2}-[0-9]{4})\b`),
		regexp.MustCompile(`\b(AT|AD|AE|AL|AZ|BA|BE|BG|BH|BR|BY|CH|CR|CY|CZ|DE|DK|DO|EE|EG|ES|FI|FO|FR|GB|GE|GI|GL|GR|GT|HR|HU|IE|IL|IQ|IS|IT|JO|KW|KZ|LB|LC|LI|LT|LU|LV|LY|MC|MD|ME|MK|MR|MT|MU|NL|NO|PK|PL|PS|PT|QA|RO|RU|RS|SA|SC|SE|SI|SK|SM|ST|SV|TL|TN|TR|UA|VA|VG|XK|DZ|AO|BJ|BF|BI|CV|CM|CF|TD|KM|CG|CI|DJ|GQ|GA|GW|HN|IR|MG|ML|MA|MZ|NI|NE|SN|TG)\d{2}[a-zA-Z0-9]{11,29}\b`),
		regexp.MustCompile(`(?s)-----BEGIN[A-Z ]+(?:PRIVATE|PUBLIC) KEY-----`),
		regexp.MustCompile(`\b(?:(?:[a-z0-9+-]+:)?//([a-zA-Z0-9%_.-]+(?::[a-zA-Z0-9%_.-]+)?))@`),
	}
)

// TestOnlyCanariesMatchScrubbingRules walks every key and string value of
// errors, transactions and logs: anything Relay's default rules would touch
// must be (or contain) a planted canary, so scrubbing changes exactly the
// canaries. Paths the data scrubber skips (frame filename/abs_path,
// exception value, the User-Agent header) are skipped here too.
func TestOnlyCanariesMatchScrubbingRules(t *testing.T) {
	t.Parallel() // CPU-bound; reads the shared pool only
	size := 500
	if raceEnabled {
		size = 48
	}
	p := build(t, Options{Seed: 31, Size: size, Mix: Mix{KindError: 2, KindTransaction: 1, KindLog: 1}})
	checked := 0
	for i, e := range p.Entries {
		if e.Kind != KindError && e.Kind != KindTransaction && e.Kind != KindLog {
			continue
		}
		env, err := envelope.Parse(p.Raw(i))
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(env.Items[0].Payload, &v); err != nil {
			t.Fatal(err)
		}
		walkScrub(t, i, "", v, &checked)
	}
	if checked < size*100 {
		t.Fatalf("only %d values checked", checked)
	}
}

func hasCanary(v any) bool {
	b, _ := json.Marshal(v)
	return strings.Contains(string(b), canary.Prefix)
}

func walkScrub(t *testing.T, i int, path string, v any, n *int) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := path + "." + k
			*n++
			if passwordKV.MatchString(k) || tokenKey.MatchString(k) {
				if !hasCanary(c) {
					t.Fatalf("entry %d: key %s matches the password rule but holds no canary: %v", i, p, c)
				}
				continue
			}
			if k == "filename" || k == "abs_path" || (k == "value" && strings.Contains(path, ".exception.")) || strings.EqualFold(k, "User-Agent") {
				continue
			}
			walkScrub(t, i, p, c, n)
		}
	case []any:
		for _, c := range x {
			walkScrub(t, i, path+"[]", c, n)
		}
	case string:
		*n++
		if strings.Contains(x, canary.Prefix) {
			return
		}
		lower := strings.ToLower(x)
		if containsAny(lower, passwordWords) && passwordKV.MatchString(x) {
			t.Fatalf("entry %d: %s = %q matches the password rule", i, path, x)
		}
		if strings.Contains(lower, "bearer") && valueRules[0].MatchString(x) {
			t.Fatalf("entry %d: %s = %q matches the bearer rule", i, path, x)
		}
		if strings.ContainsAny(x, "0123456789@") || strings.Contains(x, "-----") {
			for _, r := range valueRules[1:] {
				if r.MatchString(x) {
					t.Fatalf("entry %d: %s = %q matches %s", i, path, x, r)
				}
			}
		}
	}
}

var passwordWords = []string{"password", "secret", "passwd", "api-key", "api_key", "apikey", "auth", "credentials", "mysql_pwd",
	"privatekey", "private-key", "private_key", "token", "otp", "two-factor", "two_factor", "bearer"}

// containsAny reports whether s contains one of words (a cheap filter
// before the case-insensitive RE2 rules, which are slow on millions of strings).
func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
