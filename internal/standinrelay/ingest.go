package standinrelay

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/compression"
)

// maxEnvelopeSize bounds a request body, decoded (Relay's
// limits.max_envelope_size is 100 MiB).
const maxEnvelopeSize = 100 << 20

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func reject(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]string{"detail": detail})
}

// sentryKey is sentry_key of an X-Sentry-Auth header
// ("Sentry sentry_key=…, sentry_version=7, …"); "" if there is none.
func sentryKey(h string) string {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "sentry") {
		return ""
	}
	for pair := range strings.SplitSeq(rest, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(pair), "="); ok && strings.TrimSpace(k) == "sentry_key" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// neverForwarded reports whether Relay 26.4.0 accepts items of type t but
// forwards them in no envelope: client reports become outcomes, trace
// metrics are dropped without one. An envelope holding only these is
// answered 200 and forwards nothing; in one with other items they are left
// out.
func neverForwarded(t string) bool { return t == "client_report" || t == "trace_metric" }

// handleEnvelope is POST /api/{project_id}/envelope/, authenticated by
// X-Sentry-Auth. Envelopes are accepted into the buffer and answered
// before they are processed, as Relay does.
func (r *Relay) handleEnvelope(w http.ResponseWriter, req *http.Request) {
	if _, err := strconv.ParseUint(req.PathValue("project_id"), 10, 64); err != nil {
		reject(w, http.StatusBadRequest, "bad project path parameter")
		return
	}
	key := sentryKey(req.Header.Get("X-Sentry-Auth"))
	if key == "" {
		reject(w, http.StatusUnauthorized, "missing authorization information")
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxEnvelopeSize+1))
	if err == nil && len(body) > maxEnvelopeSize {
		err = compression.ErrTooLarge
	}
	if ce := req.Header.Get("Content-Encoding"); err == nil && ce != "" {
		var enc compression.Encoding
		if enc, err = compression.ParseEncoding(ce); err == nil && enc != compression.Identity {
			body, err = r.decoder.Decode(enc, body, nil)
		}
	}
	switch {
	case errors.Is(err, compression.ErrTooLarge):
		reject(w, http.StatusRequestEntityTooLarge, "envelope exceeded size limits")
		return
	case err != nil:
		reject(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	env, err := envelope.Parse(body)
	if err != nil {
		reject(w, http.StatusBadRequest, "invalid event envelope: "+err.Error())
		return
	}
	if r.projects.lookup(key).status == projectDisabled {
		reject(w, http.StatusForbidden, "event submission rejected with_reason: ProjectState")
		return
	}
	// Items under a cached rate limit are dropped; if any were, the answer
	// is 429 and the rest is still queued (Relay's check_envelope and
	// check_rate_limits, relay-server/src/endpoints/common.rs).
	now := time.Now()
	var limitedUntil time.Time
	kept := env.Items[:0]
	for _, it := range env.Items {
		if neverForwarded(it.Type) {
			continue
		}
		if until, limited := r.limits.check(key, it.Type, now); limited {
			if until.After(limitedUntil) {
				limitedUntil = until
			}
			continue
		}
		kept = append(kept, it)
	}
	if len(kept) < len(env.Items) {
		env.Items = kept
		body = env.Marshal()
	}
	if len(kept) > 0 {
		if err := r.buffer.push(&job{key: key, body: body}, r.isReady); err != nil {
			reject(w, http.StatusServiceUnavailable, "failed to queue envelope: "+err.Error())
			return
		}
	}
	if !limitedUntil.IsZero() {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(limitedUntil.Sub(now).Seconds()+0.999), 10))
		reject(w, http.StatusTooManyRequests, "Sentry dropped data due to a quota or internal rate limit being reached.")
		return
	}
	if env.EventID != "" {
		writeJSON(w, http.StatusOK, map[string]string{"id": strings.ReplaceAll(env.EventID, "-", "")})
	} else {
		writeJSON(w, http.StatusOK, struct{}{})
	}
}

// isReady reports whether key's envelopes can be processed: the global
// config and the key's project config have arrived.
func (r *Relay) isReady(key string) bool {
	return r.globalReady.Load() && r.projects.get(key).status == projectEnabled
}

// handleReady is GET /api/relay/healthcheck/ready/: ready once registered
// (Relay's auth probe, relay-server/src/services/health_check.rs).
func (r *Relay) handleReady(w http.ResponseWriter, _ *http.Request) {
	if r.registered.Load() {
		writeJSON(w, http.StatusOK, map[string]bool{"is_healthy": true})
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]bool{"is_healthy": false})
}
