// Package canary defines the PII canaries that pool/ plants in envelopes and
// that fake-upstream looks for in what Relay forwards.
//
// A canary is a value that Relay's default data scrubbing (project config
// datascrubbingSettings with scrubData and scrubDefaults on, docs/canaries.md)
// must remove or mask. Every canary starts with a marker
// "rlcnry-<code>-<letters>": the code names the kind and the letters encode the
// envelope index, so one bytes.Index pass over a forwarded payload finds every
// surviving canary and says which kind and which envelope it came from.
//
// Kinds differ in what scrubbing does to them:
//   - Removed: the whole value is replaced ("[Filtered]") or removed (null),
//     marker included. A marker found after Relay is a leak.
//   - Masked: only the secret after the marker is replaced ("[Filtered]",
//     "[creditcard]", "[email]" …); the marker survives followed by '['. A
//     marker followed by anything else is a leak.
//   - Kept: a negative control that default scrubbing must leave alone. A
//     missing marker would mean Relay scrubbed too much; a found one is expected.
//
// The marker alphabet is lowercase letters and '-' only: digits next to a card
// number would change what the credit-card rule matches, and none of the
// words Relay's password rule looks for (auth, secret, token, key, …) appear.
package canary

import "bytes"

// Expect is what Relay's default scrubbing should do to a kind.
type Expect string

const (
	Removed Expect = "removed"
	Masked  Expect = "masked"
	Kept    Expect = "kept"
)

// Kind is one kind of canary.
type Kind struct {
	Name   string `json:"name"`
	Code   string `json:"code"`  // two lowercase letters in the marker
	Where  string `json:"where"` // where pool plants it
	Expect Expect `json:"expect"`
	Secret string `json:"-"` // for Masked kinds: the part after "marker " that must be masked
}

// Prefix starts every marker.
const Prefix = "rlcnry-"

// letters is the width of the envelope index in a marker (26^5 ≈ 11.8M).
const letters = 5

// Kinds returns every canary kind, in a fixed order (a fresh copy).
func Kinds() []Kind {
	out := make([]Kind, len(kinds))
	copy(out, kinds[:])
	return out
}

// kinds is a read-only table; Kinds hands out copies.
var kinds = [...]Kind{
	{Name: "request_password", Code: "pa", Where: "error request.data.password", Expect: Removed},
	{Name: "authorization_header", Code: "ah", Where: "error request.headers Authorization (Bearer …)", Expect: Removed},
	{Name: "api_key_header", Code: "ak", Where: "error request.headers X-Api-Key", Expect: Removed},
	{Name: "session_cookie", Code: "sc", Where: "error request.cookies sessionid", Expect: Removed},
	{Name: "query_password", Code: "qs", Where: "error request.query_string password=…", Expect: Removed},
	{Name: "frame_var_api_key", Code: "fv", Where: "error stack frame vars api_key", Expect: Removed},
	{Name: "breadcrumb_token", Code: "bt", Where: "error breadcrumb data.token", Expect: Removed},
	{Name: "url_password", Code: "ur", Where: "error extra.db_url scheme://user:<canary>@host", Expect: Removed},
	{Name: "credentials_object", Code: "co", Where: "error extra.credentials {user: …}", Expect: Removed},
	{Name: "secret_value", Code: "sv", Where: "error user.username \"secret-<canary>\"", Expect: Removed},
	{Name: "pem_key", Code: "pe", Where: "error extra.cert PEM private key body", Expect: Removed},
	{Name: "credit_card", Code: "cc", Where: "error extra.payment_note", Expect: Masked, Secret: "4111 1111 1111 1111"},
	{Name: "iban", Code: "ib", Where: "error extra.iban_note", Expect: Masked, Secret: "DE89370400440532013000"},
	{Name: "us_ssn", Code: "ss", Where: "error extra.ssn_note", Expect: Masked, Secret: "078-05-1120"},
	{Name: "logentry_card", Code: "lc", Where: "error logentry.formatted", Expect: Masked, Secret: "4111111111111111"},
	{Name: "log_body_email", Code: "le", Where: "log body", Expect: Masked, Secret: "jane.doe@example.com"},
	{Name: "log_attribute_password", Code: "la", Where: "log attribute password", Expect: Removed},
	{Name: "span_data_password", Code: "sd", Where: "transaction span data password", Expect: Removed},
	{Name: "public_note", Code: "ke", Where: "error/transaction extra.public_note (control)", Expect: Kept},
}

