package pool

import (
	"strconv"
	"strings"
)

// Vocabularies for generated identifiers and text. No value may contain a
// word Relay's password rule matches (password, secret, passwd, api_key,
// apikey, auth — also inside "author" or "oauth" —, credentials, privatekey,
// token followed by ':' or '='), nor 12+ digit runs, nnn-nn-nnnn patterns or
// IBAN-like capitals: default scrubbing would rewrite them, and only the
// planted canaries may be scrubbed.
var nouns = []string{
	"order", "cart", "item", "user", "invoice", "payment", "price", "total", "discount", "coupon", "shipping",
	"product", "catalog", "stock", "warehouse", "report", "export", "import", "queue", "job", "task", "batch",
	"event", "message", "notification", "mail", "template", "cache", "profile", "search", "index", "page",
	"feed", "comment", "review", "rating", "vendor", "customer", "basket", "checkout", "refund", "ledger",
	"entry", "balance", "currency", "tax", "region", "locale", "store", "tenant", "plan", "subscription",
	"billing", "receipt", "upload", "image", "thumbnail", "media", "asset", "file", "bucket", "record", "row",
	"column", "field", "schema", "metric", "counter", "worker", "pool", "client", "request", "response",
	"handler", "route", "service", "repository", "mapper", "adapter", "builder", "factory", "manager",
	"provider", "resolver", "validator", "serializer", "parser", "formatter", "loader", "scheduler",
	"dispatcher", "listener", "reducer", "selector", "hook", "component", "view", "controller", "model",
	"entity", "config", "setting", "option", "flag", "feature", "experiment", "variant", "slot", "layout",
	"menu", "button", "modal", "dialog", "form", "input", "table", "grid", "chart", "shipment", "parcel",
	"carrier", "tracking", "label", "inventory", "sku", "bundle", "wishlist", "voucher", "gift", "loyalty",
	"points", "tier", "address", "country", "zone", "slot", "delivery", "pickup", "return", "exchange",
}

var verbs = []string{
	"get", "fetch", "load", "save", "update", "create", "delete", "remove", "compute", "calculate", "validate",
	"parse", "format", "render", "build", "handle", "process", "dispatch", "apply", "resolve", "sync",
	"refresh", "submit", "send", "publish", "consume", "enqueue", "map", "reduce", "merge", "split",
	"normalize", "serialize", "encode", "decode", "find", "lookup", "list", "count", "check", "ensure",
	"prepare", "init", "start", "stop", "run", "execute", "invoke", "call", "wrap", "emit", "notify",
	"schedule", "retry", "flush", "commit", "reserve", "allocate", "charge", "track", "attach", "detach",
	"mount", "select", "filter", "sort", "group", "collect", "aggregate", "estimate", "quote", "ship",
}

var adjectives = []string{
	"pending", "active", "stale", "cached", "default", "current", "next", "previous", "local", "remote",
	"primary", "fallback", "legacy", "new", "old", "raw", "parsed", "visible", "hidden", "selected",
	"draft", "final", "partial", "full", "empty", "expired", "valid", "invalid", "paid", "open", "closed",
}

var firstNames = []string{"jane", "john", "maria", "li", "ahmed", "olga", "kenji", "fatima", "lucas", "emma", "noah", "mia", "arjun", "sofia", "yusuf", "chloe", "mateo", "hana", "ivan", "amara"}
var lastNames = []string{"doe", "smith", "garcia", "chen", "khan", "ivanova", "tanaka", "ali", "silva", "mueller", "brown", "rossi", "patel", "novak", "yilmaz", "martin", "lopez", "kim", "petrov", "okafor"}
var mailDomains = []string{"example.com", "example.org", "mail.example", "shop.example", "corp.example"}
var hosts = []string{"shop.example", "www.shop.example", "app.acme.example", "store.example.org", "checkout.example.net", "m.shop.example", "portal.example.com", "dashboard.example.io"}
var apiHosts = []string{"api.shop.example", "payments.internal", "inventory.internal", "search.internal", "users.internal", "api.stripe.example", "geo.example.net", "pricing.internal", "mailer.internal"}
var dbHosts = []string{"db-1.internal", "db-2.internal", "pg-primary.internal", "pg-replica-1.internal", "mysql-3.internal", "orders-db.internal"}
var locales = []string{"en-US", "en-GB", "de-DE", "fr-FR", "es-ES", "it-IT", "pt-BR", "ja-JP", "zh-CN", "nl-NL", "pl-PL", "sv-SE", "tr-TR", "ko-KR"}
var timezones = []string{"Europe/Berlin", "America/New_York", "America/Los_Angeles", "Europe/London", "Asia/Tokyo", "Europe/Paris", "America/Sao_Paulo", "Asia/Kolkata", "Australia/Sydney", "UTC"}
var environments = []string{"production", "production", "production", "production", "staging", "development"}

