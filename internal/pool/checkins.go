package pool

import (
	"github.com/relayload/relayload/envelope"
)

// Cron check-ins come in pairs of consecutive entries sharing check_in_id:
// in_progress, then ok (80%) or error with a duration. 30% of monitors send
// a monitor_config (crontab or interval schedule) with both updates. A pool
// whose last slot cannot hold a pair ends with a lone final check-in.

var monitorJobs = []string{"invoice-export", "cleanup-sessions", "sync-inventory", "send-digest", "rebuild-search-index", "expire-carts", "refresh-rates", "backup-db", "rotate-logs", "nightly-report", "reconcile-payments", "warm-cache"}

func (g *gen) checkInEnvelope(c *ctx, s slot, env *envelope.Envelope) int {
	// Everything drawn before the role split comes from the pair's shared stream.
	id := g.uuid()
	slug := g.pickS([]string{"nightly-", "hourly-", "", "daily-"}) + g.pickS(monitorJobs)
	if g.r.IntN(2) == 0 {
		slug += "-" + g.itoa(g.r.IntN(40))
	}
	release, environment := g.release(c), g.environment()
	traceID := g.uuid()
	withConfig := g.r.IntN(100) < 30
	crontab := g.r.IntN(2) == 0
	minute, hour := g.r.IntN(60), g.r.IntN(24)
	interval := 1 + g.r.IntN(30)
	margin, runtime := 1+g.r.IntN(10), 5+g.r.IntN(60)
	tz := g.pickS(timezones)
	failed := g.r.IntN(100) < 20
	duration := 0.2 + g.r.Float64()*float64(runtime)*50
	sdk := platforms[2+g.r.IntN(3)] // python, java, go workers

	w := g.payload()
	w.open()
	w.kstr("check_in_id", id)
	w.kstr("monitor_slug", slug)
	switch {
	case s.role == 1:
		w.kstr("status", "in_progress")
	case failed:
		w.kstr("status", "error")
	default:
		w.kstr("status", "ok")
	}
	if s.role != 1 {
		w.kfloat("duration", duration, 3)
	}
	w.kstr("release", release)
	w.kstr("environment", environment)
	if withConfig {
		w.obj("monitor_config")
		w.obj("schedule")
		if crontab {
			w.kstr("type", "crontab")
			w.kstrs("value", g.itoa(minute), " ", g.itoa(hour), " * * *")
		} else {
			w.kstr("type", "interval")
			w.kint("value", int64(interval))
			w.kstr("unit", "minute")
		}
		w.close()
		w.kint("checkin_margin", int64(margin))
		w.kint("max_runtime", int64(runtime))
		w.kint("failure_issue_threshold", 2)
		w.kint("recovery_threshold", 1)
		w.kstr("timezone", tz)
		w.close()
	}
	w.obj("contexts")
	w.obj("trace")
	w.kstr("trace_id", traceID)
	w.close()
	w.close()
	w.close()
	env.Header = g.header("", sdk.sdk, sdk.sdkVersion, nil)
	env.Items = []envelope.Item{{Type: "check_in", Payload: g.take()}}
	return 1
}
