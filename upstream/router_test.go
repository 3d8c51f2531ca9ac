package upstream

import (
	"net/http/httptest"
	"testing"
)

// TestRouteLookup pins what each path routes to.
func TestRouteLookup(t *testing.T) {
	rt := newRouter()
	for _, tc := range []struct {
		path, route, id string
	}{
		{"/api/0/relays/register/challenge/", "register_challenge", ""},
		{"/api/0/relays/register/response/", "register_response", ""},
		{"/api/0/relays/projectconfigs/", "projectconfigs", ""},
		{"/api/0/relays/publickeys/", "publickeys", ""},
		{"/api/0/relays/metrics/", "metrics", ""},
		{"/api/0/relays/outcomes/", "outcomes", ""},
		{"/api/0/relays/live/", "live", ""},
		{"/api/42/envelope/", "envelope", "42"},
		{"/api/0/envelope/", "envelope", "0"},
		{"/api/123456789012345678/envelope/", "envelope", "123456789012345678"},
		{"/api/7/store/", "store", "7"},
		{"/stats", "stats", ""},
		{"/stats/", "stats", ""},
		{"/stats/reset", "stats_reset", ""},
		{"/stats/reset/", "stats_reset", ""},
		{"/projects", "projects", ""},
		{"/projects/", "projects", ""},
		{"/control", "control", ""},
		{"/control/", "control", ""},
		// Unknown: Relay's routes are exact, ids are 1–18 digits.
		{"/api/1234567890123456789/envelope/", "not_found", ""},
		{"/api/x1/envelope/", "not_found", ""},
		{"/api/-1/envelope/", "not_found", ""},
		{"/api//envelope/", "not_found", ""},
		{"/api/1/2/envelope/", "not_found", ""},
		{"/api/1/envelope", "not_found", ""},
		{"/api/1/envelope/x", "not_found", ""},
		{"/api/0/relays/envelope/", "not_found", ""},
		{"/api/0/relays/live", "not_found", ""},
		{"/api/0/relays/live//", "not_found", ""},
		{"/api/0/relays/projectconfigs", "not_found", ""},
		{"/API/0/relays/live/", "not_found", ""},
		{"/api/0/nothing/", "not_found", ""},
		{"/stats//", "not_found", ""},
		{"/statsx", "not_found", ""},
		{"/stats/reset/x", "not_found", ""},
		{"/", "not_found", ""},
		{"", "not_found", ""},
		{"*", "not_found", ""},
	} {
		r, id := rt.lookup(tc.path)
		if routeNames[r] != tc.route || id != tc.id {
			t.Errorf("%q: route %s id %q, want %s %q", tc.path, routeNames[r], id, tc.route, tc.id)
		}
	}
}

// TestUnknownMethod: a method chi does not know still reaches the route's
// handler, which answers 405; on an unknown path it is a 404.
func TestUnknownMethod(t *testing.T) {
	f := newFixture(t, nil)
	h := f.srv.Handler()
	for path, want := range map[string]int{"/stats": 405, "/api/1/envelope/": 405, "/nowhere": 404} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("PROPFIND", path, nil))
		if w.Code != want {
			t.Errorf("PROPFIND %s: %d, want %d: %s", path, w.Code, want, w.Body)
		}
	}
	st := f.srv.Stats()
	if st.Requests["stats"]["405"] != 1 || st.Requests["envelope"]["405"] != 1 || st.Requests["not_found"]["404"] != 1 {
		t.Errorf("requests %v", st.Requests)
	}
}

// BenchmarkRouteLookup is the router's cost per request (0 allocations).
func BenchmarkRouteLookup(b *testing.B) {
	rt := newRouter()
	for _, p := range []string{"/api/42/envelope/", "/api/0/relays/projectconfigs/", "/stats", "/api/0/nothing/"} {
		b.Run(p[1:], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				rt.lookup(p)
			}
		})
	}
}
