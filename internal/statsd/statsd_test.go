package statsd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		in     string
		name   string
		values []string
		typ    string
		rate   float64
		ok     bool
	}{
		{"a.b:1|c", "a.b", []string{"1"}, "c", 1, true},
		{"sentry.relay.requests.duration:1.5|ms|#route:envelope,status_code:200", "sentry.relay.requests.duration", []string{"1.5"}, "ms", 1, true},
		{"x:1:2:3|ms", "x", []string{"1", "2", "3"}, "ms", 1, true},
		{"x:4|c|@0.25", "x", []string{"4"}, "c", 0.25, true},
		{"x:4|d|@0.5|#a:b", "x", []string{"4"}, "d", 0.5, true},
		{"g:-3|g", "g", []string{"-3"}, "g", 1, true},
		{"s:abc|s", "s", []string{"abc"}, "s", 1, true},
		{"h:2|h|T1700000000", "h", []string{"2"}, "h", 1, true},
		{"noval", "", nil, "", 0, false},
		{":1|c", "", nil, "", 0, false},
		{"x:1", "", nil, "", 0, false},
		{"x:1|q", "", nil, "", 0, false},
		{"x:1|c|@2", "", nil, "", 0, false},
		{"x:1|c|@0", "", nil, "", 0, false},
		{"x:1|c|bogus", "", nil, "", 0, false},
		{"x:1::2|ms", "", nil, "", 0, false},
		{"s:a:b|s", "", nil, "", 0, false},
	}
	for _, tt := range tests {
		l, err := ParseLine([]byte(tt.in), nil)
		if (err == nil) != tt.ok {
			t.Errorf("ParseLine(%q) err = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if !tt.ok {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("ParseLine(%q) error %v does not wrap ErrMalformed", tt.in, err)
			}
			continue
		}
		if string(l.Name) != tt.name || l.Type != tt.typ || l.Rate != tt.rate || len(l.Values) != len(tt.values) {
			t.Errorf("ParseLine(%q) = %s %v %s %v", tt.in, l.Name, l.Values, l.Type, l.Rate)
			continue
		}
		for i := range tt.values {
			if string(l.Values[i]) != tt.values[i] {
				t.Errorf("ParseLine(%q) value %d = %q", tt.in, i, l.Values[i])
			}
		}
	}
}

func TestAggregation(t *testing.T) {
	st := newState()
	var vals [][]byte
	st.addDatagram([]byte("c:1|c\nc:2|c|@0.5\ng:5|g\ng:7|g\nt:10:20:30|ms\nt:40|ms|@0.5\nbad line\n\ns:x|s"), &vals)
	if st.datagrams != 1 || st.lines != 7 || st.malformed != 1 {
		t.Fatalf("datagrams %d lines %d malformed %d", st.datagrams, st.lines, st.malformed)
	}
	if st.counters["c"] != 5 {
		t.Errorf("counter = %v, want 1 + 2/0.5 = 5", st.counters["c"])
	}
	if st.gauges["g"] != 7 {
		t.Errorf("gauge = %v", st.gauges["g"])
	}
	q := summarize(st.timers["t"])
	if q.Count != 5 || q.Sum != 10+20+30+80 {
		t.Errorf("timer count %v sum %v, want 5 and 140", q.Count, q.Sum)
	}
	if math.Abs(q.Max-40)/40 > RelativeAccuracy || math.Abs(q.Min-10)/10 > RelativeAccuracy {
		t.Errorf("timer min %v max %v", q.Min, q.Max)
	}
	if st.sets["s"] != 1 {
		t.Errorf("sets %v", st.sets)
	}

	// Packed values with a sample rate and DogStatsD tags; a line with one
	// bad or non-finite value is malformed and records nothing.
	st = newState()
	st.addDatagram([]byte("p:1:2:3|c|@0.5|#route:envelope,status:200\nq:5:7|ms|@0.25|#a:b\np:1:oops|c\np:NaN|c\nq:Inf|ms\nq:3:-Inf|ms\nn:NaN|g"), &vals)
	if st.lines != 2 || st.malformed != 5 {
		t.Fatalf("lines %d malformed %d, want 2 and 5", st.lines, st.malformed)
	}
	if st.counters["p"] != 12 {
		t.Errorf("packed counter = %v, want (1+2+3)/0.5 = 12", st.counters["p"])
	}
	if q := summarize(st.timers["q"]); q.Count != 8 || q.Sum != 48 {
		t.Errorf("packed timer count %v sum %v, want 2/0.25 = 8 and (5+7)×4 = 48", q.Count, q.Sum)
	}
	if _, ok := st.gauges["n"]; ok {
		t.Errorf("NaN gauge recorded: %v", st.gauges)
	}
}

