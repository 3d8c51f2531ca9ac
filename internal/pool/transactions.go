package pool

import (
	"strconv"

	"github.com/relayload/relayload/envelope"
)

// Transactions: 20–100 spans as a tree under the root span (the trace
// context): ~65% direct children of the root, the rest nested up to 4
// levels under function/middleware spans. Every child lies within its
// parent's time range; siblings run one after another.

// sql returns a statement with placeholders in the platform's style; if
// op is non-nil it receives the db.operation.
func (g *gen) sql(op *string) string {
	t, u := g.noun(), g.noun()
	a, b := t[:1], u[:1]
	if a == b {
		b += "2"
	}
	c1, c2, c3 := g.noun(), g.noun(), g.noun()
	var s, o string
	switch g.r.IntN(9) {
	case 0, 1, 2:
		o = "SELECT"
		s = "SELECT " + a + ".id, " + a + "." + c1 + ", " + a + "." + c2 + "_id, " + a + ".created_at FROM " + t + "s " + a + " WHERE " + a + "." + c3 + "_id = %s LIMIT %s"
	case 3:
		o = "SELECT"
		s = "SELECT COUNT(*) AS __count FROM " + t + "s WHERE (" + t + "s." + c1 + "_id = %s AND " + t + "s.status = %s)"
	case 4:
		o = "SELECT"
		s = "SELECT " + a + ".id, " + a + "." + c1 + ", " + b + ".id, " + b + "." + c2 + " FROM " + t + "s " + a + " INNER JOIN " + u + "s " + b + " ON (" + a + "." + u + "_id = " + b + ".id) WHERE " + b + ".id IN (%s, %s, %s) ORDER BY " + a + ".created_at DESC"
	case 5:
		o = "INSERT"
		s = "INSERT INTO " + t + "s (" + c1 + ", " + c2 + "_id, " + c3 + ", created_at) VALUES (%s, %s, %s, %s) RETURNING " + t + "s.id"
	case 6:
		o = "UPDATE"
		s = "UPDATE " + t + "s SET " + c1 + " = %s, updated_at = %s WHERE " + t + "s.id = %s"
	case 7:
		o = "DELETE"
		s = "DELETE FROM " + t + "_" + u + "s WHERE " + t + "_id = %s"
	default:
		o = "SELECT"
		s = "SELECT DISTINCT " + a + "." + c1 + " FROM " + t + "s " + a + " WHERE " + a + "." + c2 + " >= %s AND " + a + "." + c3 + " IS NOT NULL ORDER BY " + a + "." + c1 + " ASC"
	}
	if op != nil {
		*op = o
	}
	return s
}

// placeholders rewrites %s to the platform's style: $1.. (node, go), ? (java).
func placeholders(s string, lang language) string {
	if lang != langJavaScript && lang != langGo && lang != langJava {
		return s
	}
	out := make([]byte, 0, len(s)+8)
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+1 < len(s) && s[i+1] == 's' {
			n++
			if lang == langJava {
				out = append(out, '?')
			} else {
				out = append(out, '$')
				out = strconv.AppendInt(out, int64(n), 10)
			}
			i++
			continue
		}
		out = append(out, s[i])
	}
	return string(out)
}

// spanKind is what a span does; it decides the span's data and origin.
type spanKind uint8

const (
	spanFunction spanKind = iota // function, middleware, render: may have children
	spanDB                       // SQL statement
	spanHTTP                     // outgoing HTTP request
	spanCache                    // cache get/put
	spanResource                 // browser resource load
	spanBrowser                  // browser page-load phase
)

type span struct {
	parent     int // index into spans; -1 = root
	id         string
	op, desc   string
	start, end int64 // microseconds since epoch
	children   []int
	container  bool
	kind       spanKind
	dbOp       string
}

// layout assigns times: node's children run one after another inside
// [start, end], each taking a random share with small gaps.
func (g *gen) layout(spans []span, children []int, start, end int64) {
	k := len(children)
	if k == 0 {
		return
	}
	total := end - start
	weights := make([]float64, k)
	var sum float64
	for j := range weights {
		weights[j] = 0.2 + g.r.Float64()
		sum += weights[j]
	}
	t := start
	for j, ci := range children {
		slot := int64(float64(total) * weights[j] / sum)
		gap := int64(float64(slot) * (0.02 + g.r.Float64()*0.1))
		s := t + gap/2
		e := t + slot - gap/2
		if e < s {
			e = s
		}
		if e > end {
			e = end
		}
		if s > e {
			s = e
		}
		spans[ci].start, spans[ci].end = s, e
		g.layout(spans, spans[ci].children, s, e)
		t += slot
	}
}

