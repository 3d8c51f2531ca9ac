package useragent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Weighted is one agent of a list and its share of the draws.
type Weighted struct {
	UA string `json:"ua"`
	// Weight is the agent's share relative to the others' (> 0), or 0
	// when the list gives no weights: then its rank decides.
	Weight float64 `json:"weight,omitempty"`
}

// Bounds of a list: an agent longer than MaxLength bytes is no real one
// (and many servers refuse such a header); MaxList agents are more than a
// pool has entries.
const (
	MaxLength = 2048
	MaxList   = 1_000_000
	maxLine   = 64 << 10 // a line, comments included
)

// LineError is a line of a list that ParseList refuses.
type LineError struct {
	Name string // the list's name, e.g. its file
	Line int    // 1-based; 0 for the list as a whole
	Err  error
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return e.Name + ": " + e.Err.Error()
	}
	return e.Name + ":" + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

func (e *LineError) Unwrap() error { return e.Err }

// ParseList reads a list of agents: one per line, optionally followed by a
// TAB and a weight (a positive number); blank lines and lines whose first
// non-blank character is '#' are skipped, spaces around an agent or weight
// are dropped, a UTF-8 byte order mark is allowed. Either every agent has a
// weight or none has. An agent given twice, a bad weight, an agent that
// cannot be sent as a header (see Check) or a list without agents is a
// *LineError that names the list (name) and the line.
func ParseList(r io.Reader, name string) ([]Weighted, error) {
	return parseList(r, name, MaxList)
}

// parseList is ParseList with at most limit agents.
func parseList(r io.Reader, name string, limit int) ([]Weighted, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	var out []Weighted
	seen := map[string]int{} // agent → its line
	weighted, first := false, 0
	total := 0.0
	n := 0
	for sc.Scan() {
		n++
		fail := func(format string, a ...any) error {
			return &LineError{Name: name, Line: n, Err: fmt.Errorf(format, a...)}
		}
		line := sc.Text()
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if t := strings.TrimSpace(line); t == "" || t[0] == '#' {
			continue
		}
		ua, weight, hasWeight := strings.Cut(line, "\t")
		ua = strings.TrimSpace(ua)
		if strings.Contains(weight, "\t") {
			return nil, fail("more than one tab: want AGENT or AGENT<TAB>WEIGHT")
		}
		if err := Check(ua); err != nil {
			return nil, fail("%w", err)
		}
		w := Weighted{UA: ua}
		if hasWeight {
			s := strings.TrimSpace(weight)
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || !(v > 0) || math.IsInf(v, 0) {
				return nil, fail("weight %q: want a positive number", s)
			}
			w.Weight = v
			if total += v; math.IsInf(total, 0) {
				return nil, fail("the weights add up to more than a float64 holds")
			}
		}
		switch {
		case first == 0:
			first, weighted = n, hasWeight
		case hasWeight && !weighted:
			return nil, fail("a weight, but line %d has none: give every agent a weight, or none", first)
		case !hasWeight && weighted:
			return nil, fail("no weight, but line %d has one: give every agent a weight, or none", first)
		}
		if prev, dup := seen[ua]; dup {
			return nil, fail("the agent of line %d again", prev)
		}
		if len(out) == limit {
			return nil, fail("more than %d agents", limit)
		}
		seen[ua] = n
		out = append(out, w)
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, &LineError{Name: name, Line: n + 1, Err: fmt.Errorf("line longer than %d bytes", maxLine)}
	} else if err != nil {
		return nil, &LineError{Name: name, Err: err}
	}
	if len(out) == 0 {
		return nil, &LineError{Name: name, Err: errors.New("no agents (only blank lines and # comments)")}
	}
	return out, nil
}

// ReadFile parses the list in the file at path (see ParseList); errors
// name the file by path.
func ReadFile(path string) ([]Weighted, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseList(f, path)
}

// Check reports why ua cannot be sent as a User-Agent and written into a
// payload: empty, longer than MaxLength bytes, not UTF-8, a control
// character, or spaces around it.
func Check(ua string) error {
	switch {
	case ua == "":
		return errors.New("no agent")
	case len(ua) > MaxLength:
		return fmt.Errorf("agent of %d bytes: want at most %d", len(ua), MaxLength)
	case !utf8.ValidString(ua):
		return errors.New("agent is not UTF-8")
	case strings.TrimSpace(ua) != ua:
		return errors.New("spaces around the agent")
	}
	for _, c := range ua {
		if c < 0x20 || c == 0x7f || c >= 0x80 && c < 0xa0 {
			return fmt.Errorf("agent has control character %U", c)
		}
	}
	return nil
}
