package upstream

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseCIDRList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string // nil: an error
	}{
		{"10.0.0.0/8", []string{"10.0.0.0/8"}},
		{"10.1.2.3/8, 192.168.0.0/16", []string{"10.0.0.0/8", "192.168.0.0/16"}},
		{"127.0.0.1", []string{"127.0.0.1/32"}},
		{"::1,fd00::/8", []string{"::1/128", "fd00::/8"}},
		{"0.0.0.0/0", []string{"0.0.0.0/0"}},
		{"", nil},
		{"10.0.0.0/8,", nil},
		{"10.0.0.0/33", nil},
		{"nonsense", nil},
		{"fe80::1%eth0", nil},
		{"10.0.0.0/8/8", nil},
		{"localhost", nil},
	} {
		got, err := ParseCIDRList(c.in)
		if c.want == nil {
			if err == nil {
				t.Errorf("ParseCIDRList(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if err != nil || !slices.Equal(s, c.want) {
			t.Errorf("ParseCIDRList(%q) = %v, %v; want %v", c.in, s, err, c.want)
		}
	}
}

// FuzzParseCIDRList: any input parses to valid, masked prefixes or an
// error, never a panic; what parses prints back to a list that parses the
// same.
func FuzzParseCIDRList(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "127.0.0.1,::1", "fd00::/8, 0.0.0.0/0", "", ",", "1.2.3.4/40", "::ffff:1.2.3.4/128", "fe80::1%lo"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ps, err := ParseCIDRList(in)
		if err != nil {
			return
		}
		if len(ps) == 0 {
			t.Fatalf("%q: no error and no prefix", in)
		}
		again, err := ParseCIDRList(prefixList(ps))
		if err != nil || !slices.Equal(again, ps) {
			t.Fatalf("%q → %v → %v, %v", in, ps, again, err)
		}
		for _, p := range ps {
			if !p.IsValid() || p != p.Masked() {
				t.Fatalf("%q: prefix %v not valid and masked", in, p)
			}
		}
	})
}

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

func TestListenWarning(t *testing.T) {
	srv := newTestServer(t)
	for _, c := range []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:8000", false}, {"127.0.0.2:0", false}, {"[::1]:8000", false}, {"[::ffff:127.0.0.1]:80", false},
		{"0.0.0.0:8000", true}, {"[::]:8000", true}, {":8000", true}, {"10.1.2.3:80", true}, {"[fe80::1%eth0]:80", true},
		{"example.com:80", true},
	} {
		w := srv.ListenWarning(c.addr)
		if (w != "") != c.warn || strings.Contains(w, "\n") {
			t.Errorf("ListenWarning(%q) = %q, want a warning: %v (one line)", c.addr, w, c.warn)
		}
		if c.warn && (!strings.Contains(w, c.addr) || !strings.Contains(w, "127.0.0.0/8, ::1/128") || !strings.Contains(w, "--control-from")) {
			t.Errorf("ListenWarning(%q) = %q: want the address, the allowed networks and the flag", c.addr, w)
		}
	}
}
