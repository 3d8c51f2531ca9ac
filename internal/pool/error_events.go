package pool

import (
	"strconv"

	"github.com/relayload/relayload/envelope"
)

// Error events. Sizes and counts (see the package doc for measured ranges):
// primary stack 20–80 frames, 30% chained with 1–2 causes of 5–30 frames,
// 5–60 breadcrumbs, request with 10–11 headers, cookies, query and body.

// appFrame writes one in-app frame.
func (g *gen) appFrame(w *jw, p *platform, vars func(w *jw)) {
	w.open()
	n := g.noun()
	switch p.lang {
	case langPython:
		file := n + "s/" + g.pickS([]string{"views", "services", "models", "tasks", "serializers", "utils", "api"}) + ".py"
		w.kstr("filename", file)
		w.kstrs("abs_path", "/app/", file)
		w.kstr("function", g.snake())
		w.kstr("module", file[:len(file)-3])
	case langJavaScript:
		if p.browser {
			w.kstrs("filename", "app:///assets/", n, "-", g.bundle, ".js")
			w.kstrs("abs_path", "https://", g.host, "/assets/", n, "-", g.bundle, ".js")
			if g.r.IntN(3) == 0 {
				w.kstrs("function", title(n), "Page.render")
			} else {
				w.kstr("function", g.camel())
			}
		} else {
			file := "/app/dist/" + n + "s/" + n + "." + g.pickS([]string{"service", "controller", "repository", "worker"}) + ".js"
			w.kstr("filename", file)
			w.kstr("abs_path", file)
			w.kstrs("function", title(n), "Service.", g.camel())
			w.kstrs("module", "dist.", n, "s:", n)
		}
		w.kint("colno", int64(1+g.r.IntN(80)))
	case langJava:
		cls := title(n) + g.pickS([]string{"Service", "Controller", "Repository", "Mapper", "Handler"})
		w.kstrs("filename", cls, ".java")
		w.kstrs("module", "com.shop.", n, ".", cls)
		w.kstr("function", g.camel())
	case langGo:
		file := g.s("internal/", n, "/", g.noun(), ".go")
		w.kstr("filename", file)
		w.kstrs("abs_path", "/src/", file)
		w.kstrs("module", "github.com/acme/shop/internal/", n)
		w.kstrs("function", "(*", title(g.noun()), "Service).", title(g.camel()))
	case langSwift:
		w.kstrs("function", title(n), "ViewController.", g.camel(), "()")
		w.kstrs("package", "/private/var/containers/Bundle/Application/", g.bundle, "/Shop.app/Shop")
		w.kstr("image_addr", "0x104f4c000")
		w.kstrs("instruction_addr", "0x104f", g.hexID(5))
	}
	if p.lang != langSwift {
		w.kint("lineno", int64(1+g.r.IntN(900)))
	}
	w.kbool("in_app", true)
	if p.lang != langSwift && g.r.IntN(100) < p.ctxLines {
		g.contextLines(w, p.lang)
	}
	if vars != nil {
		w.obj("vars")
		vars(w)
		w.close()
	} else if p.vars > 0 && g.r.IntN(100) < p.vars {
		w.obj("vars")
		g.someVars(w, p.lang, 2+g.r.IntN(6))
		w.close()
	}
	w.close()
}

func (g *gen) someVars(w *jw, lang language, n int) {
	var names [8]string
	for j := 0; j < n && j < len(names); j++ {
		name := g.noun() + suffixes[g.r.IntN(len(suffixes))]
		if j == 0 && lang == langPython {
			name = "self"
		}
		if slicesContains(names[:j], name) || name == "api_key" {
			name += "_" + g.itoa(j)
		}
		names[j] = name
		w.key(name)
		s, fn := g.varValue(lang)
		if fn != nil {
			fn(w)
		} else {
			w.str(s)
		}
	}
}

var suffixes = []string{"", "", "_id", "s", "_count", "_list", "_map", "_at", "_data"}

func (g *gen) contextLines(w *jw, lang language) {
	w.arr("pre_context")
	for j := 0; j < 5; j++ {
		w.strBytes(g.codeLine(lang))
	}
	w.closeArr()
	w.key("context_line")
	w.strBytes(g.codeLine(lang))
	w.arr("post_context")
	for j := 0; j < 5; j++ {
		w.strBytes(g.codeLine(lang))
	}
	w.closeArr()
}

