package upstream

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/relayload/relayload/projects"
)

// statusWriter records the answer's status and gives it its write deadline.
type statusWriter struct {
	http.ResponseWriter
	status     int
	lim        *httpLimits
	writeStart time.Time
	answer     [envelopeAnswerLen]byte // the envelope sink's answer
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.startWriteDeadline()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (hijack).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// acquire pins the current counter generation for one request, so that it
// counts entirely into one generation (ResetStats waits for it).
func (s *Server) acquire() *counters {
	for {
		c := s.stats.Load()
		c.inflight.Add(1)
		if s.stats.Load() == c {
			return c
		}
		c.inflight.Add(-1)
	}
}

// serveHTTP serves a request: it routes it, pins the counter generation,
// applies faults, calls the route's handler, answers and counts its error,
// counts the status under the route and recovers a panic (counted, 500).
func (s *Server) serveHTTP(rw http.ResponseWriter, req *http.Request) {
	r, projectID := s.routes.lookup(req.URL.Path)
	c := s.acquire()
	defer func() { c.inflight.Add(-1) }() // c changes on /stats/reset
	w := s.writers.Get().(*statusWriter)
	w.ResponseWriter, w.status, w.lim = rw, 0, &s.limits
	markServing(req)
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			c.panics.Add(1)
			if w.status == 0 {
				s.writeError(w, c, newError(http.StatusInternalServerError, "panic", "internal error", fmt.Sprint(p)))
			}
		}
		// Status 0: dropped without an answer (reset and outage faults).
		if status := w.status; status >= 0 && status < 600 {
			c.requests[r][status].Add(1)
		}
		w.ResponseWriter = nil
		s.writers.Put(w)
	}()
	if s.hook != nil {
		s.hook(req)
	}
	// Faults apply to Relay's routes, not to /stats, /projects or /control.
	if (r <= routeLive || r == routeNotFound) && s.applyFaults(w, req, r, c) {
		return
	}
	var e *httpError
	switch r {
	case routeEnvelope:
		e = s.handleEnvelope(w, req, c, projectID)
	case routeChallenge:
		c.challenges.Add(1)
		e = c.registration(s.challenge(w, req, c))
	case routeResponse:
		c.responses.Add(1)
		e = c.registration(s.response(w, req, c))
	case routeProjectConfigs:
		e = s.handleProjectConfigs(w, req, c)
	case routePublicKeys:
		e = s.handlePublicKeys(w, req, c)
	case routeMetrics:
		e = s.outcomeQuery(w, req, c, srcMetricsEndpoint, readMetricsBatch)
	case routeOutcomes:
		e = s.outcomeQuery(w, req, c, srcLegacy, readLegacyBatch)
	case routeLive:
		writeRawJSON(w, http.StatusOK, []byte(`{"is_healthy":true}`))
	case routeStats:
		e = s.handleStats(w, req)
	case routeStatsReset:
		if e = s.controlRefused(req); e == nil && req.Method != http.MethodPost {
			e = methodNotAllowed(req)
		}
		if e == nil {
			// Release the old generation (ResetStats waits for it), count
			// the reset request itself in the new one.
			c.inflight.Add(-1)
			st := s.ResetStats()
			c = s.acquire()
			writeJSON(w, http.StatusOK, st)
		}
	case routeProjects:
		e = s.handleProjects(w, req)
	case routeControl:
		if e = s.controlRefused(req); e == nil {
			e = s.handleControl(w, req, c)
		}
	case routeStore:
		e = newError(http.StatusNotFound, "store_endpoint", "the legacy store endpoint is not implemented; send envelopes to /api/<project_id>/envelope/")
	default:
		e = newError(http.StatusNotFound, "unknown_route", "unknown route", req.Method+" "+req.URL.Path)
	}
	if e != nil {
		s.writeError(w, c, e)
	}
}

func methodNotAllowed(req *http.Request) *httpError {
	return newError(http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed", req.Method+" "+req.URL.Path)
}

// handleStats serves GET /stats (JSON or Prometheus text).
func (s *Server) handleStats(w http.ResponseWriter, req *http.Request) *httpError {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return methodNotAllowed(req)
	}
	st := s.Stats()
	st.InFlight-- // not this request
	switch f := req.URL.Query().Get("format"); f {
	case "", "json":
		writeJSON(w, http.StatusOK, st)
	case "prometheus", "prom", "text":
		b := st.AppendPrometheus(nil)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
	default:
		return newError(http.StatusBadRequest, "bad_stats_format", "unknown format", "want json or prometheus, got "+f)
	}
	return nil
}

// ProjectDSN is one entry of GET /projects.
type ProjectDSN struct {
	projects.Project
	DSN string `json:"dsn"`
}

// projectsChunk is how much of the streamed /projects list is encoded
// before it is written: an answer that is not read holds this much.
const projectsChunk = 32 << 10

