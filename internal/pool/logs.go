package pool

import (
	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/useragent"
)

// Logs: one `log` container item with 1–100 records (long-tailed: median
// ≈ 7, mean ≈ 21), item_count = records, content_type
// application/vnd.sentry.items.log+json. Records carry 5–15 attributes:
// the SDK defaults, a message template with parameters for half of them,
// and a few typed custom attributes. One record's body carries the
// log_body_email canary, one record has a `password` attribute
// (log_attribute_password). Browser logs carry user_agent.original.

const logContentType = "application/vnd.sentry.items.log+json"

var levels = [...]struct {
	name string
	sev  int64
}{{"trace", 1}, {"debug", 5}, {"info", 9}, {"info", 9}, {"info", 9}, {"info", 9}, {"warn", 13}, {"warn", 13}, {"error", 17}, {"fatal", 21}}

// logTemplate is a parameterised message, "<A> %s <verb> for <b> %s in %sms"
// with its three parameters.
type logTemplate struct {
	a, verb, b string
	params     [3]string
}

// logBatch is what the records of one log envelope share.
type logBatch struct {
	c                          *ctx
	p                          *platform
	release, environment, host string
}

func (g *gen) logEnvelope(c *ctx, env *envelope.Envelope) int {
	p := g.platformFor(c.agent.Class)
	if p.mobile {
		p = platforms[1+g.r.IntN(4)]
	}
	u := g.r.Float64()
	n := 1 + int(u*u*u*u*100) // long tail: mean ≈ 21, median ≈ 7
	if n > 100 {
		n = 100
	}
	b := logBatch{c: c, p: p}
	b.release, b.environment = g.release(c), g.environment()
	b.host = g.noun() + "-" + g.hexID(5)
	emailAt, pwAt := g.r.IntN(n), g.r.IntN(n)
	t := g.now - 15 - g.r.Float64()*10 // ≤ 100 records × ≤ 0.1 s: the last ends ≥ 5 s before Now
	traceID := g.uuid()

	w := g.payload()
	w.open()
	w.arr("items")
	for j := 0; j < n; j++ {
		if g.r.IntN(8) == 0 {
			traceID = g.uuid()
		}
		t += g.r.Float64() * 0.1
		g.logRecord(w, &b, t, traceID, j == emailAt, j == pwAt)
	}
	w.closeArr()
	w.close()
	env.Header = g.header("", p.sdk, p.sdkVersion, nil)
	env.Items = []envelope.Item{{Type: "log", ContentType: logContentType, ItemCount: n, Payload: g.take()}}
	return n
}

// logRecord writes one record at t (seconds). With email its body carries
// the log_body_email canary, with password it has the
// log_attribute_password attribute.
func (g *gen) logRecord(w *jw, b *logBatch, t float64, traceID string, email, password bool) {
	lv := levels[g.r.IntN(len(levels))]
	w.open()
	w.kfixed("timestamp", int64(t*1e6), 6)
	w.kstr("trace_id", traceID)
	if g.r.IntN(2) == 0 {
		w.kstr("span_id", g.hexID(16))
	}
	w.kstr("level", lv.name)
	w.kint("severity_number", lv.sev)
	tm, templated := g.logBody(w, email, b.c.index)
	w.obj("attributes")
	g.logAttributes(w, b, &tm, templated)
	if password {
		attrStr(w, "password", g.cv(cvLogAttributePassword, b.c.index))
	}
	w.close()
	w.close()
}

// logBody writes the body: a parameterised message (then it returns its
// template, and true) or free text.
func (g *gen) logBody(w *jw, email bool, i int) (tm logTemplate, templated bool) {
	templated = g.r.IntN(2) == 0
	if email {
		w.kstrs("body", "Receipt sent to ", g.cv(cvLogBodyEmail, i))
		return tm, false
	} else if templated {
		tm.a, tm.b = g.noun(), g.noun()
		tm.verb = g.pickS(pastVerbs)
		tm.params = [3]string{g.itoa(g.r.IntN(1000000)), g.hexID(8), g.itoa(g.r.IntN(5000))}
		w.kstrs("body", title(tm.a), " ", tm.params[0], " ", tm.verb, " for ", tm.b, " ", tm.params[1], " in ", tm.params[2], "ms")
	} else {
		w.kstr("body", g.sentence())
	}
	return tm, templated
}

// logAttributes writes the SDK defaults, the message template and its
// parameters (if templated), and 0–4 typed custom attributes.
func (g *gen) logAttributes(w *jw, b *logBatch, tm *logTemplate, templated bool) {
	p, c := b.p, b.c
	attrStr(w, "sentry.environment", b.environment)
	attrStr(w, "sentry.release", b.release)
	attrStr(w, "sentry.sdk.name", p.sdk)
	attrStr(w, "sentry.sdk.version", p.sdkVersion)
	if p.server {
		attrStr(w, "server.address", b.host)
	}
	if c.agent.Class == useragent.Browser && p.browser {
		attrStr(w, "user_agent.original", c.agent.UA)
	}
	if templated {
		attrStr(w, "sentry.message.template", title(tm.a)+" %s "+tm.verb+" for "+tm.b+" %s in %sms")
		for k, v := range tm.params {
			attrStr(w, "sentry.message.parameter."+g.itoa(k), v)
		}
	}
	if g.r.IntN(3) == 0 {
		attrStr(w, "sentry.origin", "auto.log."+g.pickS([]string{"stdlib", "console", "logback", "slog", "winston"}))
	}
	var custom [4]string
	for k, m := 0, g.r.IntN(5); k < m; k++ {
		name := g.noun() + "." + g.pickS([]string{"id", "count", "ms", "enabled", "name", "ratio"})
		if slicesContains(custom[:k], name) {
			continue
		}
		custom[k] = name
		w.obj(name)
		switch name[indexByte(name, '.')+1:] {
		case "count", "id":
			w.kint("value", int64(g.r.IntN(100000)))
			w.kstr("type", "integer")
		case "ms", "ratio":
			w.kfloat("value", g.r.Float64()*1000, 3)
			w.kstr("type", "double")
		case "enabled":
			w.kbool("value", g.r.IntN(2) == 0)
			w.kstr("type", "boolean")
		default:
			w.kstrs("value", g.noun(), "-", g.adjective())
			w.kstr("type", "string")
		}
		w.close()
	}
}

func attrStr(w *jw, k, v string) {
	w.obj(k)
	w.kstr("value", v)
	w.kstr("type", "string")
	w.close()
}

var pastVerbs = []string{"loaded", "saved", "updated", "created", "deleted", "computed", "validated", "parsed", "rendered", "built", "handled", "processed", "dispatched", "applied", "resolved", "synced", "refreshed", "submitted", "sent", "published", "consumed", "queued", "merged", "found", "checked", "scheduled", "retried", "flushed", "committed", "reserved", "charged", "shipped"}