// libFrame writes one library frame.
func (g *gen) libFrame(w *jw, p *platform) {
	f := p.libs[g.r.IntN(len(p.libs))]
	w.open()
	switch p.lang {
	case langPython:
		w.kstr("filename", f.file)
		w.kstrs("abs_path", "/usr/local/lib/python3.12/site-packages/", f.file)
		w.kstr("function", f.function)
		w.kstr("module", f.module)
	case langJavaScript:
		if p.browser {
			w.kstrs("filename", "app:///assets/vendor-", g.bundle, ".js")
			w.kstrs("abs_path", "https://", g.host, "/assets/vendor-", g.bundle, ".js")
		} else {
			w.kstr("filename", f.file)
			w.kstr("abs_path", f.file)
			w.kstr("module", f.module)
		}
		w.kstr("function", f.function)
		w.kint("colno", int64(1+fnHash(f.function)%60000))
	case langJava:
		w.kstr("filename", f.file)
		w.kstr("module", f.module)
		w.kstr("function", f.function)
	case langGo:
		w.kstr("filename", f.file[len(f.file)-len(lastPath(f.file)):])
		w.kstr("abs_path", f.file)
		w.kstr("module", f.module)
		w.kstr("function", f.function)
	case langSwift:
		w.kstr("function", f.function)
		w.kstrs("package", "/System/Library/Frameworks/", f.module, ".framework/", f.module)
		w.kstrs("image_addr", "0x18", g.hexID(7))
		w.kstrs("instruction_addr", "0x18", g.hexID(7))
	}
	if p.lang != langSwift {
		w.kint("lineno", int64(1+fnHash(f.function+f.file)%2000)) // a library function sits at one line
	}
	w.kbool("in_app", false)
	if (p.lang == langPython || p.lang == langGo) && g.r.IntN(100) < 15 {
		// A library function's source is the same wherever it appears:
		// draw its lines from a stream seeded by the function.
		main := g.r
		g.fixed.Seed(fnHash(f.file), fnHash(f.function))
		g.r = g.fixedR
		g.contextLines(w, p.lang)
		g.r = main
	}
	if p.lang == langPython && g.r.IntN(100) < 25 {
		w.obj("vars")
		g.someVars(w, p.lang, 1+g.r.IntN(4))
		w.close()
	}
	w.close()
}

func lastPath(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[i+1:]
		}
	}
	return s
}

// stacktrace writes n frames, caller first: library entry frames, the app's
// frames (some interleaved with library frames), then library frames at the
// crash site. plant, if set, writes the vars of one in-app frame.
func (g *gen) stacktrace(w *jw, p *platform, n int, plant func(w *jw)) {
	w.obj("stacktrace")
	w.arr("frames")
	outer := n * (3 + g.r.IntN(3)) / 10
	inner := g.r.IntN(max(1, n/8))
	plantAt := outer + g.r.IntN(max(1, n-outer-inner))
	for j := 0; j < n; j++ {
		switch {
		case j == plantAt:
			g.appFrame(w, p, plant)
		case j < outer || j >= n-inner:
			g.libFrame(w, p)
		case g.r.IntN(4) == 0:
			g.libFrame(w, p)
		default:
			g.appFrame(w, p, nil)
		}
	}
	w.closeArr()
	w.close()
}

func (g *gen) errorEnvelope(c *ctx, env *envelope.Envelope) (string, int) {
	p := g.platformFor(c.agent.Class)
	id := g.uuid()
	ts := g.now - 0.05 - g.r.Float64()*20
	release, environment := g.release(c), g.environment()
	traceID, spanID := g.uuid(), g.hexID(16)
	path, route := g.urlPath()
	host := g.pickS(hosts)
	g.host, g.bundle = host, g.hexID(8) // one web origin and one app build per event
	i := c.index

	w := g.payload()
	w.open()
	g.errorHead(w, p, id, ts, release, environment, route)
	g.logentry(w, i)
	g.exceptions(w, p, i)
	g.breadcrumbs(w, p, ts, host, i)
	g.request(w, p, c, host, path, i)
	g.eventUser(w, p, c, i)
	g.contexts(w, p, c, traceID, spanID)
	g.eventTags(w)
	g.eventExtra(w, i)
	if g.r.IntN(10) == 0 {
		w.arr("fingerprint")
		w.str("{{ default }}")
		w.str(g.noun())
		w.closeArr()
	}
	g.sdkInfo(w, p)
	w.close()

	pk := g.o.Projects[c.project].PublicKey
	env.Header = g.header(id, p.sdk, p.sdkVersion, func(h *jw) {
		g.dsc(h, traceID, pk, release, environment, route, true)
	})
	env.Items = []envelope.Item{{Type: "event", Payload: g.take()}}
	return id, 1
}

