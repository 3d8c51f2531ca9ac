package upstream

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/projects"
)

// Fuzz targets for the flag and /control parsers. Whatever a parser
// accepts must be valid by Faults.Validate and within the documented bounds:
// a spec that slips through could wedge a route (latency) or the server.

func TestParseLatencyTerms(t *testing.T) {
	tests := []struct {
		spec string
		want Latency
		ok   bool
	}{
		{"50ms", Latency{Fixed: Duration(50 * time.Millisecond)}, true},
		{"4m+30s", Latency{Fixed: Duration(4*time.Minute + 30*time.Second)}, true}, // fixed terms add up
		{"5ms+10ms-20ms+exp:3ms", Latency{Fixed: Duration(5 * time.Millisecond), Min: Duration(10 * time.Millisecond), Max: Duration(20 * time.Millisecond), Mean: Duration(3 * time.Millisecond)}, true},
		{"4m+4m", Latency{}, false},                            // sum over the 5 min cap
		{"2562047h47m16s+1h-2562047h47m16s", Latency{}, false}, // terms that overflow when added
		{"1ms-2ms+3ms-4ms", Latency{}, false},                  // two ranges
		{"exp:1ms+exp:2ms", Latency{}, false},                  // two means
		{"", Latency{}, false}, {"fast", Latency{}, false}, {"-5ms", Latency{}, false},
		{"20ms-10ms", Latency{}, false},
	}
	for _, tc := range tests {
		got, err := parseLatency(tc.spec)
		if (err == nil) != tc.ok || tc.ok && got != tc.want {
			t.Errorf("parseLatency(%q) = %+v, %v; want %+v ok=%v", tc.spec, got, err, tc.want, tc.ok)
		}
	}
}

func TestDurationJSONRange(t *testing.T) {
	for _, in := range []string{`1e300`, `-1e300`, `9223372037`} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("Duration %s accepted as %s", in, time.Duration(d))
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte(`1.5`), &d); err != nil || d != Duration(1500*time.Millisecond) {
		t.Errorf("Duration 1.5 = %s, %v", time.Duration(d), err)
	}
}

// checkLatency fails unless l, as accepted, is within the documented bounds.
func checkLatency(t *testing.T, what string, l Latency) {
	t.Helper()
	for _, d := range []Duration{l.Fixed, l.Min, l.Max, l.Mean} {
		if d < 0 || time.Duration(d) > maxLatency {
			t.Fatalf("%s: accepted %+v with a term outside [0, %s]", what, l, maxLatency)
		}
	}
	if time.Duration(l.Fixed+l.Max) > maxLatency {
		t.Fatalf("%s: accepted %+v: fixed + max over %s", what, l, maxLatency)
	}
	if l.Max > 0 && l.Max < l.Min {
		t.Fatalf("%s: accepted %+v with max < min", what, l)
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
		if route != "*" && routeIndex(route) < 0 {
			t.Fatalf("%q: accepted unknown route %q", s, route)
		}
		checkLatency(t, s, l)
		if err := (&Faults{Latency: map[string]Latency{route: l}}).Validate(); err != nil {
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
			in.Status != 0 && (in.Status < 400 || in.Status > 599) || in.Route != "*" && routeIndex(in.Route) < 0 {
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
		if fs.Duration <= 0 || fs.Duration > maxOutage || fs.Spec != s {
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

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"16MiB", "20MB", "512", "1GiB", "0", "-1", "1TiB", "1099511627776", "1099511627777", "9223372036854775807KiB", " 5 KiB "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && (n <= 0 || n > 1<<40) {
			t.Fatalf("%q: accepted %d", s, n)
		}
	})
}

// FuzzFaultsJSON drives the /control and --faults parser: a body that
// decodes and validates must be accepted by SetFaults, and what GET /control
// returns must decode and validate again.
func FuzzFaultsJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"latency":{"envelope":{"fixed":"20ms","min":"0s","max":"30ms","mean":"5ms"},"*":{"fixed":1}}}`,
		`{"inject":[{"route":"envelope","status":429,"probability":0.1,"retry_after":30,"rate_limits":"30:error:project:quota"}]}`,
		`{"outage":{"mode":"hang","duration":"20s"}}`, `{"global_pending":true,"relay_stop":true}`,
		`{"latency":{"*":{"fixed":"2562047h","max":"2562047h"}}}`, `{"latency":{"*":{"fixed":1e300}}}`, `{"outage":{"mode":"refuse","duration":-1}}`,
	} {
		f.Add([]byte(s))
	}
	ps, err := projects.Generate(1, 2)
	if err != nil {
		f.Fatal(err)
	}
	srv, err := New(Config{Projects: ps})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fl Faults
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if dec.Decode(&fl) != nil || fl.Validate() != nil {
			return
		}
		for name, l := range fl.Latency {
			checkLatency(t, name, l)
		}
		if err := srv.SetFaults(fl); err != nil {
			t.Fatalf("valid faults %s rejected: %v", b, err)
		}
		out, err := json.Marshal(srv.Faults())
		if err != nil {
			t.Fatal(err)
		}
		var back Faults
		if err := json.Unmarshal(out, &back); err != nil || back.Validate() != nil {
			t.Fatalf("GET /control answer %s does not round-trip: %v / %v", out, err, back.Validate())
		}
	})
}
