package pool

import (
	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/useragent"
)

// Sessions: 70% one `session` update, 10% 2–5 updates of different
// sessions (an app flushing its queue), 20% one aggregated `sessions` item
// with 1–30 minute buckets. Every session started 1–120 minutes before Now
// and its timestamp lies between started and Now, inside Relay's window
// (at most 5 days old, at most 60 s in the future).

type sessionSDK struct{ name, version string }

func (g *gen) sessionSDK(class useragent.Class) sessionSDK {
	switch class {
	case useragent.Browser, useragent.Bot:
		return sessionSDK{"sentry.javascript.browser", "9.15.0"}
	case useragent.IOSApp:
		return sessionSDK{"sentry.cocoa", "8.43.0"}
	case useragent.AndroidApp:
		return sessionSDK{"sentry.java.android", "8.1.0"}
	}
	return sessionSDK{"sentry.python", "2.19.0"}
}

func (g *gen) sessionEnvelope(c *ctx, env *envelope.Envelope) int {
	sdk := g.sessionSDK(c.agent.Class)
	release, environment := g.release(c), g.environment()
	env.Header = g.header("", sdk.name, sdk.version, nil)
	x := g.r.IntN(100)
	switch {
	case x < 70:
		env.Items = []envelope.Item{{Type: "session", Payload: g.sessionUpdate(c, release, environment)}}
	case x < 80:
		n := 2 + g.r.IntN(4)
		env.Items = make([]envelope.Item, n)
		for j := range env.Items {
			env.Items[j] = envelope.Item{Type: "session", Payload: g.sessionUpdate(c, release, environment)}
		}
	default:
		env.Items = []envelope.Item{{Type: "sessions", Payload: g.sessionAggregates(c, release, environment)}}
	}
	return len(env.Items)
}

// sessionUpdate writes one update at a random stage of a session's life:
// init, an ok update, or the terminal exited/errored/crashed/abnormal one.
func (g *gen) sessionUpdate(c *ctx, release, environment string) []byte {
	startedMS := g.o.Now.UnixMilli() - 60_000 - g.r.Int64N(119*60_000)
	nowMS := g.o.Now.UnixMilli()
	w := g.payload()
	w.open()
	w.kstr("sid", g.uuid())
	w.kstr("did", g.itoa(1+g.r.IntN(5000000)))
	stage := g.r.IntN(100)
	var status string
	var errors int64
	var tsMS int64
	switch {
	case stage < 40: // init
		status, tsMS = "ok", startedMS
		w.kbool("init", true)
		w.kint("seq", 0)
	case stage < 55: // an update while running
		status, errors = "ok", int64(g.r.IntN(3))
		tsMS = startedMS + g.r.Int64N(nowMS-startedMS)
		w.kint("seq", int64(1+g.r.IntN(6)))
	default: // terminal
		tsMS = startedMS + g.r.Int64N(nowMS-startedMS)
		switch t := g.r.IntN(100); {
		case t < 75:
			status = "exited"
		case t < 88:
			status, errors = "errored", int64(1+g.r.IntN(5))
		case t < 97:
			status, errors = "crashed", 1
		default:
			status = "abnormal"
			w.kstr("abnormal_mechanism", "anr_foreground")
		}
		w.kint("seq", int64(2+g.r.IntN(8)))
		w.kfloat("duration", float64(tsMS-startedMS)/1000, 3)
	}
	w.kstr("started", rfc3339(float64(startedMS)/1000))
	w.kstr("timestamp", rfc3339(float64(tsMS)/1000))
	w.kstr("status", status)
	w.kint("errors", errors)
	w.obj("attrs")
	w.kstr("release", release)
	w.kstr("environment", environment)
	w.kstr("ip_address", "{{auto}}")
	w.kstr("user_agent", c.agent.UA)
	w.close()
	w.close()
	return g.takeCopy()
}

// sessionAggregates writes request-mode buckets, one per minute, ending at
// the minute before Now.
func (g *gen) sessionAggregates(c *ctx, release, environment string) []byte {
	n := 1 + g.r.IntN(30)
	first := (g.o.Now.Unix()/60 - int64(n)) * 60
	w := g.payload()
	w.open()
	w.arr("aggregates")
	for j := 0; j < n; j++ {
		w.open()
		w.kstr("started", rfc3339(float64(first+int64(j)*60)))
		if g.r.IntN(4) == 0 {
			w.kstr("did", g.itoa(1+g.r.IntN(5000000)))
		}
		w.kint("exited", int64(g.r.IntN(400)))
		if g.r.IntN(3) == 0 {
			w.kint("errored", int64(g.r.IntN(20)))
		}
		if g.r.IntN(10) == 0 {
			w.kint("crashed", int64(1+g.r.IntN(3)))
		}
		w.close()
	}
	w.closeArr()
	w.obj("attrs")
	w.kstr("release", release)
	w.kstr("environment", environment)
	w.kstr("user_agent", c.agent.UA)
	w.close()
	w.close()
	return g.take()
}
