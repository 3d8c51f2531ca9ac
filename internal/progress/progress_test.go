package progress

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/relayload/relayload/internal/orchestrate"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

var sample = Status{Head: "step 3/8 main 500/s", Elapsed: 65 * time.Second, Remaining: 200 * time.Second,
	Detail: "measured window: sending 498/s, Relay 0.41 cores"}

const sampleText = "step 3/8 main 500/s · 1m05s, ~3m20s left · measured window: sending 498/s, Relay 0.41 cores"

// draws splits what a terminal line wrote into its draws (each begins
// with clearLine) and checks nothing else was written.
func draws(t *testing.T, out string) []string {
	t.Helper()
	if out == "" {
		return nil
	}
	if !strings.HasPrefix(out, clearLine) {
		t.Fatalf("terminal output %q does not begin with a clear", out)
	}
	return strings.Split(out, clearLine)[1:]
}

// TestRender: one Update on a terminal draws the line in place (clear
// first, no newline), cut to the narrower of MaxWidth and the terminal's
// width less one; a plain line is the same text on a line of its own,
// cut to MaxWidth.
func TestRender(t *testing.T) {
	long := sample
	long.Detail += ", and a detail long enough to pass a hundred columns by some way"
	for _, tc := range []struct {
		name     string
		terminal bool
		width    int // 0: unknown
		st       Status
		want     string
	}{
		{"terminal, unknown width", true, 0, sample, clearLine + sampleText},
		{"terminal, wide", true, 200, sample, clearLine + sampleText},
		{"terminal, 40 columns", true, 40, sample, clearLine + "step 3/8 main 500/s · 1m05s, ~3m20s le…"},
		{"terminal, long line", true, 300, long, clearLine + truncate(strings.Replace(sampleText, sample.Detail, long.Detail, 1), MaxWidth)},
		{"terminal, budget left", true, 0, Status{Head: "block 2 pair 14", Elapsed: 250 * time.Second, Remaining: 350 * time.Second, AtMost: true},
			clearLine + "block 2 pair 14 · 4m10s, ≤5m50s left"},
		{"terminal, nothing left unknown", true, 0, Status{Head: "step 1/2", Elapsed: 2 * time.Hour, Remaining: -1}, clearLine + "step 1/2 · 2h00m"},
		{"plain", false, 40, Status{Head: "step 3/8 main 500/s", Elapsed: 65 * time.Second, Remaining: -1, Detail: "idle"},
			"progress: step 3/8 main 500/s · 1m05s · idle\n"},
		{"plain, cut", false, 0, sample, "progress: step 3/8 main 500/s · 1m05s, ~3m20s left · measured window: sending 498/s, Relay 0.41 cor…\n"},
		{"plain, long line", false, 0, long, truncate("progress: "+strings.Replace(sampleText, sample.Detail, long.Detail, 1), MaxWidth) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			var out bytes.Buffer
			o := Options{Terminal: tc.terminal, Now: clk.now}
			if tc.width > 0 {
				o.Width = func() int { return tc.width }
			}
			l := newLine(&out, o)
			if !tc.terminal {
				clk.advance(DefaultEvery)
			}
			l.Update(tc.st)
			if out.String() != tc.want {
				t.Errorf("wrote\n%q\nwant\n%q", out.String(), tc.want)
			}
			text := strings.TrimSuffix(strings.TrimPrefix(out.String(), clearLine), "\n")
			if limit := min(MaxWidth, tc.width-1); tc.width > 0 && tc.terminal && utf8.RuneCountInString(text) > limit {
				t.Errorf("%d columns, more than %d", utf8.RuneCountInString(text), limit)
			}
			if utf8.RuneCountInString(text) > MaxWidth {
				t.Errorf("%d columns, more than %d", utf8.RuneCountInString(text), MaxWidth)
			}
		})
	}
}