// errorHead writes the event's top-level fields: event_id, timestamp,
// platform, level, logger, server_name, release, dist, environment and
// transaction.
func (g *gen) errorHead(w *jw, p *platform, id string, ts float64, release, environment, route string) {
	w.kstr("event_id", id)
	w.kfixed("timestamp", int64(ts*1000), 3)
	w.kstr("platform", p.name)
	level := "error"
	switch x := g.r.IntN(10); {
	case x == 0:
		level = "fatal"
	case x == 1:
		level = "warning"
	}
	w.kstr("level", level)
	if p.logger != "" {
		w.kstr("logger", p.logger)
	}
	if p.server {
		w.kstrs("server_name", g.noun(), "-", g.hexID(5), "-", g.itoa(g.r.IntN(20)))
	}
	w.kstr("release", release)
	if p.mobile {
		w.kstr("dist", g.itoa(100+g.r.IntN(900)))
	}
	w.kstr("environment", environment)
	w.kstr("transaction", route)
}

// logentry writes the message; its formatted text carries the
// logentry_card canary.
func (g *gen) logentry(w *jw, i int) {
	orderID := g.itoa(1000 + g.r.IntN(900000))
	w.obj("logentry")
	w.kstr("message", "Payment declined for order %s")
	w.arr("params")
	w.str(orderID)
	w.closeArr()
	w.kstrs("formatted", "Payment declined for order ", orderID, " (card ", g.cv(cvLogentryCard, i), ")")
	w.close()
}

// exceptions writes 1–3 exceptions, causes first, the caught (outermost)
// exception last; its stack trace plants the frame_var_api_key canary.
func (g *gen) exceptions(w *jw, p *platform, i int) {
	nExc := 1
	switch x := g.r.IntN(100); {
	case x < 5:
		nExc = 3
	case x < 30:
		nExc = 2
	}
	w.obj("exception")
	w.arr("values")
	for k := 0; k < nExc; k++ {
		g.exception(w, p, k, nExc, i)
	}
	w.closeArr()
	w.close()
}

// exception writes exception k of n: a chained cause, or (k = n-1) the
// caught exception with the long stack trace.
func (g *gen) exception(w *jw, p *platform, k, n, i int) {
	e := p.excs[g.r.IntN(len(p.excs))]
	last := k == n-1
	w.open()
	w.kstr("type", e.typ)
	w.kstr("value", e.value(g))
	if e.module != "" {
		w.kstr("module", e.module)
	}
	w.obj("mechanism")
	if last {
		w.kstr("type", p.mechanisms[g.r.IntN(len(p.mechanisms))])
		w.kbool("handled", g.r.IntN(3) == 0)
		if n > 1 {
			w.kint("exception_id", 0)
		}
	} else {
		w.kstr("type", "chained")
		w.kstr("source", "__cause__")
		w.kint("exception_id", int64(n-1-k))
		w.kint("parent_id", int64(n-2-k))
	}
	w.close()
	if last {
		u := g.r.Float64()
		g.stacktrace(w, p, 20+int(u*u*61), func(w *jw) { // 20–80, mean ≈ 40
			w.kstr("api_key", g.cv(cvFrameVarAPIKey, i))
			w.kint("retries", int64(g.r.IntN(5)))
			w.kstr(g.noun()+"_id", g.itoa(g.r.IntN(100000)))
		})
	} else {
		g.stacktrace(w, p, 5+g.r.IntN(26), nil)
	}
	w.close()
}

// eventUser writes the user; its username carries the secret_value canary.
func (g *gen) eventUser(w *jw, p *platform, c *ctx, i int) {
	w.obj("user")
	w.kstr("id", g.itoa(1+g.r.IntN(5000000)))
	w.kstr("email", g.email())
	w.kstrs("username", "secret-", g.cv(cvSecretValue, i))
	if p.browser || p.mobile {
		w.kstr("ip_address", "{{auto}}")
	} else {
		w.kstr("ip_address", c.ip)
	}
	w.close()
}

