package upstream

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// loopbackNets are the clients /control and /stats/reset answer by default.
func loopbackNets() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
}

// ControlFrom returns the client networks /control and /stats/reset answer
// (Config.ControlFrom, or loopback).
func (s *Server) ControlFrom() []netip.Prefix {
	return append([]netip.Prefix(nil), s.controlFrom...)
}

// controlRefused refuses a request for /control or /stats/reset from a
// client outside ControlFrom (403, control_forbidden): those routes change
// what every client gets and are not authenticated.
func (s *Server) controlRefused(req *http.Request) *httpError {
	nets := s.controlFrom
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

// ParseCIDRList parses a comma-separated list of networks in CIDR notation
// (10.0.0.0/8, fd00::/8); a bare address stands for itself alone (/32 or
// /128). Host bits are masked off. Empty elements, zones and anything else
// are errors.
func ParseCIDRList(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("CIDR list %q: empty element", list)
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%q: want a network such as 10.0.0.0/8 or an address without a zone", f)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q: want a network such as 10.0.0.0/8: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ListenWarning returns a one-line warning when addr (host:port, the
// address a listener got) is not a loopback address, "" when it is: on
// other interfaces anyone who can reach the port can post data and read
// /stats.
func (s *Server) ListenWarning(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return ""
	}
	return fmt.Sprintf("listening on %s, which is not a loopback address: anyone who can reach it can send data and read /stats; /control and /stats/reset answer only %s (--control-from)",
		addr, prefixList(s.ControlFrom()))
}
