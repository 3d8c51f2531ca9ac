package upstreamflag

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/upstream"
)

func TestParseLatencyTerms(t *testing.T) {
	tests := []struct {
		spec string
		want upstream.Latency
		ok   bool
	}{
		{"50ms", upstream.Latency{Fixed: upstream.Duration(50 * time.Millisecond)}, true},
		{"4m+30s", upstream.Latency{Fixed: upstream.Duration(4*time.Minute + 30*time.Second)}, true}, // fixed terms add up
		{"5ms+10ms-20ms+exp:3ms", upstream.Latency{Fixed: upstream.Duration(5 * time.Millisecond), Min: upstream.Duration(10 * time.Millisecond), Max: upstream.Duration(20 * time.Millisecond), Mean: upstream.Duration(3 * time.Millisecond)}, true},
		{"4m+4m", upstream.Latency{}, false},                            // sum over the 5 min cap
		{"2562047h47m16s+1h-2562047h47m16s", upstream.Latency{}, false}, // terms that overflow when added
		{"1ms-2ms+3ms-4ms", upstream.Latency{}, false},                  // two ranges
		{"exp:1ms+exp:2ms", upstream.Latency{}, false},                  // two means
		{"", upstream.Latency{}, false}, {"fast", upstream.Latency{}, false}, {"-5ms", upstream.Latency{}, false},
		{"20ms-10ms", upstream.Latency{}, false},
	}
	for _, tc := range tests {
		got, err := parseLatency(tc.spec)
		if (err == nil) != tc.ok || tc.ok && got != tc.want {
			t.Errorf("parseLatency(%q) = %+v, %v; want %+v ok=%v", tc.spec, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseLatency(f *testing.F) {
	for _, s := range []string{"*=50ms", "envelope=10ms-90ms", "live=exp:20ms", "*=5ms+10ms-20ms+exp:1ms", "x=1ms", "envelope",
		"*=2562047h47m16s+1h-2562047h47m16s", "*=4m+4m", "*=-1ms", "*=1ms-", "*=exp:", "*= 1ms + 2ms "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		route, l, err := ParseRouteLatency(s)
		if err != nil {
			return
		}
		if route != "*" && !slices.Contains(upstream.RouteNames(), route) {
			t.Fatalf("%q: accepted unknown route %q", s, route)
		}
		if err := (&upstream.Faults{Latency: map[string]upstream.Latency{route: l}}).Validate(); err != nil {
			t.Fatalf("%q: parsed %+v but Validate says %v", s, l, err)
		}
	})
}

func FuzzParseInjection(f *testing.F) {
	for _, s := range []string{"envelope=503@0.1", "envelope=429:30@1", "*=reset@0.01", "live=200@1", "x=500@0.5", "envelope=500@NaN",
		"envelope=500@1e-400", "envelope=429:-1@1", "envelope=429:99999999999999999999@1", "=@", "envelope=500@0.5@1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in, err := ParseInjection(s)
		if err != nil {
			return
		}
		if !(in.Probability >= 0 && in.Probability <= 1) || in.Reset == (in.Status != 0) || in.RetryAfter < 0 ||
			in.Status != 0 && (in.Status < 400 || in.Status > 599) || in.Route != "*" && !slices.Contains(upstream.RouteNames(), in.Route) {
			t.Fatalf("%q: accepted %+v", s, in)
		}
	})
}

func FuzzParseFaultSpec(f *testing.F) {
	for _, s := range []string{"outage=10s", "outage=2s:refuse@1s", "outage=1s:hang", "429-storm", "429-storm=3s@0s",
		"errors=5s:503:0.5", "latency=5s:200ms", "latency=1s:2h", "outage=2h", "flood=1s", "outage=10s@soon", ":", "=", "@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs, err := ParseFaultSpec(s)
		if err != nil {
			return
		}
		if fs.Duration <= 0 || fs.Duration > maxFaultDuration || fs.Spec != s {
			t.Fatalf("%q: accepted %+v", s, fs)
		}
		faults := fs.Faults()
		if err := faults.Validate(); err != nil {
			t.Fatalf("%q: parsed to faults the server rejects: %v", s, err)
		}
	})
}

func FuzzParseQuota(f *testing.F) {
	for _, s := range []string{"all", "error;transaction:0", "error:10:reason", "error:x", ":", "a;;b", "all:4294967296", "error:1:2:3", `"quoted"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuota(s, 1)
		if err != nil {
			return
		}
		var obj struct {
			ID         string   `json:"id"`
			Categories []string `json:"categories"`
			Limit      *uint32  `json:"limit"`
			ReasonCode string   `json:"reasonCode"`
			Scope      string   `json:"scope"`
		}
		if err := json.Unmarshal(q, &obj); err != nil {
			t.Fatalf("%q: quota %s does not decode: %v", s, q, err)
		}
		if obj.ID == "" || obj.Scope != "project" || obj.Limit == nil || obj.Categories == nil || obj.ReasonCode == "" {
			t.Fatalf("%q: incomplete quota %s", s, q)
		}
		for _, c := range obj.Categories {
			if c == "" || strings.TrimSpace(c) != c {
				t.Fatalf("%q: category %q", s, c)
			}
		}
	})
}

// Sizes are 1 byte to 1TiB, and an error says so (issue 33: "2TiB" got
// "want a positive byte count" with no word of the cap).
func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int64
		err  string
	}{
		{"16MiB", 16 << 20, ""},
		{"20MB", 20e6, ""},
		{"1TiB", 1 << 40, ""},
		{"1099511627776", 1 << 40, ""},
		{"1024GiB", 1 << 40, ""},
		{"1TB", 1e12, ""},
		{"2TiB", 0, `size "2TiB": want at most 1TiB (1099511627776 bytes)`},
		{"1099511627777", 0, "want at most 1TiB"},
		{"9223372036854775807KiB", 0, "want at most 1TiB"},
		{"0", 0, `size "0": want a byte count from 1 to 1TiB`},
		{"-1MiB", 0, "from 1 to 1TiB"},
		{"lots", 0, "from 1 to 1TiB"},
	} {
		n, err := ParseSize(tc.s)
		switch {
		case tc.err == "" && (err != nil || n != tc.want):
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.s, n, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseSize(%q) = %d, %v; want an error with %q", tc.s, n, err, tc.err)
		}
	}
	if _, _, err := ParseCaptureMax("10000,2TiB"); err == nil || !strings.Contains(err.Error(), "at most 1TiB") {
		t.Errorf("--capture-max 10000,2TiB: %v, want the 1TiB cap named", err)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"16MiB", "20MB", "512", "1GiB", "0", "-1", "1TiB", "1099511627776", "1099511627777", "9223372036854775807KiB", " 5 KiB ", "2TiB", "1TB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && (n <= 0 || n > 1<<40) {
			t.Fatalf("%q: accepted %d", s, n)
		}
	})
}

func TestParseFaultSpec(t *testing.T) {
	tests := []struct {
		spec    string
		kind    string
		dur     time.Duration
		start   time.Duration
		wantErr string
	}{
		{"outage=10s", "outage", 10 * time.Second, -1, ""},
		{"outage=2s:refuse@1s", "outage", 2 * time.Second, time.Second, ""},
		{"429-storm", "429-storm", 10 * time.Second, -1, ""},
		{"429-storm=3s", "429-storm", 3 * time.Second, -1, ""},
		{"errors=5s:503:0.5", "errors", 5 * time.Second, -1, ""},
		{"latency=5s:200ms", "latency", 5 * time.Second, -1, ""},
		{"outage", "", 0, 0, "needs a duration"},
		{"outage=10s:melt", "", 0, 0, "outage mode"},
		{"errors=5s:200", "", 0, 0, "status"},
		{"errors=5s:500:2", "", 0, 0, "share"},
		{"latency=5s", "", 0, 0, "DELAY"},
		{"flood=1s", "", 0, 0, "unknown kind"},
		{"outage=10s@soon", "", 0, 0, "start"},
		{"outage=-1s", "", 0, 0, "duration"},
	}
	for _, tc := range tests {
		f, err := ParseFaultSpec(tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if f.Kind != tc.kind || f.Duration != tc.dur || f.Start != tc.start {
			t.Errorf("%q: %+v", tc.spec, f)
		}
		uf := f.Faults()
		if err := uf.Validate(); err != nil {
			t.Errorf("%q: upstream rejects %+v: %v", tc.spec, uf, err)
		}
	}
}

// TestParseQuotaCategories: a quota's syntax (upstream checks its
// categories: TestQuotaCategories there).
func TestParseQuotaCategories(t *testing.T) {
	for _, ok := range []string{"error", "transaction;span", "monitor:0", "log_item;log_byte:0:logs_off", "trace_metric_byte", "all"} {
		if _, err := ParseQuota(ok, 0); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"error;", "empty category"},
		{"error:0:x:y", "quoted: ';' ends a shell command"},
	} {
		if _, err := ParseQuota(tc.spec, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

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
		again, err := ParseCIDRList(cidrList(ps))
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

func TestListenWarning(t *testing.T) {
	for _, c := range []struct {
		addr string
		warn bool
	}{
		{"127.0.0.1:8000", false}, {"127.0.0.2:0", false}, {"[::1]:8000", false}, {"[::ffff:127.0.0.1]:80", false},
		{"0.0.0.0:8000", true}, {"[::]:8000", true}, {":8000", true}, {"10.1.2.3:80", true}, {"[fe80::1%eth0]:80", true},
		{"example.com:80", true},
	} {
		w := ListenWarning(c.addr, nil)
		if (w != "") != c.warn || strings.Contains(w, "\n") {
			t.Errorf("ListenWarning(%q) = %q, want a warning: %v (one line)", c.addr, w, c.warn)
		}
		if c.warn && (!strings.Contains(w, c.addr) || !strings.Contains(w, "127.0.0.0/8, ::1/128") || !strings.Contains(w, "--control-from")) {
			t.Errorf("ListenWarning(%q) = %q: want the address, the allowed networks and the flag", c.addr, w)
		}
	}
}

func TestParseFlags(t *testing.T) {
	in, err := ParseInjection("envelope=429:30@0.25")
	if err != nil || in.Status != 429 || in.RetryAfter != 30 || in.Probability != 0.25 || in.Route != "envelope" {
		t.Errorf("ParseInjection = %+v, %v", in, err)
	}
	if in, err := ParseInjection("*=reset@1"); err != nil || !in.Reset {
		t.Errorf("reset: %+v %v", in, err)
	}
	for _, bad := range []string{"envelope", "envelope=429", "x=500@0.1", "envelope=200@0.1", "envelope=500@1.5"} {
		if _, err := ParseInjection(bad); err == nil {
			t.Errorf("ParseInjection(%q) accepted", bad)
		}
	}
	q, err := ParseQuota("error;transaction:0:too_many", 3)
	if err != nil || !strings.Contains(string(q), `"categories":["error","transaction"]`) || !strings.Contains(string(q), `"reasonCode":"too_many"`) || !strings.Contains(string(q), `"id":"relayload-quota-3"`) {
		t.Errorf("ParseQuota = %s %v", q, err)
	}
	if q, _ := ParseQuota("all", 0); !strings.Contains(string(q), `"categories":[]`) || !strings.Contains(string(q), `"limit":0`) {
		t.Errorf("ParseQuota(all) = %s", q)
	}
	for s, want := range map[string]int64{"16MiB": 16 << 20, "20MB": 20e6, "512": 512, "1GiB": 1 << 30} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "-1", "x", "0"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}