// transaction is what the parts of one transaction envelope share.
type transaction struct {
	c                    *ctx
	p                    *platform
	id, traceID, rootID  string
	release, environment string
	path, host           string
	method, route        string // the name's method prefix ("GET "; "" in browsers) and route
	rootOp               string // the root span's op
	startUS, endUS       int64
}

func (g *gen) transactionEnvelope(c *ctx, env *envelope.Envelope) (string, int) {
	t := g.newTransaction(c)
	// The name is a local, not a field of t, so that it stays on the stack
	// (escape analysis does not tell t's fields apart, and t.id is returned).
	name := t.method + t.route
	u := g.r.Float64()
	spans := g.drawSpans(&t, 20+int(u*u*81)) // 20–100, mean ≈ 47
	plant := g.r.IntN(len(spans))

	w := g.payload()
	w.open()
	g.transactionHead(w, &t, name)
	g.transactionSpans(w, &t, spans, plant)
	g.measurements(w, t.p)
	g.transactionRequest(w, &t, name)
	w.obj("tags")
	w.kstr("locale", g.pickS(locales))
	w.kstr("customer.tier", g.tagValue("customer.tier"))
	w.close()
	w.obj("extra")
	w.kstr("public_note", g.cv(cvPublicNote, c.index))
	w.close()
	g.sdkInfo(w, t.p)
	w.close()

	pk := g.o.Projects[c.project].PublicKey
	env.Header = g.header(t.id, t.p.sdk, t.p.sdkVersion, func(h *jw) {
		g.dsc(h, t.traceID, pk, t.release, t.environment, name, true)
	})
	env.Items = []envelope.Item{{Type: "transaction", Payload: g.take()}}
	return t.id, 1
}

// newTransaction draws the platform, ids, method, route and time range.
func (g *gen) newTransaction(c *ctx) transaction {
	p := g.platformFor(c.agent.Class)
	if p.mobile {
		p = platforms[1+g.r.IntN(4)]
	}
	t := transaction{c: c, p: p}
	t.id = g.uuid()
	t.traceID, t.rootID = g.uuid(), g.hexID(16)
	t.release, t.environment = g.release(c), g.environment()
	t.path, t.route = g.urlPath()
	t.host = g.pickS(hosts)

	var durUS int64
	t.rootOp = "http.server"
	t.method = g.pickS([]string{"GET ", "POST ", "GET ", "PUT "})
	if p.browser {
		t.rootOp = g.pickS([]string{"pageload", "pageload", "navigation"})
		durUS = 500_000 + g.r.Int64N(7_500_000)
		t.method = ""
	} else {
		durUS = 30_000 + g.r.Int64N(2_970_000)
	}
	t.endUS = g.o.Now.UnixMicro() - 50_000 - g.r.Int64N(20_000_000)
	t.startUS = t.endUS - durUS
	return t
}

// spanTree holds a transaction's spans while they are drawn.
type spanTree struct {
	spans      []span
	containers []int // spans that may have children
}

func (st *spanTree) add(g *gen, s span) int {
	s.id = g.hexID(16)
	idx := len(st.spans)
	st.spans = append(st.spans, s)
	if s.parent >= 0 {
		st.spans[s.parent].children = append(st.spans[s.parent].children, idx)
	}
	if s.container {
		st.containers = append(st.containers, idx)
	}
	return idx
}

// parentFor picks a new span's parent: the root (-1) for ~65%, else a
// container less than 4 levels deep.
func (g *gen) parentFor(st *spanTree) int {
	parent := -1
	if len(st.containers) > 0 && g.r.IntN(100) >= 65 {
		parent = st.containers[g.r.IntN(len(st.containers))]
	}
	if parent >= 0 && st.depth(parent) >= 4 {
		parent = -1
	}
	return parent
}

func (st *spanTree) depth(idx int) int {
	d := 0
	for idx >= 0 {
		idx = st.spans[idx].parent
		d++
	}
	return d
}