// TestTerminalThrottle: on a terminal, updates closer than DrawEvery to
// the last draw wait for the ticker, which draws the newest one; the clock
// keeps running between updates (the ticker redraws when the seconds
// change), and an unchanged line is not drawn again.
func TestTerminalThrottle(t *testing.T) {
	clk := newClock()
	var out bytes.Buffer
	l := newLine(&out, Options{Terminal: true, Now: clk.now})
	st := func(detail string) Status {
		return Status{Head: "step 1/2 main 100/s", Elapsed: 10 * time.Second, Remaining: 30 * time.Second, Detail: detail}
	}
	type event struct {
		at     time.Duration // since the start
		update string        // "": a tick of the ticker
	}
	steps := []struct {
		ev   event
		want []string // the draws it makes
	}{
		{event{0, "a"}, []string{"step 1/2 main 100/s · 10s, ~30s left · a"}},
		{event{100 * time.Millisecond, "b"}, nil},
		{event{200 * time.Millisecond, "c"}, nil},
		{event{240 * time.Millisecond, ""}, nil},
		{event{250 * time.Millisecond, ""}, []string{"step 1/2 main 100/s · 10s, ~30s left · c"}},
		{event{500 * time.Millisecond, ""}, nil}, // unchanged
		{event{750 * time.Millisecond, "c"}, nil},
		// The status came at 750 ms with 10 s elapsed: a second later, not
		// before, the line says 11 s.
		{event{1500 * time.Millisecond, ""}, nil},
		{event{1750 * time.Millisecond, ""}, []string{"step 1/2 main 100/s · 11s, ~29s left · c"}},
		{event{1800 * time.Millisecond, "d"}, nil},
		// A new status brings its own clock.
		{event{2100 * time.Millisecond, "e"}, []string{"step 1/2 main 100/s · 10s, ~30s left · e"}},
	}
	var at time.Duration
	for _, s := range steps {
		clk.advance(s.ev.at - at)
		at = s.ev.at
		out.Reset()
		if s.ev.update != "" {
			l.Update(st(s.ev.update))
		} else {
			l.mu.Lock()
			l.flush()
			l.mu.Unlock()
		}
		if got := draws(t, out.String()); fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("at %v (%q): drew %q, want %q", s.ev.at, s.ev.update, got, s.want)
		}
	}
}

// TestPlainEvery: a plain line goes out once Every has passed since the
// last (the first, since New), never more often, however many updates
// come; Every is held within MinEvery and MaxEvery.
func TestPlainEvery(t *testing.T) {
	for _, tc := range []struct {
		every, want time.Duration
	}{
		{0, DefaultEvery},
		{time.Second, MinEvery},
		{20 * time.Second, 20 * time.Second},
		{time.Hour, MaxEvery},
	} {
		t.Run(tc.every.String(), func(t *testing.T) {
			clk := newClock()
			var out bytes.Buffer
			l := newLine(&out, Options{Every: tc.every, Now: clk.now})
			start := clk.t
			var lines []time.Duration
			// Updates every 100 ms for three periods and a half, ticks
			// every second between them.
			for i := 0; clk.t.Sub(start) < 7*tc.want/2; i++ {
				clk.advance(100 * time.Millisecond)
				n := out.Len()
				if i%10 == 0 {
					l.mu.Lock()
					l.flush()
					l.mu.Unlock()
				} else {
					l.Update(Status{Head: fmt.Sprintf("step %d/9", i), Remaining: -1})
				}
				if out.Len() > n {
					lines = append(lines, clk.t.Sub(start))
					if !strings.HasPrefix(out.String()[n:], "progress: step ") || !strings.HasSuffix(out.String(), "\n") || strings.Contains(out.String(), "\r") {
						t.Fatalf("plain line %q", out.String()[n:])
					}
				}
			}
			if len(lines) != 3 {
				t.Fatalf("%d lines at %v, want 3", len(lines), lines)
			}
			for i, at := range lines {
				if want := time.Duration(i+1) * tc.want; at != want {
					t.Errorf("line %d at %v, want %v", i+1, at, want)
				}
			}
		})
	}
}

// TestLogLines: a log line clears the live line, is written whole, and
// the line is drawn again after it; a log line written in pieces is not
// broken by a draw; with no status yet, or in plain mode, log lines pass
// through untouched.
func TestLogLines(t *testing.T) {
	st := Status{Head: "step 1/2", Elapsed: 5 * time.Second, Remaining: -1}
	line := clearLine + "step 1/2 · 5s"
	for _, tc := range []struct {
		name     string
		terminal bool
		update   bool
		writes   []string
		want     string
	}{
		{"terminal", true, true, []string{"step 1: main\n", "  warm-up\n"},
			line + clearLine + "step 1: main\n" + line + clearLine + "  warm-up\n" + line},
		{"terminal, a line in pieces", true, true, []string{"step 1: ", "main", "\n"},
			line + clearLine + "step 1: " + "main" + "\n" + line},
		{"terminal, no status yet", true, false, []string{"step 1: main\n"}, "step 1: main\n"},
		{"plain", false, true, []string{"step 1: main\n", "  warm-up\n"}, "step 1: main\n  warm-up\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			var out bytes.Buffer
			l := newLine(&out, Options{Terminal: tc.terminal, Now: clk.now})
			if tc.update {
				l.Update(st)
			}
			w := l.Writer()
			for _, s := range tc.writes {
				// A draw due now must wait while a log line is half
				// written (the status reads the same: it came now).
				clk.advance(time.Second)
				if tc.update {
					l.Update(st)
				}
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
				l.mu.Lock()
				l.flush()
				l.mu.Unlock()
			}
			if out.String() != tc.want {
				t.Errorf("wrote\n%q\nwant\n%q", out.String(), tc.want)
			}
		})
	}
}

