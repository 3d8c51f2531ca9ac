// Package progress shows where a long run stands on one status line, so
// that a run of many minutes can be watched.
//
// On a terminal the line is live: it is rewritten in place (a carriage
// return, then clear to the end of the line), at most once per DrawEvery,
// and cut to MaxWidth columns or the terminal's width if that is narrower.
// Anywhere else (a pipe, a file, a CI log) it is a plain line printed every
// Options.Every and never more often, so that a log stays readable.
//
// Log lines written through Line.Writer go around the live line: it is
// cleared, the log line is written, and the status is drawn again below it.
// Between two updates the line keeps its clock going: the elapsed time
// grows and the time left shrinks.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

const (
	// MaxWidth is the widest a status line gets, in columns (on a terminal
	// and in a log alike).
	MaxWidth = 100
	// DrawEvery is the shortest time between two draws of the live line.
	DrawEvery = 250 * time.Millisecond
	// DefaultEvery, MinEvery and MaxEvery bound Options.Every, how often a
	// plain line is printed.
	DefaultEvery = 15 * time.Second
	MinEvery     = 10 * time.Second
	MaxEvery     = 30 * time.Second
)

// clearLine returns the cursor to the start of the line and clears it.
const clearLine = "\r\x1b[K"

// Status is what the line says.
type Status struct {
	// Head says what is running, e.g. "step 3/8 main 500/s".
	Head string
	// Elapsed and Remaining are as of the Update; the line advances them
	// by its clock until the next one. A negative Remaining is unknown.
	Elapsed, Remaining time.Duration
	// AtMost marks Remaining as an upper bound (what a budget has left)
	// rather than an estimate.
	AtMost bool
	// Detail is the live figures, shown last: a line too wide loses them
	// first.
	Detail string
}

// Options say where the line goes.
type Options struct {
	// Terminal draws a live line rewritten in place; false prints a plain
	// line every Every.
	Terminal bool
	// Width returns the terminal's columns (nil, or 0 returned: unknown);
	// it is asked at every draw, so a resized window is followed. The line
	// stays one column short of it: some terminals wrap a line that fills
	// the last column.
	Width func() int
	// Every is how often a plain line is printed: DefaultEvery when 0,
	// else held within MinEvery and MaxEvery.
	Every time.Duration
	// Now is the clock (time.Now when nil); tests set their own.
	Now func() time.Time
}

// Detect says whether w is a terminal that takes the live line: an
// *os.File on a terminal, with TERM not "dumb". The width is read from the
// terminal at every draw.
func Detect(w io.Writer) Options {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return Options{}
	}
	fd := int(f.Fd())
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err != nil {
		return Options{}
	}
	return Options{Terminal: true, Width: func() int {
		ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
		if err != nil {
			return 0
		}
		return int(ws.Col)
	}}
}

// Line is one status line on a writer. Its methods may be called from any
// goroutine; Update and Close do nothing on a nil *Line.
type Line struct {
	w     io.Writer
	o     Options
	every time.Duration

	mu     sync.Mutex
	st     Status
	at     time.Time // when st came
	have   bool      // a status has come
	closed bool
	// shown: the live line is on the terminal, the cursor at its end.
	shown bool
	// midLine: a log write ended without a newline; nothing is drawn
	// until one ends the line.
	midLine   bool
	drawn     string    // the live line as last drawn
	lastDraw  time.Time // terminal: the last draw
	lastPlain time.Time // plain: the last line (New's time before the first)

	stop, done chan struct{}
}

// New starts a status line on w (nothing shows until the first Update).
// Its ticker goroutine keeps the clock going and prints what the
// throttle held back; Close stops it.
func New(w io.Writer, o Options) *Line {
	l := newLine(w, o)
	period := DrawEvery
	if !o.Terminal {
		period = time.Second
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.tick(period)
	return l
}

// newLine is New without the ticker goroutine: its tests call flush
// themselves, on their own clock.
func newLine(w io.Writer, o Options) *Line {
	if o.Now == nil {
		o.Now = time.Now
	}
	every := o.Every
	if every == 0 {
		every = DefaultEvery
	}
	every = min(max(every, MinEvery), MaxEvery)
	return &Line{w: w, o: o, every: every, lastPlain: o.Now()}
}

func (l *Line) tick(period time.Duration) {
	defer close(l.done)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.mu.Lock()
			l.flush()
			l.mu.Unlock()
		}
	}
}

