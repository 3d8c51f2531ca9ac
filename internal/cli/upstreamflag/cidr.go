package upstreamflag

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

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

// cidrList formats networks as ParseCIDRList reads them.
func cidrList(nets []netip.Prefix) string {
	s := make([]string, len(nets))
	for i, p := range nets {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// ListenWarning returns a one-line warning when addr (host:port, the
// address a listener got) is not a loopback address, "" when it is: on
// other interfaces anyone who can reach the port can post data and read
// /stats. controlFrom are the networks /control answers (nil: loopback).
func ListenWarning(addr string, controlFrom []netip.Prefix) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return ""
	}
	allowed := "127.0.0.0/8, ::1/128"
	if controlFrom != nil {
		allowed = cidrList(controlFrom)
	}
	return fmt.Sprintf("listening on %s, which is not a loopback address: anyone who can reach it can send data and read /stats; /control and /stats/reset answer only %s (--control-from)",
		addr, allowed)
}