func TestReceiverOverUDP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	conn, err := net.Dial("udp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const datagrams = 200
	for i := 0; i < datagrams; i++ {
		// Relay packs lines up to 512 B; values 1..100 ms across datagrams.
		var b strings.Builder
		for j := 0; j < 5; j++ {
			fmt.Fprintf(&b, "sentry.relay.event.processing_time:%d|ms|#a:b\n", (i*5+j)%100+1)
		}
		b.WriteString("sentry.relay.event.accepted:1|c")
		if _, err := conn.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second) // only tells datagrams counted from lost
	var s Snapshot
	for time.Now().Before(deadline) {
		s = r.Snapshot()
		if s.Datagrams == datagrams {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s.Datagrams != datagrams || s.Counters["sentry.relay.event.accepted"] != datagrams {
		t.Fatalf("got %d datagrams, counter %v", s.Datagrams, s.Counters["sentry.relay.event.accepted"])
	}
	p50, ok := r.Quantile("sentry.relay.event.processing_time", 0.5)
	if !ok || math.Abs(p50-50) > 50*RelativeAccuracy+1 {
		t.Errorf("p50 = %v ok=%v, want ≈50", p50, ok)
	}
	if _, ok := r.Quantile("missing", 0.5); ok {
		t.Error("quantile of a missing timer")
	}
	if sk, ok := r.Sketch("sentry.relay.event.processing_time"); !ok || sk.GetCount() != datagrams*5 {
		t.Error("sketch copy")
	}
	if names := s.Names(); len(names) != 2 {
		t.Errorf("names %v", names)
	}
	r.Reset()
	if s := r.Snapshot(); s.Lines != 0 || len(s.Timers) != 0 {
		t.Errorf("after reset: %+v", s)
	}
}

func TestListenStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second): // only tells a stop from none
		t.Fatal("receiver did not stop")
	}
	if _, err := Listen(context.Background(), "256.0.0.1:1"); err == nil {
		t.Fatal("bad address accepted")
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"a:1|c", "x:1:2|ms|@0.5|#k:v", "s:v|s", ":|", "a:|c"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if l, err := ParseLine(b, nil); err == nil {
			if len(l.Name) == 0 || len(l.Values) == 0 || !(l.Rate > 0 && l.Rate <= 1) || l.Type == "" {
				t.Fatalf("ParseLine(%q) accepted %+v", b, l)
			}
			for _, v := range l.Values {
				if len(v) == 0 || bytes.ContainsAny(v, ":|") {
					t.Fatalf("ParseLine(%q): value %q", b, v)
				}
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseLine(%q): %v does not wrap ErrMalformed", b, err)
		}
		st := newState()
		var vals [][]byte
		st.addDatagram(b, &vals)
		nonEmpty := 0
		for _, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimRight(line, "\r ")) > 0 {
				nonEmpty++
			}
		}
		// Every non-empty line is either recorded or counted malformed.
		if st.datagrams != 1 || st.lines+st.malformed != int64(nonEmpty) {
			t.Fatalf("%q: %d lines + %d malformed, want %d", b, st.lines, st.malformed, nonEmpty)
		}
		for name, v := range st.counters {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%q: counter %s = %v", b, name, v)
			}
		}
	})
}

func BenchmarkDatagram(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 480 {
		sb.WriteString("sentry.relay.requests.duration:1.25:2.5|ms|#route:envelope\n")
	}
	dg := []byte(sb.String())
	lines := strings.Count(sb.String(), "\n")
	st := newState()
	var vals [][]byte
	b.ReportAllocs()
	b.SetBytes(int64(len(dg)))
	for b.Loop() {
		st.addDatagram(dg, &vals)
	}
	b.ReportMetric(float64(b.N*lines)/b.Elapsed().Seconds(), "lines/s")
}
