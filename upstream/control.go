package upstream

import (
	"net/http"
	"net/netip"
	"strings"
)

// controlRefused refuses a request for /control or /stats/reset from a
// client outside ControlFrom (403, control_forbidden): those routes change
// what every client gets and are not authenticated.
func (s *Server) controlRefused(req *http.Request) *httpError {
	nets := s.cfg.ControlFrom
	ap, err := netip.ParseAddrPort(req.RemoteAddr)
	if err == nil {
		// Prefixes hold no zone and match no IPv4-mapped IPv6 address.
		ip := ap.Addr().Unmap().WithZone("")
		for _, p := range nets {
			if p.Contains(ip) {
				return nil
			}
		}
	}
	return newError(http.StatusForbidden, "control_forbidden",
		"/control and /stats/reset answer only clients in "+prefixList(nets)+" (fake-upstream --control-from)",
		"client "+req.RemoteAddr)
}

func prefixList(nets []netip.Prefix) string {
	s := make([]string, len(nets))
	for i, p := range nets {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