// ByCode looks a kind up by its marker code.
func ByCode(code []byte) (Kind, bool) {
	for _, k := range kinds {
		if string(code) == k.Code {
			return k, true
		}
	}
	return Kind{}, false
}

// Marker returns the marker of kind k for envelope index i.
func (k Kind) Marker(i uint64) string {
	var b [len(Prefix) + 2 + 1 + letters]byte
	n := copy(b[:], Prefix)
	n += copy(b[n:], k.Code)
	b[n] = '-'
	n++
	for j := letters - 1; j >= 0; j-- {
		b[n+j] = byte('a' + i%26)
		i /= 26
	}
	return string(b[:])
}

// Value is what pool plants for envelope index i: the marker, and for Masked
// kinds a space and the secret.
func (k Kind) Value(i uint64) string {
	if k.Expect == Masked {
		return k.Marker(i) + " " + k.Secret
	}
	return k.Marker(i)
}

// Finding is one marker found in a payload.
type Finding struct {
	Kind  Kind
	Index uint64 // the envelope index encoded in the marker
	// Leaked is true when the canary survived scrubbing: any Removed marker,
	// or a Masked marker not followed by a masked replacement. For Kept kinds
	// Leaked is false: finding them is expected.
	Leaked bool
}

// Scan reports every well-formed marker in b. It allocates nothing; fn must
// not retain b.
func Scan(b []byte, fn func(Finding)) {
	prefix := []byte(Prefix)
	for {
		i := indexPrefix(b)
		if i < 0 {
			return
		}
		b = b[i+len(prefix):]
		if len(b) < 3+letters || b[2] != '-' {
			continue
		}
		k, ok := ByCode(b[:2])
		if !ok {
			continue
		}
		var idx uint64
		valid := true
		for _, c := range b[3 : 3+letters] {
			if c < 'a' || c > 'z' {
				valid = false
				break
			}
			idx = idx*26 + uint64(c-'a')
		}
		if !valid {
			continue
		}
		rest := b[3+letters:]
		f := Finding{Kind: k, Index: idx}
		switch k.Expect {
		case Removed:
			f.Leaked = true
		case Masked:
			// Relay keeps the text around the match: "marker [Filtered]".
			f.Leaked = !(len(rest) >= 2 && rest[0] == ' ' && rest[1] == '[')
		}
		fn(f)
		b = rest
	}
}

// indexPrefix is bytes.Index(b, Prefix) (FuzzIndexAnchored), found by
// Prefix's 'y': far rarer than its 'r' in event JSON, so bytes.IndexByte
// runs longer between false starts (BenchmarkScanPool).
func indexPrefix(b []byte) int { return indexAnchored(b, Prefix, 5) }

// indexAnchored is bytes.Index(b, pat) for a pattern whose byte at off is
// rare in b: it looks for that byte and compares the pattern around it.
func indexAnchored(b []byte, pat string, off int) int {
	anchor := pat[off]
	from := off
	for from < len(b) {
		j := bytes.IndexByte(b[from:], anchor)
		if j < 0 {
			return -1
		}
		at := from + j - off
		if at+len(pat) <= len(b) && string(b[at:at+len(pat)]) == pat {
			return at
		}
		from += j + 1
	}
	return -1
}

// metaKey is the key Relay records its remarks under ('_' is the rare byte;
// '"' is among the commonest in event JSON; BenchmarkScrubRemark).
const metaKey = `"_meta"`

// ScrubRemark reports whether a payload Relay forwarded carries a "rem"
// (remark) under "_meta", which Relay writes where it scrubbed or changed a
// value.
func ScrubRemark(payload []byte) bool {
	m := indexAnchored(payload, metaKey, 1)
	return m >= 0 && bytes.Contains(payload[m:], []byte(`"rem"`))
}