// eventTags writes 3–8 distinct tags.
func (g *gen) eventTags(w *jw) {
	w.obj("tags")
	tagKeys := []string{"locale", "customer.tier", "region", "feature.new_checkout", "http.status_code", "shard", "payment.provider", "ab.variant", "page.type", "build.channel"}
	for j, n := 0, 3+g.r.IntN(6); j < n; j++ {
		// a partial Fisher-Yates shuffle keeps the keys distinct
		x := j + g.r.IntN(len(tagKeys)-j)
		tagKeys[j], tagKeys[x] = tagKeys[x], tagKeys[j]
		w.key(tagKeys[j])
		w.str(g.tagValue(tagKeys[j]))
	}
	w.close()
}

// eventExtra writes extra with the URL password, credentials, PEM key,
// card, IBAN and SSN canaries and the public_note control.
func (g *gen) eventExtra(w *jw, i int) {
	w.obj("extra")
	w.kstrs("db_url", "postgres://app:", g.cv(cvURLPassword, i), "@", g.pickS(dbHosts), ":5432/shop")
	w.obj("credentials")
	w.kstr("user", g.cv(cvCredentialsObject, i))
	w.kstr("scope", "read")
	w.close()
	w.kstrs("cert", "-----BEGIN PRIVATE KEY-----\n", g.cv(cvPemKey, i), "\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC", g.hexID(24), "\n-----END PRIVATE KEY-----")
	w.kstrs("payment_note", "charged ", g.cv(cvCreditCard, i))
	w.kstrs("iban_note", "refund to ", g.cv(cvIBAN, i))
	w.kstrs("ssn_note", "tax id ", g.cv(cvUSSSN, i))
	w.kstr("public_note", g.cv(cvPublicNote, i))
	w.kfloat("order_total", g.r.Float64()*500, 2)
	w.kint("retry_count", int64(g.r.IntN(4)))
	w.arr("feature_flags")
	for j, n := 0, g.r.IntN(5); j < n; j++ {
		w.str(g.noun() + "-" + g.adjective())
	}
	w.closeArr()
	w.close()
}

func (g *gen) tagValue(k string) string {
	switch k {
	case "locale":
		return g.pickS(locales)
	case "customer.tier":
		return g.pickS([]string{"free", "pro", "business", "enterprise"})
	case "region":
		return g.pickS([]string{"eu-west-1", "us-east-1", "us-west-2", "ap-southeast-2", "eu-central-1"})
	case "http.status_code":
		return g.itoa(400 + g.r.IntN(104))
	case "shard":
		return g.itoa(g.r.IntN(64))
	case "payment.provider":
		return g.pickS([]string{"stripe", "adyen", "paypal", "klarna", "braintree"})
	case "ab.variant":
		return g.pickS([]string{"control", "a", "b", "c"})
	}
	return g.noun() + "-" + g.adjective()
}

// dsc writes the envelope header's dynamic sampling context.
func (g *gen) dsc(h *jw, traceID, publicKey, release, environment, transaction string, sampled bool) {
	h.obj("trace")
	h.kstr("trace_id", traceID)
	h.kstr("public_key", publicKey)
	h.kstr("release", release)
	h.kstr("environment", environment)
	if transaction != "" {
		h.kstr("transaction", transaction)
	}
	h.kstr("sample_rate", g.pickS([]string{"1", "1", "0.5", "0.25", "0.1"}))
	h.kstr("sampled", strconv.FormatBool(sampled))
	h.close()
}

func (g *gen) sdkInfo(w *jw, p *platform) {
	w.obj("sdk")
	w.kstr("name", p.sdk)
	w.kstr("version", p.sdkVersion)
	w.arr("integrations")
	for _, s := range p.integrations {
		w.str(s)
	}
	w.closeArr()
	w.arr("packages")
	w.open()
	w.kstr("name", p.pkg)
	w.kstr("version", p.sdkVersion)
	w.close()
	w.closeArr()
	w.close()
}

// breadcrumbs writes 5–60 breadcrumbs ending just before ts; one carries
// the breadcrumb_token canary in data.token.
func (g *gen) breadcrumbs(w *jw, p *platform, ts float64, host string, i int) {
	n := 5 + g.r.IntN(56)
	plant := g.r.IntN(n)
	var endpoints [6]string
	for j := range endpoints {
		pth, _ := g.urlPath()
		endpoints[j] = g.s("https://", g.pickS(apiHosts), pth)
	}
	step := 0.2 + g.r.Float64()*3 // mean seconds between breadcrumbs
	t0 := ts - float64(n)*step
	w.obj("breadcrumbs")
	w.arr("values")
	for j := 0; j < n; j++ {
		t := t0 + step*(float64(j)+0.9*g.r.Float64())
		w.open()
		w.kfixed("timestamp", int64(t*1000), 3)
		kind := g.r.IntN(5)
		if j == plant {
			kind = 0
		}
		g.breadcrumb(w, p, kind, endpoints[:], j == plant, i)
		w.close()
	}
	w.closeArr()
	w.close()
}

