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
	srv, err := newServer(Config{Projects: ps})
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
