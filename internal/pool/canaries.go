package pool

import (
	"fmt"

	"github.com/relayload/relayload/internal/canary"
)

// canaryNames are the canary kinds pool knows how to plant, by name. Build
// fails if canary.Kinds() has a kind pool does not plant (or lost one), so a
// new kind cannot silently go untested.
var canaryNames = [...]string{
	"request_password", "authorization_header", "api_key_header", "session_cookie", "query_password",
	"frame_var_api_key", "breadcrumb_token", "url_password", "credentials_object", "secret_value",
	"pem_key", "credit_card", "iban", "us_ssn", "logentry_card", "log_body_email",
	"log_attribute_password", "span_data_password", "public_note",
}

const (
	cvRequestPassword = iota
	cvAuthorizationHeader
	cvAPIKeyHeader
	cvSessionCookie
	cvQueryPassword
	cvFrameVarAPIKey
	cvBreadcrumbToken
	cvURLPassword
	cvCredentialsObject
	cvSecretValue
	cvPemKey
	cvCreditCard
	cvIBAN
	cvUSSSN
	cvLogentryCard
	cvLogBodyEmail
	cvLogAttributePassword
	cvSpanDataPassword
	cvPublicNote
	numCanaries
)

// canarySet holds the kinds in canaryNames order.
type canarySet [numCanaries]canary.Kind

func loadCanaries() (canarySet, error) {
	var s canarySet
	byName := map[string]canary.Kind{}
	for _, k := range canary.Kinds() {
		byName[k.Name] = k
	}
	if len(byName) != numCanaries {
		return s, fmt.Errorf("pool: canary package defines %d kinds, pool plants %d: update pool", len(byName), numCanaries)
	}
	for i, n := range canaryNames {
		k, ok := byName[n]
		if !ok {
			return s, fmt.Errorf("pool: canary kind %q not defined by the canary package", n)
		}
		s[i] = k
	}
	return s, nil
}

// cv returns the value of canary kind k for entry index i.
func (g *gen) cv(k int, i int) string { return g.canaries[k].Value(uint64(i)) }