// breadcrumb writes the type, category, level, message and data of one
// breadcrumb of kind 0 (http; with plant the one with the breadcrumb_token
// canary), 1 (navigation or query), 2 (ui.click or query) or 3–4 (log
// message). Browsers and apps navigate and click, servers query.
func (g *gen) breadcrumb(w *jw, p *platform, kind int, endpoints []string, plant bool, i int) {
	switch kind {
	case 0:
		status := 200
		if g.r.IntN(6) == 0 {
			status = 400 + g.r.IntN(104)
		}
		w.kstr("type", "http")
		if p.browser {
			w.kstr("category", g.pickS([]string{"fetch", "xhr"}))
		} else {
			w.kstr("category", "httplib")
		}
		if status >= 400 {
			w.kstr("level", "warning")
		}
		w.obj("data")
		w.kstr("method", g.pickS([]string{"GET", "GET", "GET", "POST", "PUT", "DELETE"}))
		w.kstr("url", endpoints[g.r.IntN(len(endpoints))]) // apps call a few endpoints again and again
		w.kint("status_code", int64(status))
		if plant {
			w.kstr("token", g.cv(cvBreadcrumbToken, i))
		}
		w.close()
	case 1:
		if p.browser || p.mobile {
			from, _ := g.urlPath()
			to, _ := g.urlPath()
			w.kstr("type", "navigation")
			w.kstr("category", "navigation")
			w.obj("data")
			w.kstr("from", from)
			w.kstr("to", to)
			w.close()
		} else {
			w.kstr("type", "default")
			w.kstr("category", "query")
			w.kstr("message", g.sql(nil))
		}
	case 2:
		if p.browser || p.mobile {
			w.kstr("type", "default")
			w.kstr("category", "ui.click")
			n := g.noun()
			w.kstrs("message", "div.", n, "-list > button.", n, "-", g.verb(), "[data-test-id=\"", g.verb(), "-", n, "\"]")
		} else {
			w.kstr("type", "default")
			w.kstr("category", "query")
			w.kstr("message", g.sql(nil))
		}
	default:
		w.kstr("type", "default")
		w.kstr("category", g.pickS([]string{"console", "console", "app." + g.noun(), "redis"}))
		w.kstr("level", g.pickS([]string{"info", "info", "debug", "warning"}))
		w.kstr("message", g.sentence())
	}
}

// request writes the request interface with the request canaries.
func (g *gen) request(w *jw, p *platform, c *ctx, host, path string, i int) {
	method := g.pickS([]string{"POST", "POST", "POST", "PUT", "PATCH"})
	w.obj("request")
	w.kstrs("url", "https://", host, path)
	w.kstr("method", method)
	// query string: the password pair somewhere among ordinary parameters
	q := make([]byte, 0, 96)
	params := 1 + g.r.IntN(4)
	plant := g.r.IntN(params + 1)
	for j := 0; j <= params; j++ {
		if j > 0 {
			q = append(q, '&')
		}
		if j == plant {
			q = append(q, "password="...)
			q = append(q, g.cv(cvQueryPassword, i)...)
			continue
		}
		q = append(q, g.pickS([]string{"page", "sort", "limit", "ref", "utm_source", "lang", "view", "step"})...)
		q = append(q, '=')
		q = append(q, g.noun()...)
	}
	w.kstr("query_string", string(q))
	w.obj("headers")
	w.kstr("Host", host)
	w.kstr("User-Agent", c.agent.UA)
	w.kstr("Accept", g.pickS([]string{"application/json", "application/json, text/plain, */*", "*/*"}))
	w.kstrs("Accept-Language", g.pickS(locales), ",", g.pickS([]string{"en;q=0.9", "en-US;q=0.8,en;q=0.7", "de;q=0.8"}))
	w.kstr("Accept-Encoding", "gzip, deflate, br, zstd")
	w.kstr("Content-Type", "application/json")
	w.kstrs("Referer", "https://", host, "/", g.noun(), "s")
	w.kstr("X-Request-Id", g.uuid())
	w.kstrs("Authorization", "Bearer ", g.cv(cvAuthorizationHeader, i))
	w.kstr("X-Api-Key", g.cv(cvAPIKeyHeader, i))
	if g.r.IntN(2) == 0 {
		w.kstr("X-Forwarded-Proto", "https")
	}
	w.close()
	w.obj("cookies")
	w.kstr("sessionid", g.cv(cvSessionCookie, i))
	w.kstr("theme", g.pickS([]string{"dark", "light", "system"}))
	w.kstr("lang", g.pickS(locales))
	w.kstrs("_ga", "GA1.2.", g.itoa(g.r.IntN(999999999)), ".", g.itoa(1700000000+g.r.IntN(60000000)))
	if g.r.IntN(2) == 0 {
		w.kstr("cart_id", g.hexID(16))
	}
	w.close()
	w.obj("data")
	w.kstr("email", g.email())
	w.kstr("password", g.cv(cvRequestPassword, i))
	w.kbool("remember_me", g.r.IntN(2) == 0)
	w.arr("items")
	for j, n := 0, 1+g.r.IntN(4); j < n; j++ {
		w.open()
		w.kstrs("sku", g.noun(), "-", g.hexID(6))
		w.kint("quantity", int64(1+g.r.IntN(5)))
		w.close()
	}
	w.closeArr()
	w.close()
	if p.name == "python" {
		w.obj("env")
		w.kstr("REMOTE_ADDR", c.ip)
		w.kstr("SERVER_NAME", host)
		w.kstr("SERVER_PORT", "443")
		w.close()
	}
	w.close()
}

