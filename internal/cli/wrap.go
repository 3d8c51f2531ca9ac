package cli

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// Width is the widest line the programs write for a person to read: help,
// progress lines and the terminal summary.
const Width = 100

// Wrap breaks text into lines of at most width runes at spaces, each
// starting with indent; a word longer than a line is broken where the line
// ends. Newlines in text start a new line (a blank line stays blank).
func Wrap(text string, width int, indent string) string {
	var b strings.Builder
	for i, para := range strings.Split(text, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		wrapLine(&b, para, width, indent, indent)
	}
	return b.String()
}

// wrapLine writes one line of text wrapped: the first output line starts
// with first, the others with rest. An empty line is written empty.
func wrapLine(b *strings.Builder, line string, width int, first, rest string) {
	words := strings.Fields(line)
	if len(words) == 0 {
		return
	}
	prefix := first
	col := 0
	start := func() {
		b.WriteString(prefix)
		col = utf8.RuneCountInString(prefix)
		prefix = rest
	}
	start()
	room := func() int { return max(width-col, 1) }
	atStart := true
	for _, w := range words {
		n := utf8.RuneCountInString(w)
		if !atStart && col+1+n > width {
			b.WriteByte('\n')
			start()
			atStart = true
		}
		if !atStart {
			b.WriteByte(' ')
			col++
		}
		// A word wider than what is left of a fresh line is cut.
		for n > room() && atStart {
			r := []rune(w)
			k := room()
			b.WriteString(string(r[:k]))
			b.WriteByte('\n')
			start()
			w, n = string(r[k:]), n-k
		}
		b.WriteString(w)
		col += n
		atStart = false
	}
}

// WrapLines returns a writer that writes each line it is given to w,
// wrapped to width at spaces: a continuation starts with the line's own
// indentation plus four spaces. It is safe for concurrent use; a last line
// without a newline waits for one.
func WrapLines(w io.Writer, width int) io.Writer {
	return &lineWrapper{w: w, width: width}
}

type lineWrapper struct {
	mu    sync.Mutex
	w     io.Writer
	width int
	buf   []byte
}

func (lw *lineWrapper) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.buf = append(lw.buf, p...)
	var out strings.Builder
	for {
		i := bytes.IndexByte(lw.buf, '\n')
		if i < 0 {
			break
		}
		line := string(lw.buf[:i])
		lw.buf = lw.buf[i+1:]
		if utf8.RuneCountInString(line) <= lw.width {
			out.WriteString(line)
		} else {
			lead := line[:len(line)-len(strings.TrimLeft(line, " "))]
			wrapLine(&out, line, lw.width, lead, lead+"    ")
		}
		out.WriteByte('\n')
	}
	if out.Len() > 0 {
		if _, err := io.WriteString(lw.w, out.String()); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
