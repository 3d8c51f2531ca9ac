package promtext

import (
	"fmt"
	"strings"
	"testing"
)

type row struct {
	Name  string `promlabel:"name"`
	Count int64  `prom:"rows_total" help:"Rows by name."`
}

type inner struct {
	Hits int64 `prom:"hits_total" help:"Hits."`
}

type sample struct {
	Up       float64                     `prom:"up_seconds,gauge" help:"Seconds up."`
	ByKind   map[string]int64            `prom:"kinds_total,kind" help:"Things by kind."`
	ByTwo    map[string]map[string]int64 `prom:"pairs_total,a,b" help:"Things by a and b."`
	OK       int64                       `prom:"checks_total,result=ok" help:"Checks by result."`
	Bad      int64                       `prom:"checks_total,result=bad"`
	Rows     []row
	ByRegion map[string]inner `prom:",region"`
	Nested   *inner
	Skipped  int64 `prom:"-"`
	Untagged int64
}

func TestAppend(t *testing.T) {
	v := sample{
		Up: 1.5, ByKind: map[string]int64{"b": 2, "a": 1}, ByTwo: map[string]map[string]int64{"x": {"y": 3}},
		OK: 4, Bad: 5, Rows: []row{{"one", 6}, {`q"\` + "\n", 7}},
		ByRegion: map[string]inner{"eu": {8}}, Nested: &inner{9}, Skipped: 10, Untagged: 11,
	}
	want := `# HELP p_up_seconds Seconds up.
# TYPE p_up_seconds gauge
p_up_seconds 1.5
# HELP p_kinds_total Things by kind.
# TYPE p_kinds_total counter
p_kinds_total{kind="a"} 1
p_kinds_total{kind="b"} 2
# HELP p_pairs_total Things by a and b.
# TYPE p_pairs_total counter
p_pairs_total{a="x",b="y"} 3
# HELP p_checks_total Checks by result.
# TYPE p_checks_total counter
p_checks_total{result="ok"} 4
p_checks_total{result="bad"} 5
# HELP p_rows_total Rows by name.
# TYPE p_rows_total counter
p_rows_total{name="one"} 6
p_rows_total{name="q\"\\\n"} 7
# HELP p_hits_total Hits.
# TYPE p_hits_total counter
p_hits_total{region="eu"} 8
p_hits_total 9
`
	for _, tc := range []struct {
		name string
		v    any
	}{{"value", v}, {"pointer", &v}} {
		if got := string(Append(nil, "p_", tc.v)); got != want {
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, got, want)
		}
	}
	// A zero number is a sample; a nil pointer, an empty map or slice none.
	if got := string(Append([]byte("x\n"), "p_", &inner{})); got != "x\n# HELP p_hits_total Hits.\n# TYPE p_hits_total counter\np_hits_total 0\n" {
		t.Errorf("zero: %q", got)
	}
	if got := string(Append(nil, "p_", sample{})); got == "" || strings.Contains(got, "hits_total") {
		t.Errorf("empty: %q", got)
	}
}

func ExampleAppend() {
	type stats struct {
		Requests map[string]int64 `prom:"requests_total,status" help:"Requests by status."`
		InFlight int64            `prom:"in_flight,gauge" help:"Requests being handled."`
	}
	fmt.Print(string(Append(nil, "demo_", stats{Requests: map[string]int64{"200": 3, "404": 1}, InFlight: 2})))
	// Output:
	// # HELP demo_requests_total Requests by status.
	// # TYPE demo_requests_total counter
	// demo_requests_total{status="200"} 3
	// demo_requests_total{status="404"} 1
	// # HELP demo_in_flight Requests being handled.
	// # TYPE demo_in_flight gauge
	// demo_in_flight 2
}