// TestClose: Close clears the live line and stops the ticker goroutine;
// later updates and a second Close do nothing; log lines still pass.
func TestClose(t *testing.T) {
	var out syncBuffer
	l := New(&out, Options{Terminal: true})
	l.Update(Status{Head: "step 1/1", Remaining: -1})
	l.Close()
	select {
	case <-l.done:
	default:
		t.Fatal("the ticker goroutine still runs after Close")
	}
	got := out.String()
	if !strings.HasPrefix(got, clearLine+"step 1/1 · 0s") || !strings.HasSuffix(got, clearLine) {
		t.Errorf("wrote %q, want the line then a clear", got)
	}
	l.Update(Status{Head: "step 2/1", Remaining: -1})
	l.Close()
	fmt.Fprintln(l.Writer(), "after")
	if want := got + "after\n"; out.String() != want {
		t.Errorf("after Close wrote %q, want %q", strings.TrimPrefix(out.String(), got), "after\n")
	}
	var nl *Line
	nl.Update(Status{}) // a nil Line does nothing
	nl.Close()
}

// syncBuffer is a bytes.Buffer safe for the ticker goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDetect: a buffer or a pipe is not a terminal.
func TestDetect(t *testing.T) {
	if o := Detect(&bytes.Buffer{}); o.Terminal {
		t.Error("a buffer taken for a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if o := Detect(w); o.Terminal {
		t.Error("a pipe taken for a terminal")
	}
}

// TestDescribe: what a sweep's step and a comparison's pair say.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		section string
		p       orchestrate.Progress
		want    Status
	}{
		{"step in its window", "", orchestrate.Progress{Step: 3, Steps: 8, Build: "main", Rate: 500, Phase: "measured window",
			Sending: 498.4, SendingKnown: true, Cores: 0.414, CoresKnown: true, Elapsed: time.Minute, Remaining: 3 * time.Minute},
			Status{Head: "step 3/8 main 500/s", Elapsed: time.Minute, Remaining: 3 * time.Minute,
				Detail: "measured window: blast 498/s, Relay 0.41 cores"}},
		{"harness draining", "", orchestrate.Progress{Step: 1, Steps: 2, Build: "harness", Rate: 200, Harness: true, Phase: "drain",
			Cores: 0.2, CoresKnown: true, Remaining: -1},
			Status{Head: "step 1/2 harness 200/s", Remaining: -1, Detail: "drain: harness 0.20 cores"}},
		{"find max", "capacity", orchestrate.Progress{Step: 2, Steps: 7, AtMost: true, Build: "relay", Rate: orchestrate.RateMax, Phase: "warm-up", Remaining: time.Minute},
			Status{Head: "capacity step 2/≤7 relay max", Remaining: time.Minute, AtMost: true, Detail: "warm-up"}},
		{"block starting", "", orchestrate.Progress{Slices: true, Build: "pr", Baseline: "main", Rate: 300, Block: 2, Pair: 9,
			Phase: orchestrate.PhaseStarting, ChangePairs: 9, Change: 1.2, HalfWidth: 3.4, Remaining: time.Minute, AtMost: true},
			Status{Head: "block 2 pair 9 pr vs main 300/s", Remaining: time.Minute, AtMost: true, Detail: orchestrate.PhaseStarting}},
		{"pair", "kind-error", orchestrate.Progress{Slices: true, Build: "pr", Baseline: "main", Rate: 300, Block: 2, Pair: 14,
			Phase: orchestrate.PhasePairs, ChangePairs: 14, Change: -1.23, HalfWidth: 3.45, Remaining: time.Minute, AtMost: true},
			Status{Head: "kind-error block 2 pair 14 pr vs main 300/s", Remaining: time.Minute, AtMost: true, Detail: "CPU per envelope -1.2% ±3.5%"}},
		{"one pair: no interval yet", "", orchestrate.Progress{Slices: true, Build: "pr", Baseline: "main", Rate: 300, Block: 1, Pair: 1,
			Phase: orchestrate.PhasePairs, ChangePairs: 1, HalfWidth: math.Inf(1), Remaining: -1},
			Status{Head: "block 1 pair 1 pr vs main 300/s", Remaining: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Describe(tc.section, tc.p); got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", -time.Second: "0s", 1499 * time.Millisecond: "1s", 59 * time.Second: "59s", time.Minute: "1m00s",
		245 * time.Second: "4m05s", 3599 * time.Second: "59m59s", time.Hour + 2*time.Minute + 40*time.Second: "1h02m",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}