// contexts writes trace, runtime/os/device/app/culture as the platform sends them.
func (g *gen) contexts(w *jw, p *platform, c *ctx, traceID, spanID string) {
	w.obj("contexts")
	w.obj("trace")
	w.kstr("trace_id", traceID)
	w.kstr("span_id", spanID)
	w.kstr("op", g.pickS([]string{"http.server", "pageload", "navigation", "task", "ui.action.click"}))
	w.kstr("status", "internal_error")
	w.close()
	if p.runtime[0] != "" {
		w.obj("runtime")
		w.kstr("name", p.runtime[0])
		w.kstr("version", p.runtime[1])
		w.close()
	}
	if p.server {
		w.obj("os")
		w.kstr("name", "Linux")
		k := g.r.IntN(3)
		w.kstr("version", [...]string{"6.1.0", "5.15.0", "6.8.0"}[k])
		w.kstr("kernel_version", [...]string{"6.1.0-28-cloud-amd64", "5.15.0-1071-aws", "6.8.0-1019-gcp"}[k])
		w.close()
	}
	if p.mobile {
		w.obj("os")
		w.kstr("name", "iOS")
		w.kstrs("version", g.itoa(16+g.r.IntN(3)), ".", g.itoa(g.r.IntN(7)))
		w.kstrs("build", g.itoa(20+g.r.IntN(3)), string(rune('A'+g.r.IntN(8))), g.itoa(100+g.r.IntN(300)))
		w.kbool("rooted", false)
		w.close()
		w.obj("device")
		w.kstr("family", "iOS")
		w.kstrs("model", "iPhone", g.itoa(13+g.r.IntN(5)), ",", g.itoa(1+g.r.IntN(4)))
		w.kstrs("model_id", "D", g.itoa(16+g.r.IntN(60)), "AP")
		w.kstr("arch", "arm64e")
		w.kint("memory_size", int64(4+2*g.r.IntN(3))<<30)
		w.kint("free_memory", int64(g.r.IntN(1<<30)))
		w.kfloat("battery_level", float64(g.r.IntN(100)), 0)
		w.kstr("orientation", g.pickS([]string{"portrait", "landscape"}))
		w.kbool("simulator", false)
		w.close()
		w.obj("app")
		w.kstr("app_identifier", "com.acme.shop")
		w.kstr("app_name", "Shop")
		w.kstr("app_version", g.semver(6))
		w.kstr("app_build", g.itoa(100+g.r.IntN(900)))
		w.kstr("app_start_time", rfc3339(g.now-60-g.r.Float64()*3600))
		w.close()
	}
	if p.browser || p.mobile {
		w.obj("culture")
		w.kstr("locale", g.pickS(locales))
		w.kstr("timezone", g.pickS(timezones))
		w.close()
	}
	w.close()
}

func slicesContains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// fnHash is FNV-1a, for per-function constants.
func fnHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
