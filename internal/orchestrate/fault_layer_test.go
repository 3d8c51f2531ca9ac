package orchestrate

import (
	"testing"
	"time"

	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/upstream"
)

// TestFaultEndKeepsControlFaults (issue 33, row 3): the end of a --fault
// takes away its own faults only; faults set on the upstream meanwhile
// (POST /control) stay. The end used to clear every fault.
func TestFaultEndKeepsControlFaults(t *testing.T) {
	ps, err := projects.Generate(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	up, err := upstream.Start(upstream.Config{Projects: ps})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	f, err := ParseFault("429-storm=1s@0s")
	if err != nil {
		t.Fatal(err)
	}
	var w faultWatch
	w.begin(up, f)
	if w.err != nil {
		t.Fatal(w.err)
	}
	control := upstream.Faults{Latency: map[string]upstream.Latency{"outcomes": {Fixed: upstream.Duration(time.Millisecond)}}}
	if err := up.SetFaults(control); err != nil {
		t.Fatal(err)
	}
	if got := up.Faults(); len(got.Inject) != 1 || len(got.Latency) != 1 {
		t.Fatalf("during the fault: %+v, want the storm and /control's latency", got)
	}
	w.end(up)
	if got := up.Faults(); len(got.Inject) != 0 || got.Latency["outcomes"].Fixed != upstream.Duration(time.Millisecond) {
		t.Errorf("after the fault: %+v, want /control's latency alone", got)
	}
}
