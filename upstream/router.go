package upstream

import (
	"net/http"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
)

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