// drawSpans draws n spans as a tree under the root and lays them out in
// time.
func (g *gen) drawSpans(t *transaction, n int) []span {
	p := t.p
	st := &spanTree{spans: make([]span, 0, n)}
	if p.browser {
		for _, ev := range []string{"domContentLoadedEvent", "loadEvent", "connect", "request", "response"} {
			st.add(g, span{parent: -1, op: "browser." + ev, desc: ev, kind: spanBrowser})
		}
	} else {
		for j, m := 0, 2+g.r.IntN(3); j < m; j++ {
			st.add(g, span{parent: -1, op: "middleware." + p.name, desc: title(g.noun()) + "Middleware", kind: spanFunction, container: true})
		}
	}
	for len(st.spans) < n {
		parent := g.parentFor(st)
		switch x := g.r.IntN(100); {
		case x < 8 && n-len(st.spans) >= 10:
			// N+1: the same statement 10–30 times in a row under one parent.
			var op string
			stmt := placeholders(g.sql(&op), p.lang)
			for j, m := 0, min(10+g.r.IntN(21), n-len(st.spans)); j < m; j++ {
				st.add(g, span{parent: parent, op: dbOp(p), desc: stmt, kind: spanDB, dbOp: op})
			}
		case x < 45:
			var op string
			stmt := placeholders(g.sql(&op), p.lang)
			st.add(g, span{parent: parent, op: dbOp(p), desc: stmt, kind: spanDB, dbOp: op})
		case x < 60:
			m := g.pickS([]string{"GET", "GET", "POST", "PUT", "DELETE"})
			pth, _ := g.urlPath()
			st.add(g, span{parent: parent, op: "http.client", desc: m + " https://" + g.pickS(apiHosts) + pth, kind: spanHTTP})
		case x < 72:
			st.add(g, span{parent: parent, op: g.pickS([]string{"cache.get", "cache.get", "cache.put"}), desc: g.noun() + ":" + g.itoa(g.r.IntN(100000)), kind: spanCache})
		case x < 80 && p.browser:
			st.add(g, span{parent: parent, op: g.pickS([]string{"resource.script", "resource.css", "resource.img", "resource.other"}), desc: "https://" + t.host + "/assets/" + g.noun() + "-" + g.hexID(8) + ".js", kind: spanResource})
		default:
			op := g.pickS([]string{"function", "function", "serialize", "template.render", "queue.publish", "view.render"})
			if p.browser {
				op = g.pickS([]string{"ui.react.render", "ui.react.mount", "function", "mark"})
			}
			st.add(g, span{parent: parent, op: op, desc: g.camel(), kind: spanFunction, container: true})
		}
	}
	var root []int // direct children of the root span
	for idx := range st.spans {
		if st.spans[idx].parent < 0 {
			root = append(root, idx)
		}
	}
	g.layout(st.spans, root, t.startUS, t.endUS)
	return st.spans
}

