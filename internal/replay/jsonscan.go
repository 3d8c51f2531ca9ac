package replay

// A small JSON token scanner: it walks one JSON value, checks its syntax,
// and reports every object member with its key and where its value lies,
// so that values can be replaced in place without re-marshalling.

// maxDepth bounds the nesting walkJSON follows; deeper input is treated as
// not JSON (its item is then replayed untouched).
const maxDepth = 256

// member is one object member found by walkJSON.
type member struct {
	key    []byte // the key's raw contents, without quotes (escapes not decoded)
	parent []byte // the key of the member whose value holds this object (nil at the top, kept through arrays)
	depth  int    // 1 for the members of the top-level object
	// start and end bound the value in the input, quotes included for a string.
	start, end int
}

// walker walks one JSON text.
type walker struct {
	b     []byte
	visit func(m *member)
	m     member
}

// walkJSON checks that b is one JSON value surrounded by optional
// whitespace and calls visit for every object member, in input order (a
// member is visited after its value has been scanned). visit must not keep
// m. It reports false, having visited some members, when b is not JSON.
func walkJSON(b []byte, visit func(m *member)) bool {
	w := walker{b: b, visit: visit}
	i := skipWS(b, 0)
	end, ok := w.value(i, 0, nil)
	if !ok {
		return false
	}
	return skipWS(b, end) == len(b)
}

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// value scans the value at b[i] (no leading whitespace) inside depth levels
// of nesting; parent is the key whose value it is.
func (w *walker) value(i, depth int, parent []byte) (int, bool) {
	b := w.b
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		end, _, ok := scanString(b, i)
		return end, ok
	case c == '{':
		if depth >= maxDepth {
			return i, false
		}
		return w.object(i, depth+1, parent)
	case c == '[':
		if depth >= maxDepth {
			return i, false
		}
		return w.array(i, depth+1, parent)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(b, i)
	}
	return i, false
}

func (w *walker) object(i, depth int, parent []byte) (int, bool) {
	b := w.b
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		keyEnd, _, ok := scanString(b, i)
		if !ok {
			return keyEnd, false
		}
		key := b[i+1 : keyEnd-1]
		i = skipWS(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return i, false
		}
		start := skipWS(b, i+1)
		end, ok := w.value(start, depth, key)
		if !ok {
			return end, false
		}
		w.m = member{key: key, parent: parent, depth: depth, start: start, end: end}
		w.visit(&w.m)
		var more bool
		if i, more, ok = afterValue(b, end, '}'); !more {
			return i, ok
		}
	}
}

func (w *walker) array(i, depth int, parent []byte) (int, bool) {
	b := w.b
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		end, ok := w.value(i, depth, parent)
		if !ok {
			return end, false
		}
		var more bool
		if i, more, ok = afterValue(b, end, ']'); !more {
			return i, ok
		}
	}
}

// afterValue reads what follows a member or element ending at end: a comma
// (more: i is where the next one starts) or the closing byte (done: i is
// past it); anything else is malformed.
func afterValue(b []byte, end int, closing byte) (i int, more, ok bool) {
	i = skipWS(b, end)
	switch {
	case i >= len(b):
		return i, false, false
	case b[i] == ',':
		return skipWS(b, i+1), true, true
	case b[i] == closing:
		return i + 1, false, true
	}
	return i, false, false
}

// scanString scans the string whose opening quote is at b[i] and returns
// the offset after its closing quote and whether it holds escapes.
func scanString(b []byte, i int) (end int, escaped, ok bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return len(b), escaped, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(b) || !allHex(b[i+2:i+6]) {
					return i, escaped, false
				}
				i += 5
			default:
				return i, escaped, false
			}
		case c < 0x20:
			return i, escaped, false
		}
	}
	return len(b), escaped, false
}

// scanNumber scans the JSON number at b[i].
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func allHex(b []byte) bool {
	for _, c := range b {
		if !isHex(c) {
			return false
		}
	}
	return true
}