// handleProjects serves GET /projects: every project with its DSN for the
// origin, streamed as one JSON array under a write deadline that grows with
// what was written (HTTPWriteTimeout + size at HTTPMinWriteRate).
func (s *Server) handleProjects(w *statusWriter, req *http.Request) *httpError {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return methodNotAllowed(req)
	}
	origin := cmp.Or(req.URL.Query().Get("origin"), "http://"+req.Host)
	// The origin alone decides whether a DSN can be made.
	if _, err := s.cfg.Projects[0].DSN(origin); err != nil {
		return newError(http.StatusBadRequest, "bad_origin", "bad origin", err.Error())
	}
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	buf := make([]byte, 0, projectsChunk+1024)
	var written int64
	sep := byte('[')
	for i, p := range s.cfg.Projects {
		buf = append(buf, sep)
		sep = ','
		dsn, _ := p.DSN(origin)
		b, _ := json.Marshal(ProjectDSN{Project: p, DSN: dsn}) // strings and integers: it cannot fail
		buf = append(buf, b...)
		if i == len(s.cfg.Projects)-1 {
			buf = append(buf, ']')
		} else if len(buf) < projectsChunk {
			continue
		}
		written += int64(len(buf))
		w.extendWriteDeadline(written)
		if _, err := w.Write(buf); err != nil {
			return nil // the client did not read in time or has gone
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return nil
		}
		buf = buf[:0]
	}
	return nil
}

// routeTable is the routing table, in chi patterns. A route matches every
// method, so a wrong one is answered 405 by its handler, after faults.
// Relay's routes are exact; {projectID} must be 1–18 digits.
var routeTable = [...]struct {
	pattern string
	route   int
}{
	{"/api/0/relays/register/challenge/", routeChallenge},
	{"/api/0/relays/register/response/", routeResponse},
	{"/api/0/relays/projectconfigs/", routeProjectConfigs},
	{"/api/0/relays/publickeys/", routePublicKeys},
	{"/api/0/relays/metrics/", routeMetrics},
	{"/api/0/relays/outcomes/", routeOutcomes},
	{"/api/0/relays/live/", routeLive},
	{"/api/{projectID}/envelope/", routeEnvelope},
	{"/api/{projectID}/store/", routeStore},
	{"/stats", routeStats},
	{"/stats/", routeStats},
	{"/stats/reset", routeStatsReset},
	{"/stats/reset/", routeStatsReset},
	{"/projects", routeProjects},
	{"/projects/", routeProjects},
	{"/control", routeControl},
	{"/control/", routeControl},
}

// router classifies request paths with chi's routing tree, through
// Mux.Find and a pooled chi.Context: Mux.ServeHTTP would allocate a request
// copy per request (TestSinkHandlerAllocs, BenchmarkRouteLookup).
type router struct {
	mux   *chi.Mux
	route map[string]int // pattern → route
	ctxs  sync.Pool      // *chi.Context
}

// matched is the handler chi holds for every pattern (never called).
var matched = http.NotFoundHandler()

func newRouter() *router {
	rt := &router{mux: chi.NewMux(), route: make(map[string]int, len(routeTable))}
	for _, e := range routeTable {
		rt.mux.Handle(e.pattern, matched)
		rt.route[e.pattern] = e.route
	}
	rt.ctxs.New = func() any { return chi.NewRouteContext() }
	return rt
}

// lookup returns the route of a request path; projectID is set for the
// envelope and store routes.
func (rt *router) lookup(path string) (r int, projectID string) {
	rctx := rt.ctxs.Get().(*chi.Context)
	rctx.Reset()
	// Every pattern takes every method; Find with GET also routes methods
	// chi does not know (PROPFIND), for a 405.
	r, ok := rt.route[rt.mux.Find(rctx, http.MethodGet, path)]
	if !ok {
		r = routeNotFound
	}
	if r == routeEnvelope || r == routeStore {
		projectID = rctx.URLParam("projectID")
		if !isDigits(projectID) {
			r, projectID = routeNotFound, ""
		}
	}
	rt.ctxs.Put(rctx)
	return r, projectID
}

// isDigits reports whether s is 1–18 decimal digits: a project id that fits
// an int64.
func isDigits(s string) bool {
	return len(s) > 0 && len(s) <= 18 && strings.TrimLeft(s, "0123456789") == ""
}

// apiError is Relay's error body (relay-server ApiErrorResponse): Relay reads
// "detail" and "causes" for logging and honours "relay":"stop" on a 403.
type apiError struct {
	Detail string   `json:"detail"`
	Causes []string `json:"causes"`
	Relay  string   `json:"relay,omitempty"`
}

// httpError is an error answer: status, counted reason, and body.
type httpError struct {
	status int
	reason string // key in Stats.Errors
	body   apiError
}

func newError(status int, reason, detail string, causes ...string) *httpError {
	if causes == nil {
		causes = []string{}
	}
	return &httpError{status: status, reason: reason, body: apiError{Detail: detail, Causes: causes}}
}

func (e *httpError) Error() string { return e.reason + ": " + e.body.Detail }

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"detail":"internal error encoding the response","causes":[]}`)
	}
	writeRawJSON(w, status, b)
}

func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = contentLength(len(b))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

var jsonContentType = []string{"application/json"}

// smallLengths are shared Content-Length values, so that small answers
// allocate no header slice.
var smallLengths = func() (t [256][]string) {
	for i := range t {
		t[i] = []string{strconv.Itoa(i)}
	}
	return t
}()

func contentLength(n int) []string {
	if n < len(smallLengths) {
		return smallLengths[n]
	}
	return []string{strconv.Itoa(n)}
}

// writeError answers with e and counts it in c. An error of status 0 (the
// client is gone) is counted only: there is nobody to answer.
func (s *Server) writeError(w http.ResponseWriter, c *counters, e *httpError) {
	c.errors.Add(e.reason)
	if e.status == 0 {
		return
	}
	writeJSON(w, e.status, e.body)
}
