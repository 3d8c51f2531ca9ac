package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/relayload/relayload/internal/cli"
)

// columnGap separates the columns of a plain table.
const columnGap = "  "

// minLastColumn is the narrowest the last column of a plain table is
// wrapped to before a column is left out.
const minLastColumn = 16

// WritePlain writes the table for a terminal, at most width columns wide:
// columns two spaces apart, the header underlined. While it is wider, the
// columns named in drop are left out, in that order; then the last
// column's cells are wrapped under it. It returns the headers of the
// columns left out.
func (t *Table) WritePlain(w io.Writer, width int, drop ...string) []string {
	keep := make([]bool, len(t.head))
	for i := range keep {
		keep[i] = true
	}
	colWidth := func(i int) int {
		n := utf8.RuneCountInString(t.head[i])
		for _, r := range t.rows {
			if i < len(r) {
				n = max(n, utf8.RuneCountInString(r[i]))
			}
		}
		return n
	}
	widths := make([]int, len(t.head))
	for i := range widths {
		widths[i] = colWidth(i)
	}
	// lastStart is where the last kept column starts; full the width of
	// the whole table unwrapped.
	measure := func() (lastStart, full int) {
		col, last := 0, -1
		for i := range t.head {
			if !keep[i] {
				continue
			}
			if last >= 0 {
				col += widths[last] + len(columnGap)
			}
			last = i
		}
		if last < 0 {
			return 0, 0
		}
		return col, col + widths[last]
	}
	var dropped []string
	for _, name := range drop {
		lastStart, full := measure()
		if full <= width || (width-lastStart >= minLastColumn && !t.right[t.lastKept(keep)]) {
			break
		}
		if i := slices.Index(t.head, name); i >= 0 && keep[i] {
			keep[i] = false
			dropped = append(dropped, name)
		}
	}
	lastStart, _ := measure()
	last := t.lastKept(keep)
	room := max(width-lastStart, 1)
	line := func(cells []string) {
		var parts []string
		var tail []string // the last column's wrapped lines
		for i := range t.head {
			if !keep[i] {
				continue
			}
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			if i == last {
				tail = strings.Split(cli.Wrap(c, room, ""), "\n")
				c = tail[0]
				if t.right[i] {
					c = strings.Repeat(" ", max(widths[i]-utf8.RuneCountInString(c), 0)) + c
				}
				parts = append(parts, c)
				continue
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if t.right[i] {
				parts = append(parts, pad+c)
			} else {
				parts = append(parts, c+pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(strings.Join(parts, columnGap), " "))
		for _, l := range tail[min(1, len(tail)):] {
			fmt.Fprintln(w, strings.Repeat(" ", lastStart)+l)
		}
	}
	line(t.head)
	rule := make([]string, len(t.head))
	for i := range t.head {
		n := widths[i]
		if i == last {
			n = min(n, room)
		}
		rule[i] = strings.Repeat("-", n)
	}
	line(rule)
	for _, r := range t.rows {
		line(r)
	}
	return dropped
}

// lastKept is the index of the last column kept.
func (t *Table) lastKept(keep []bool) int {
	for i := len(keep) - 1; i >= 0; i-- {
		if keep[i] {
			return i
		}
	}
	return 0
}
