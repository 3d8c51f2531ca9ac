package upstream

import (
	"net/http"
	"sync"

	"github.com/go-chi/chi/v5"
)

// routeTable is the fake upstream's routing table, in chi patterns. Every
// route matches every method: the handlers check the method themselves and
// answer 405 (counted under the route, after faults, so an outage answers a
// GET on the envelope route like a POST). The harness's routes take an
// optional trailing slash; Relay's are exact. {projectID} must be 1–18
// digits, else the request is unknown (routeNotFound).
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

// router classifies request paths with a chi routing tree.
//
// chi's radix tree does the matching, but chi.Mux does not serve the
// requests: Mux.ServeHTTP stores its routing context in a copy of the request
// (r.WithContext(context.WithValue(…)) and r.SetPathValue), three to four
// allocations per request, and the envelope sink allocates nothing per
// request (TestSinkHandlerAllocs). Mux.Find with a pooled chi.Context walks
// the same tree without allocating; serveHTTP then does what chi middleware
// would (recovery, counting, faults) in one place, because recovery must
// answer in Relay's JSON error form and count the panic under the route, and
// the body limits are enforced while reading (readBody), with 413 answers.
type router struct {
	mux   *chi.Mux
	route map[string]int // pattern → route
	ctxs  sync.Pool      // *chi.Context
}

// matched is the handler chi holds for every pattern; only the pattern that
// Find returns is used.
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
	// Any method chi knows finds the same pattern (see routeTable); methods
	// it does not know (PROPFIND) must still reach the handler for a 405.
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

func isDigits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