// spanStatuses is what a span's or the root's status is drawn from: mostly ok.
var spanStatuses = []string{"ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "internal_error", "not_found", "deadline_exceeded"}

// transactionHead writes the event's fields up to and including contexts.
func (g *gen) transactionHead(w *jw, t *transaction, name string) {
	p := t.p
	w.kstr("event_id", t.id)
	w.kstr("type", "transaction")
	w.kstr("platform", p.name)
	w.kstr("transaction", name)
	w.obj("transaction_info")
	if p.browser {
		w.kstr("source", "route")
	} else {
		w.kstr("source", g.pickS([]string{"route", "route", "url", "view"}))
	}
	w.close()
	w.kfixed("start_timestamp", t.startUS, 6)
	w.kfixed("timestamp", t.endUS, 6)
	w.kstr("release", t.release)
	w.kstr("environment", t.environment)
	if p.server {
		w.kstrs("server_name", g.noun(), "-", g.hexID(5), "-", g.itoa(g.r.IntN(20)))
	}
	w.obj("contexts")
	w.obj("trace")
	w.kstr("trace_id", t.traceID)
	w.kstr("span_id", t.rootID)
	w.kstr("op", t.rootOp)
	w.kstr("status", g.pickS(spanStatuses))
	w.kstrs("origin", "auto.http.", p.name)
	w.close()
	if p.runtime[0] != "" {
		w.obj("runtime")
		w.kstr("name", p.runtime[0])
		w.kstr("version", p.runtime[1])
		w.close()
	}
	w.close()
}

// transactionSpans writes the spans; spans[plant] carries the
// span_data_password canary.
func (g *gen) transactionSpans(w *jw, t *transaction, spans []span, plant int) {
	w.arr("spans")
	for si := range spans {
		s := &spans[si]
		w.open()
		w.kstr("span_id", s.id)
		if s.parent < 0 {
			w.kstr("parent_span_id", t.rootID)
		} else {
			w.kstr("parent_span_id", spans[s.parent].id)
		}
		w.kstr("trace_id", t.traceID)
		w.kstr("op", s.op)
		w.kstr("description", s.desc)
		w.kfixed("start_timestamp", s.start, 6)
		w.kfixed("timestamp", s.end, 6)
		w.kstr("status", g.pickS(spanStatuses))
		w.kstr("origin", spanOrigin(s.kind, t.p))
		w.obj("data")
		g.spanData(w, t.p, s)
		if si == plant {
			w.kstr("password", g.cv(cvSpanDataPassword, t.c.index))
		}
		w.close()
		w.close()
	}
	w.closeArr()
}

// spanData writes a span's data as in the span data conventions.
func (g *gen) spanData(w *jw, p *platform, s *span) {
	switch s.kind {
	case spanDB:
		w.kstr("db.system", g.pickS([]string{"postgresql", "postgresql", "mysql"}))
		w.kstr("db.name", g.pickS([]string{"shop", "orders", "catalog", "accounts_ro"}))
		w.kstr("db.operation", s.dbOp)
		w.kstr("server.address", g.pickS(dbHosts))
		w.kint("server.port", 5432)
	case spanHTTP:
		w.kstr("http.request.method", s.desc[:indexByte(s.desc, ' ')])
		w.kint("http.response.status_code", int64(g.pickStatus()))
		w.kstr("url", s.desc[indexByte(s.desc, ' ')+1:])
		w.kint("http.response_content_length", int64(g.r.IntN(200000)))
	case spanCache:
		w.kbool("cache.hit", g.r.IntN(3) > 0)
		w.arr("cache.key")
		w.str(s.desc)
		w.closeArr()
		w.kint("cache.item_size", int64(g.r.IntN(20000)))
		w.kstrs("network.peer.address", "redis-", g.itoa(g.r.IntN(4)), ".internal")
	case spanResource:
		w.kint("http.response_content_length", int64(g.r.IntN(500000)))
		w.kint("http.decoded_response_content_length", int64(g.r.IntN(2000000)))
		w.kstr("resource.render_blocking_status", g.pickS([]string{"blocking", "non-blocking"}))
	default:
		switch p.lang {
		case langPython:
			w.kstr("thread.name", "MainThread")
		case langJava:
			w.kstrs("thread.name", "http-nio-8080-exec-", g.itoa(1+g.r.IntN(200)))
		case langJavaScript:
			w.kstr("thread.name", "main")
		}
	}
}

// webVitals are the browser measurements, each drawn in [0, max).
var webVitals = []struct {
	name string
	max  float64
	unit string
}{{"fp", 3000, "millisecond"}, {"fcp", 3000, "millisecond"}, {"lcp", 6000, "millisecond"}, {"ttfb", 1500, "millisecond"}, {"ttfb.requesttime", 800, "millisecond"}, {"cls", 0.5, "none"}}

// measurements writes web vitals (browser) or, for a third of server
// transactions, one custom measurement.
func (g *gen) measurements(w *jw, p *platform) {
	if p.browser {
		w.obj("measurements")
		for _, m := range webVitals {
			w.obj(m.name)
			w.kfloat("value", g.r.Float64()*m.max, 3)
			w.kstr("unit", m.unit)
			w.close()
		}
		w.close()
	} else if g.r.IntN(3) == 0 {
		w.obj("measurements")
		w.obj(g.noun() + "s.processed")
		w.kint("value", int64(g.r.IntN(500)))
		w.kstr("unit", "none")
		w.close()
		w.close()
	}
}

// transactionRequest writes the request (with the entry's agent) and the user.
func (g *gen) transactionRequest(w *jw, t *transaction, name string) {
	w.obj("request")
	w.kstrs("url", "https://", t.host, t.path)
	method := "GET"
	if !t.p.browser {
		method = name[:indexByte(name, ' ')]
	}
	w.kstr("method", method)
	w.obj("headers")
	w.kstr("User-Agent", t.c.agent.UA)
	w.kstr("Accept-Language", g.pickS(locales))
	w.close()
	w.close()
	w.obj("user")
	w.kstr("id", g.itoa(1+g.r.IntN(5000000)))
	w.kstr("ip_address", "{{auto}}")
	w.close()
}

func dbOp(p *platform) string {
	if p.lang == langJava {
		return "db.sql.query"
	}
	return "db"
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func (g *gen) pickStatus() int {
	if g.r.IntN(10) == 0 {
		return 400 + g.r.IntN(104)
	}
	return 200 + g.r.IntN(2)
}

// spanOrigin names the instrumentation that would have made a span.
func spanOrigin(kind spanKind, p *platform) string {
	switch kind {
	case spanDB:
		return "auto.db." + p.name
	case spanHTTP:
		return "auto.http." + p.name
	case spanCache:
		return "auto.cache." + p.name
	case spanResource, spanBrowser:
		return "auto.resource.browser.metrics"
	}
	return "manual"
}
