package pool

import (
	"strconv"

	"github.com/relayload/relayload/canary"
	"github.com/relayload/relayload/envelope"
)

func (g *gen) errorEnvelope(c *ctx, env *envelope.Envelope) (string, int) {
	id := g.uuid()
	idx := uint64(c.index)
	cv := map[string]string{}
	for _, k := range canary.Kinds() {
		cv[k.Name] = k.Value(idx)
	}
	w := g.payload()
	w.open()
	w.kstr("event_id", id)
	w.kfloat("timestamp", g.now-1, 3)
	w.kstr("platform", "python")
	w.kstr("level", "error")
	w.obj("logentry")
	w.kstr("formatted", "card "+cv["logentry_card"])
	w.close()
	w.obj("exception")
	w.arr("values")
	w.open()
	w.kstr("type", "ValueError")
	w.kstr("value", "bad value")
	w.obj("stacktrace")
	w.arr("frames")
	for f := 0; f < 20; f++ {
		w.open()
		w.kstr("filename", "app/mod"+strconv.Itoa(f)+".py")
		w.kstr("function", "fn"+strconv.Itoa(f))
		w.kint("lineno", int64(10+f))
		w.kbool("in_app", f%2 == 0)
		if f == 19 {
			w.obj("vars")
			w.kstr("api_key", cv["frame_var_api_key"])
			w.kint("retries", 3)
			w.close()
		}
		w.close()
	}
	w.closeArr()
	w.close()
	w.close()
	w.closeArr()
	w.close()
	w.obj("breadcrumbs")
	w.arr("values")
	w.open()
	w.kfloat("timestamp", g.now-2, 3)
	w.kstr("type", "http")
	w.obj("data")
	w.kstr("token", cv["breadcrumb_token"])
	w.close()
	w.close()
	w.closeArr()
	w.close()
	w.obj("request")
	w.kstr("url", "https://shop.example/checkout")
	w.kstr("method", "POST")
	w.kstr("query_string", "page=2&password="+cv["query_password"])
	w.obj("headers")
	w.kstr("User-Agent", c.agent)
	w.kstr("Authorization", "Bearer "+cv["authorization_header"])
	w.kstr("X-Api-Key", cv["api_key_header"])
	w.close()
	w.obj("cookies")
	w.kstr("sessionid", cv["session_cookie"])
	w.close()
	w.obj("data")
	w.kstr("password", cv["request_password"])
	w.close()
	w.close()
	w.obj("user")
	w.kstr("id", "u-1")
	w.kstr("username", "secret-"+cv["secret_value"])
	w.close()
	w.obj("extra")
	w.kstr("db_url", "postgres://app:"+cv["url_password"]+"@db-1.internal:5432/shop")
	w.obj("credentials")
	w.kstr("user", cv["credentials_object"])
	w.close()
	w.kstr("cert", "-----BEGIN PRIVATE KEY-----\n"+cv["pem_key"]+"\n-----END PRIVATE KEY-----")
	w.kstr("payment_note", cv["credit_card"])
	w.kstr("iban_note", cv["iban"])
	w.kstr("ssn_note", cv["us_ssn"])
	w.kstr("public_note", cv["public_note"])
	w.close()
	w.close()
	env.Header = g.header(id, "sentry.python", "2.19.0", nil)
	env.Items = []envelope.Item{{Type: "event", Payload: g.take()}}
	return id, 1
}

func (g *gen) transactionEnvelope(c *ctx, env *envelope.Envelope) (string, int) {
	id := g.uuid()
	trace := g.hexID(32)
	root := g.hexID(16)
	w := g.payload()
	w.open()
	w.kstr("event_id", id)
	w.kstr("type", "transaction")
	w.kstr("transaction", "/api/orders/{order_id}")
	w.kfloat("start_timestamp", g.now-2, 3)
	w.kfloat("timestamp", g.now-1, 3)
	w.obj("contexts")
	w.obj("trace")
	w.kstr("trace_id", trace)
	w.kstr("span_id", root)
	w.kstr("op", "http.server")
	w.close()
	w.close()
	w.arr("spans")
	for s := 0; s < 20; s++ {
		w.open()
		w.kstr("span_id", g.hexID(16))
		w.kstr("parent_span_id", root)
		w.kstr("trace_id", trace)
		w.kstr("op", "db")
		w.kstr("description", "SELECT 1")
		w.kfloat("start_timestamp", g.now-2+float64(s)*0.01, 3)
		w.kfloat("timestamp", g.now-2+float64(s)*0.01+0.005, 3)
		if s == 0 {
			w.obj("data")
			w.kstr("password", canary.Kinds()[17].Value(uint64(c.index)))
			w.close()
		}
		w.close()
	}
	w.closeArr()
	w.close()
	pk := g.o.Projects[c.project].PublicKey
	env.Header = g.header(id, "sentry.python", "2.19.0", func(h *jw) {
		h.obj("trace")
		h.kstr("trace_id", trace)
		h.kstr("public_key", pk)
		h.close()
	})
	env.Items = []envelope.Item{{Type: "transaction", Payload: g.take()}}
	return id, 1
}

func (g *gen) sessionEnvelope(c *ctx, env *envelope.Envelope) int {
	w := g.payload()
	w.open()
	w.kstr("sid", g.uuid())
	w.kbool("init", true)
	w.kstr("started", rfc3339(g.now-60))
	w.kstr("timestamp", rfc3339(g.now-1))
	w.kstr("status", "ok")
	w.obj("attrs")
	w.kstr("release", "shop@1.0.0")
	w.kstr("environment", "production")
	w.kstr("user_agent", c.agent)
	w.close()
	w.close()
	env.Header = g.header("", "sentry.javascript.browser", "9.15.0", nil)
	env.Items = []envelope.Item{{Type: "session", Payload: g.take()}}
	return 1
}

func (g *gen) checkInEnvelope(c *ctx, s slot, env *envelope.Envelope) int {
	id := g.uuid()
	w := g.payload()
	w.open()
	w.kstr("check_in_id", id)
	w.kstr("monitor_slug", "nightly-export")
	if s.role == 1 {
		w.kstr("status", "in_progress")
	} else {
		w.kstr("status", "ok")
		w.kfloat("duration", 12.5, 3)
	}
	w.close()
	env.Header = g.header("", "sentry.python", "2.19.0", nil)
	env.Items = []envelope.Item{{Type: "check_in", Payload: g.take()}}
	return 1
}

func (g *gen) logEnvelope(c *ctx, env *envelope.Envelope) int {
	n := 1 + g.r.IntN(100)
	w := g.payload()
	w.open()
	w.arr("items")
	for j := 0; j < n; j++ {
		w.open()
		w.kfloat("timestamp", g.now-1, 3)
		w.kstr("trace_id", g.hexID(32))
		w.kstr("level", "info")
		body := "hello"
		if j == 0 {
			body = "mail to " + canary.Kinds()[15].Value(uint64(c.index))
		}
		w.kstr("body", body)
		w.obj("attributes")
		if j == 0 {
			w.obj("password")
			w.kstr("value", canary.Kinds()[16].Value(uint64(c.index)))
			w.kstr("type", "string")
			w.close()
		}
		w.close()
		w.close()
	}
	w.closeArr()
	w.close()
	env.Header = g.header("", "sentry.python", "2.19.0", nil)
	env.Items = []envelope.Item{{Type: "log", ContentType: "application/vnd.sentry.items.log+json", ItemCount: n, Payload: g.take()}}
	return n
}