func (g *gen) noun() string      { return nouns[g.r.IntN(len(nouns))] }
func (g *gen) verb() string      { return verbs[g.r.IntN(len(verbs))] }
func (g *gen) adjective() string { return adjectives[g.r.IntN(len(adjectives))] }

// titled caches title() of every vocabulary word (read-only after init).
var titled = func() map[string]string {
	m := map[string]string{}
	for _, l := range [][]string{nouns, verbs, adjectives} {
		for _, s := range l {
			m[s] = strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return m
}()

func title(s string) string {
	if t, ok := titled[s]; ok {
		return t
	}
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// camel is verbNoun, e.g. "computeTotal".
func (g *gen) camel() string { return g.s(g.verb(), title(g.noun())) }

// snake is verb_noun, e.g. "compute_total".
func (g *gen) snake() string { return g.s(g.verb(), "_", g.noun()) }

// pascal is NounNoun, e.g. "OrderService".
func (g *gen) pascal() string { return g.s(title(g.noun()), title(g.noun())) }

func (g *gen) email() string {
	return g.s(g.pickS(firstNames), ".", g.pickS(lastNames), g.itoa(g.r.IntN(100)), "@", g.pickS(mailDomains))
}

// semver returns "maj.min.patch".
func (g *gen) semver(maxMajor int) string {
	return g.s(g.itoa(g.r.IntN(maxMajor)+1), ".", g.itoa(g.r.IntN(30)), ".", g.itoa(g.r.IntN(20)))
}

// release is derived from the project so a project keeps a few releases.
func (g *gen) release(c *ctx) string {
	p := g.o.Projects[c.project]
	h := splitmix64(uint64(p.ID))
	major := 1 + h%9
	minor := (h >> 8) % 40
	patch := (h>>16)%10 + uint64(g.r.IntN(4)) // a few live releases per project
	return g.s(p.Slug, "@", strconv.FormatUint(major, 10), ".", strconv.FormatUint(minor, 10), ".", strconv.FormatUint(patch, 10))
}

func (g *gen) environment() string { return g.pickS(environments) }

// urlPath returns a path like "/api/v2/orders/4711/items".
func (g *gen) urlPath() (path, route string) {
	n := g.noun()
	id := g.itoa(1 + g.r.IntN(99999))
	switch g.r.IntN(5) {
	case 0:
		return g.s("/api/v", g.itoa(1+g.r.IntN(3)), "/", n, "s/", id), g.s("/api/v{version}/", n, "s/{", n, "_id}")
	case 1:
		m := g.noun()
		return g.s("/api/", n, "s/", id, "/", m, "s"), g.s("/api/", n, "s/{", n, "_id}/", m, "s")
	case 2:
		return g.s("/", n, "s/", id), g.s("/", n, "s/:id")
	case 3:
		x := g.s("/", n, "/", g.noun())
		return x, x
	}
	x := g.s("/api/", n, "s")
	return x, x
}

// sentence is a short human log/breadcrumb message.
func (g *gen) sentence() string {
	switch g.r.IntN(8) {
	case 0:
		return g.s(title(gerund(g.verb())), " ", g.noun(), " ", g.itoa(g.r.IntN(100000)), " for ", g.noun(), " ", g.itoa(g.r.IntN(5000)))
	case 1:
		return g.s(title(g.noun()), " ", g.adjective(), " after ", g.itoa(g.r.IntN(3000)), "ms")
	case 2:
		return g.s("Retrying ", g.snake(), " (attempt ", g.itoa(1+g.r.IntN(5)), " of 5)")
	case 3:
		return g.s("Loaded ", g.itoa(g.r.IntN(500)), " ", g.noun(), "s from ", g.noun(), " ", g.adjective())
	case 4:
		return g.s("Skipping ", g.adjective(), " ", g.noun(), " ", g.hexID(8))
	case 5:
		return g.s(title(g.noun()), " ", g.noun(), " changed from ", g.adjective(), " to ", g.adjective())
	case 6:
		return g.s("Cache miss for ", g.noun(), ":", g.itoa(g.r.IntN(100000)))
	}
	return g.s("Finished ", g.snake(), " in ", strconv.FormatFloat(g.r.Float64()*900, 'f', 1, 64), " ms")
}

// gerunds of the verbs whose -ing form is not verb+"ing" (read-only).
var gerunds = func() map[string]string {
	m := map[string]string{}
	for _, v := range verbs {
		switch {
		case v == "get" || v == "run" || v == "map" || v == "stop" || v == "ship" || v == "split" || v == "emit" ||
			v == "commit" || v == "submit":
			m[v] = v + v[len(v)-1:] + "ing"
		case strings.HasSuffix(v, "e") && !strings.HasSuffix(v, "ee"):
			m[v] = v[:len(v)-1] + "ing"
		default:
			m[v] = v + "ing"
		}
	}
	return m
}()

func gerund(v string) string {
	if g, ok := gerunds[v]; ok {
		return g
	}
	return v + "ing"
}
