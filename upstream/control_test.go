package upstream

import (
	"net/netip"
	"testing"
)

// TestControlFrom: /control and /stats/reset answer the configured
// networks only; loopback is the default; a refusal is 403 {"detail"},
// counted, and /stats itself stays open. Only loopback clients are used: the
// refusal is tested by leaving 127.0.0.1 out of the allowed set.
func TestControlFrom(t *testing.T) {
	for _, c := range []struct {
		name string
		nets []string
		want int
	}{
		{"default loopback", nil, 200},
		{"other network", []string{"10.0.0.0/8"}, 403},
		{"other network and loopback", []string{"10.0.0.0/8", "127.0.0.1/32"}, 200},
		{"IPv6 only", []string{"::1/128"}, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(cfg *Config) {
				for _, n := range c.nets {
					cfg.ControlFrom = append(cfg.ControlFrom, netip.MustParsePrefix(n))
				}
			})
			for _, r := range []struct{ method, path, body string }{
				{"GET", "/control", ""}, {"POST", "/control", "{}"}, {"POST", "/stats/reset", ""}, {"POST", "/stats/reset/", ""},
			} {
				resp := f.do(r.method, r.path, []byte(r.body), nil)
				wantStatus(t, resp, c.want, "answer only clients in")
			}
			// An allowed /stats/reset zeroed what came before it.
			st := f.srv.Stats()
			if c.want == 403 && (st.Errors["control_forbidden"] != 4 || st.Requests["control"]["403"] != 2 || st.Requests["stats_reset"]["403"] != 2) {
				t.Errorf("errors %v, requests %v: want 4 refusals counted", st.Errors, st.Requests)
			}
			wantStatus(t, f.do("GET", "/stats", nil, nil), 200, "")
		})
	}
}