// Update sets what the line says. On a terminal it is drawn now unless the
// last draw is less than DrawEvery ago (then the ticker draws it); a plain
// line goes out only when Every has passed since the last.
func (l *Line) Update(s Status) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.st, l.at, l.have = s, l.o.Now(), true
	l.flush()
}

// Writer returns a writer to the line's writer for log lines: on a
// terminal each write clears the live line first and draws it again after
// a write that ends a line.
func (l *Line) Writer() io.Writer { return logWriter{l} }

type logWriter struct{ l *Line }

func (lw logWriter) Write(p []byte) (int, error) {
	l := lw.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.o.Terminal || l.closed {
		n, err := l.w.Write(p)
		if len(p) > 0 {
			l.midLine = p[len(p)-1] != '\n'
		}
		return n, err
	}
	var b strings.Builder
	if l.shown {
		b.WriteString(clearLine)
		l.shown = false
	}
	b.Write(p)
	if len(p) > 0 {
		l.midLine = p[len(p)-1] != '\n'
	}
	if l.have && !l.midLine {
		text := l.render()
		b.WriteString(text)
		l.shown, l.drawn, l.lastDraw = true, text, l.o.Now()
	}
	if _, err := io.WriteString(l.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close stops the ticker and, on a terminal, clears the live line, so
// that what is printed next starts on a clean line. Updates after it are
// ignored; it may be called more than once.
func (l *Line) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	first := !l.closed
	l.closed = true
	if l.shown && !l.midLine {
		io.WriteString(l.w, clearLine)
		l.shown = false
	}
	l.mu.Unlock()
	if l.done == nil {
		return
	}
	if first {
		close(l.stop)
	}
	<-l.done
}

// flush draws or prints the status if it is due (l.mu held).
func (l *Line) flush() {
	if l.closed || !l.have || l.midLine {
		return
	}
	now := l.o.Now()
	if !l.o.Terminal {
		if now.Sub(l.lastPlain) >= l.every {
			fmt.Fprintln(l.w, truncate("progress: "+l.text(now), MaxWidth))
			l.lastPlain = now
		}
		return
	}
	text := l.render()
	if (text == l.drawn && l.shown) || (l.shown && now.Sub(l.lastDraw) < DrawEvery) {
		return
	}
	io.WriteString(l.w, text)
	l.shown, l.drawn, l.lastDraw = true, text, now
}

// render is the live line as drawn: clear, then the text cut to the width.
func (l *Line) render() string {
	width := MaxWidth
	if l.o.Width != nil {
		if w := l.o.Width(); w > 0 {
			width = min(width, w-1)
		}
	}
	return clearLine + truncate(l.text(l.o.Now()), width)
}

// text is the status as of now: the head, the clock, the detail.
func (l *Line) text(now time.Time) string {
	s := l.st
	since := max(now.Sub(l.at), 0)
	var b strings.Builder
	b.WriteString(s.Head)
	b.WriteString(" · ")
	b.WriteString(Duration(s.Elapsed + since))
	if s.Remaining >= 0 {
		// Whole seconds up: the time left reads 0s only when none is.
		left := max(s.Remaining-since, 0)
		if r := left % time.Second; r > 0 {
			left += time.Second - r
		}
		if s.AtMost {
			fmt.Fprintf(&b, ", ≤%s left", Duration(left))
		} else {
			fmt.Fprintf(&b, ", ~%s left", Duration(left))
		}
	}
	if s.Detail != "" {
		b.WriteString(" · ")
		b.WriteString(s.Detail)
	}
	return b.String()
}

// truncate cuts s to width runes, the last one an ellipsis.
func truncate(s string, width int) string {
	if width < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}

// Duration formats d for the line, in whole units: 45s, 4m05s, 1h02m.
func Duration(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
