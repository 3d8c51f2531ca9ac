package standinrelay

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/envelope"
)

// protocolVersion is the highest sentry_version Relay accepts.
const protocolVersion = 7

// apiError is Relay's error body.
type apiError struct {
	Detail string   `json:"detail"`
	Causes []string `json:"causes,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// reject answers an error, counts it and returns the status for metrics.
func (r *Relay) reject(w http.ResponseWriter, status int, detail string, cause error) int {
	e := apiError{Detail: detail}
	if cause != nil {
		e.Causes = []string{cause.Error()}
	}
	r.stats.countStatus(status)
	r.metrics.Count("event.rejected", 1, "status_code:"+strconv.Itoa(status))
	writeJSON(w, status, e)
	return status
}

// authInfo is what an SDK's auth says.
type authInfo struct {
	key     string
	client  string
	version string
}

// authError carries the HTTP status Relay uses for a bad auth.
type authError struct {
	status int
	detail string
}

func (e *authError) Error() string { return e.detail }

var (
	errMissingAuth  = &authError{http.StatusUnauthorized, "missing authorization information"}
	errMultipleAuth = &authError{http.StatusUnauthorized, "multiple authorization payloads detected"}
	errBadAuth      = &authError{http.StatusUnauthorized, "bad x-sentry-auth header"}
	errBadKey       = &authError{http.StatusBadRequest, "bad sentry DSN public key"}
)

// parseSentryAuth parses "Sentry sentry_key=…, sentry_version=7, …".
func parseSentryAuth(v string) (authInfo, error) {
	prefix, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(prefix, "sentry") {
		return authInfo{}, errBadAuth
	}
	var a authInfo
	for pair := range strings.SplitSeq(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			continue
		}
		k = strings.TrimPrefix(strings.TrimSpace(k), "sentry_")
		val = strings.TrimSpace(val)
		switch k {
		case "key":
			a.key = val
		case "client":
			a.client = val
		case "version":
			a.version = val
		}
	}
	if a.key == "" {
		return authInfo{}, errBadAuth
	}
	return a, nil
}

// requestAuth finds the single auth source of a request (docs/protocol.md,
// What Relay checks in what blast sends). found is
// false when there is none (the envelope header's dsn may then serve).
func requestAuth(req *http.Request) (a authInfo, found bool, err error) {
	var sources []authInfo
	var firstErr error
	if h := req.Header.Get("X-Sentry-Auth"); h != "" {
		ai, err := parseSentryAuth(h)
		sources = append(sources, ai)
		firstErr = cmpErr(firstErr, err)
	}
	if h := req.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
		switch {
		case strings.EqualFold(scheme, "sentry"):
			ai, err := parseSentryAuth(h)
			sources = append(sources, ai)
			firstErr = cmpErr(firstErr, err)
		case strings.EqualFold(scheme, "basic"):
			dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
			key, _, _ := strings.Cut(string(dec), ":")
			if err != nil || key == "" {
				firstErr = cmpErr(firstErr, errBadAuth)
			}
			sources = append(sources, authInfo{key: key})
		}
	}
	q := req.URL.Query()
	if k := q.Get("sentry_key"); k != "" {
		sources = append(sources, authInfo{key: k, client: q.Get("sentry_client"), version: q.Get("sentry_version")})
	}
	switch {
	case len(sources) > 1:
		return authInfo{}, false, errMultipleAuth
	case firstErr != nil:
		return authInfo{}, false, firstErr
	case len(sources) == 0:
		return authInfo{}, false, nil
	}
	return sources[0], true, nil
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// validKey checks a project key like Relay's ProjectKey::parse: 1–32
// characters; a ".no-cache" suffix is stripped.
func validKey(k string) (string, bool) {
	k = strings.TrimSuffix(k, ".no-cache")
	if k == "" || len(k) > 32 {
		return "", false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return "", false
		}
	}
	return k, true
}

// parseDSN returns key and project id of "scheme://key[:secret]@host/[path/]id".
func parseDSN(dsn string) (key string, projectID int64, err error) {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil || u.Host == "" {
		return "", 0, fmt.Errorf("bad dsn %q", dsn)
	}
	p := strings.TrimSuffix(u.Path, "/")
	id, err := strconv.ParseInt(p[strings.LastIndexByte(p, '/')+1:], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("dsn %q has no project id", dsn)
	}
	return u.User.Username(), id, nil
}

// handleEnvelope is POST /api/{project_id}/envelope/.
func (r *Relay) handleEnvelope(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	status := r.ingest(w, req, start)
	r.metrics.Timing("requests.duration", time.Since(start), "route:envelope", "status_code:"+strconv.Itoa(status))
}

func (r *Relay) ingest(w http.ResponseWriter, req *http.Request, start time.Time) int {
	r.stats.requests.Add(1)
	projectID, err := strconv.ParseInt(req.PathValue("project_id"), 10, 64)
	if err != nil || projectID <= 0 {
		return r.reject(w, http.StatusBadRequest, "bad project path parameter", nil)
	}
	if r.stopping.Load() {
		return r.reject(w, http.StatusServiceUnavailable, "the service is shutting down", nil)
	}
	auth, haveAuth, err := requestAuth(req)
	if err != nil {
		var ae *authError
		errors.As(err, &ae)
		return r.reject(w, ae.status, ae.detail, nil)
	}
	if haveAuth && auth.version != "" {
		if v, err := strconv.Atoi(auth.version); err != nil || v > protocolVersion || v < 0 {
			return r.reject(w, http.StatusBadRequest, "unsupported protocol version ("+auth.version+")", nil)
		}
	}

	// Body: bounded read, then Content-Encoding.
	raw, err := io.ReadAll(io.LimitReader(req.Body, r.cfg.MaxEnvelopeSize+1))
	if err != nil {
		return r.reject(w, http.StatusBadRequest, "invalid request body", err)
	}
	if int64(len(raw)) > r.cfg.MaxEnvelopeSize {
		return r.reject(w, http.StatusRequestEntityTooLarge, "envelope exceeded size limits", nil)
	}
	if len(raw) == 0 {
		return r.reject(w, http.StatusBadRequest, "empty request body", nil)
	}
	body := raw
	if ce := strings.TrimSpace(req.Header.Get("Content-Encoding")); ce != "" && !strings.EqualFold(ce, "utf-8") {
		enc, err := compression.ParseEncoding(ce)
		if err != nil {
			return r.reject(w, http.StatusBadRequest, "invalid request body", err)
		}
		if enc != compression.Identity {
			body, err = r.decoder.Decode(enc, raw, nil)
			switch {
			case errors.Is(err, compression.ErrTooLarge):
				return r.reject(w, http.StatusRequestEntityTooLarge, "envelope exceeded size limits", err)
			case err != nil:
				return r.reject(w, http.StatusBadRequest, "invalid request body", err)
			}
		}
	}
	env, err := envelope.Parse(body)
	if err != nil {
		return r.reject(w, http.StatusBadRequest, "invalid event envelope", err)
	}

	// Auth from the envelope header when the request had none; otherwise
	// the header's dsn must agree with the request.
	if env.DSN != "" {
		dkey, did, err := parseDSN(env.DSN)
		if err != nil {
			if !haveAuth {
				return r.reject(w, http.StatusUnauthorized, "bad envelope authentication header", err)
			}
			return r.reject(w, http.StatusBadRequest, "invalid event envelope", err)
		}
		if !haveAuth {
			auth, haveAuth = authInfo{key: dkey}, true
		} else if strings.TrimSuffix(auth.key, ".no-cache") != dkey {
			return r.reject(w, http.StatusBadRequest, "invalid event envelope", errors.New("public key header mismatch between envelope and request"))
		}
		if did != projectID {
			return r.reject(w, http.StatusBadRequest, "invalid event envelope", errors.New("project id header mismatch between envelope and request"))
		}
	}
	if !haveAuth {
		return r.reject(w, http.StatusUnauthorized, errMissingAuth.detail, nil)
	}
	key, ok := validKey(auth.key)
	if !ok {
		return r.reject(w, errBadKey.status, errBadKey.detail, nil)
	}

	eventID := ""
	if env.EventID != "" {
		eventID = normalizeEventID(env.EventID)
	}
	if len(env.Items) == 0 {
		r.stats.countStatus(http.StatusOK)
		return r.accept(w, eventID)
	}

	// Project checks with what the cache knows now (the fetch is queued if
	// the key is new or stale).
	now := time.Now()
	status, st, ok := r.projects.lookup(key, now)
	if !ok {
		return r.reject(w, http.StatusServiceUnavailable, "the service is overloaded", errors.New("project cache full"))
	}
	var limited []rateLimit
	if status == projectDisabled {
		return r.reject(w, http.StatusForbidden, "event submission rejected with_reason: ProjectState", nil)
	}
	if status == projectEnabled {
		if st.ProjectID != projectID {
			return r.reject(w, http.StatusForbidden, "event submission rejected with_reason: ProjectId", nil)
		}
		sc := scoping{orgID: st.OrganizationID, projectID: st.ProjectID, key: key}
		kept := env.Items[:0]
		for i := range env.Items {
			it := &env.Items[i]
			if cat, ok := rateLimitCategory(it.Type); ok {
				if l, hit := r.limits.check(sc, cat, now); hit {
					reason := l.reason
					r.emitItemOutcome(sc, it, outcomeRateLimited, reason, 0)
					r.stats.itemsRateLimited.Add(1)
					limited = appendLimit(limited, l)
					continue
				}
			}
			kept = append(kept, *it)
		}
		env.Items = kept
	}
	if typ, ok := r.sizeOffender(env); !ok {
		if status == projectEnabled {
			sc := scoping{orgID: st.OrganizationID, projectID: st.ProjectID, key: key}
			for i := range env.Items {
				r.emitItemOutcome(sc, &env.Items[i], outcomeInvalid, "too_large:"+typ, 0)
			}
		}
		return r.reject(w, http.StatusRequestEntityTooLarge, "envelope exceeded size limits for type '"+typ+"' (https://develop.sentry.dev/sdk/envelopes/#size-limits)", nil)
	}
	if len(env.Items) > 0 {
		j := &job{key: key, projectID: projectID, env: env, size: len(body), meta: requestMeta{
			client: auth.client, version: auth.version, userAgent: req.UserAgent(),
			forwardedFor: forwardedFor(req), origin: req.Header.Get("Origin"), received: start,
		}}
		if err := r.buffer.push(j, r.isReady); err != nil {
			return r.reject(w, http.StatusServiceUnavailable, "failed to queue envelope", err)
		}
		r.stats.queued.Add(1)
	}
	if len(limited) > 0 {
		hdr, retry := formatRateLimits(limited, now)
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
		w.Header().Set("X-Sentry-Rate-Limits", hdr)
		return r.reject(w, http.StatusTooManyRequests, "Sentry dropped data due to a quota or internal rate limit being reached. This will not affect your application. See https://docs.sentry.io/product/accounts/quotas/ for more information.", nil)
	}
	r.stats.countStatus(http.StatusOK)
	return r.accept(w, eventID)
}

// sizeOffender checks the per-item limits (Relay's
// check_envelope_size_limits) and names the first offending item type.
func (r *Relay) sizeOffender(env *envelope.Envelope) (string, bool) {
	sessions := 0
	for i := range env.Items {
		it := &env.Items[i]
		n := int64(len(it.Payload))
		var limit int64
		switch it.Type {
		case "event", "transaction":
			limit = r.cfg.MaxEventSize
		case "check_in":
			limit = r.cfg.MaxCheckInSize
		case "attachment":
			limit = r.cfg.MaxAttachmentSize
		case "log", "otel_log":
			limit = min(r.cfg.MaxContainerSize, r.cfg.MaxLogSize*int64(max(1, it.ItemCount)))
		case "session", "sessions":
			sessions++
			if sessions > r.cfg.MaxSessionCount {
				return it.Type, false
			}
		}
		if limit > 0 && n > limit {
			return it.Type, false
		}
	}
	return "", true
}

func appendLimit(ls []rateLimit, l rateLimit) []rateLimit {
	for _, x := range ls {
		if x.scope == l.scope && x.reason == l.reason && slices.Equal(x.categories, l.categories) {
			return ls
		}
	}
	return append(ls, l)
}

func (r *Relay) accept(w http.ResponseWriter, eventID string) int {
	r.metrics.Count("event.accepted", 1)
	if eventID != "" {
		writeJSON(w, http.StatusOK, map[string]string{"id": eventID})
	} else {
		writeJSON(w, http.StatusOK, struct{}{})
	}
	return http.StatusOK
}

// forwardedFor is X-Forwarded-For with the peer address appended, as Relay
// records it.
func forwardedFor(req *http.Request) string {
	peer, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		peer = req.RemoteAddr
	}
	if xff := strings.TrimSpace(req.Header.Get("X-Forwarded-For")); xff != "" {
		return xff + ", " + peer
	}
	return peer
}

// handleReady is GET /api/relay/healthcheck/ready/.
func (r *Relay) handleReady(w http.ResponseWriter, _ *http.Request) {
	if r.Ready() {
		writeJSON(w, http.StatusOK, map[string]bool{"is_healthy": true})
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]bool{"is_healthy": false})
}

// handleLive is GET /api/relay/healthcheck/live/.
func (r *Relay) handleLive(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"is_healthy": true})
}
