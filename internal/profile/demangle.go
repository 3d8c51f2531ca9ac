package profile

import "bytes"

// demangleRust appends the demangled form of a legacy-mangled Rust symbol
// ("_ZN8relay_ua16parse_user_agent17h0123456789abcdefE") to dst, without the
// trailing hash: "relay_ua::parse_user_agent". It reports false, leaving
// the name to the caller as it was, for anything else (C++ names also
// start with _ZN but have no trailing 17h… hash segment). perf demangles by itself; this covers a perf
// built without a Rust demangler. v0 names (_R…) are left mangled.
func demangleRust(sym, dst []byte) ([]byte, bool) {
	s := sym[3:]
	start := len(dst)
	var segs int
	hashed := false
	for len(s) > 0 && s[0] != 'E' {
		n := 0
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			n = n*10 + int(s[i]-'0')
			i++
			if n > len(s) {
				return dst[:start], false
			}
		}
		if i == 0 || n == 0 || i+n > len(s) {
			return dst[:start], false
		}
		seg := s[i : i+n]
		s = s[i+n:]
		if len(s) > 0 && s[0] == 'E' && isRustHash(seg) {
			hashed = true
			break
		}
		if segs > 0 {
			dst = append(dst, "::"...)
		}
		segs++
		var ok bool
		if dst, ok = unescapeRust(seg, dst); !ok {
			return dst[:start], false
		}
	}
	if !hashed || len(s) == 0 || s[0] != 'E' || segs == 0 {
		return dst[:start], false
	}
	// A suffix such as ".llvm.123" (LTO) says nothing to a reader; keep
	// others (".cold").
	if rest := s[1:]; len(rest) > 0 && !bytes.HasPrefix(rest, []byte(".llvm.")) {
		dst = append(dst, rest...)
	}
	return dst, true
}

func isRustHash(seg []byte) bool {
	if len(seg) != 17 || seg[0] != 'h' {
		return false
	}
	return isHex(seg[1:])
}

// rustEscapes are the $…$ escapes of legacy Rust mangling.
var rustEscapes = map[string]byte{
	"SP": '@', "BP": '*', "RF": '&', "LT": '<', "GT": '>', "LP": '(', "RP": ')', "C": ',',
}

// unescapeRust appends one path segment with its escapes decoded.
func unescapeRust(seg, dst []byte) ([]byte, bool) {
	if len(seg) > 1 && seg[0] == '_' && seg[1] == '$' {
		seg = seg[1:]
	}
	for len(seg) > 0 {
		switch {
		case seg[0] == '$':
			end := bytes.IndexByte(seg[1:], '$')
			if end < 0 {
				return dst, false
			}
			code := seg[1 : 1+end]
			seg = seg[end+2:]
			if c, ok := rustEscapes[string(code)]; ok {
				dst = append(dst, c)
				continue
			}
			if len(code) >= 2 && code[0] == 'u' && isHex(code[1:]) && len(code) <= 7 {
				var r rune
				for _, h := range code[1:] {
					r = r<<4 | rune(hexVal(h))
				}
				if r < 0x20 || r > 0x10ffff {
					return dst, false
				}
				dst = append(dst, string(r)...)
				continue
			}
			return dst, false
		case len(seg) > 1 && seg[0] == '.' && seg[1] == '.':
			dst = append(dst, "::"...)
			seg = seg[2:]
		default:
			dst = append(dst, seg[0])
			seg = seg[1:]
		}
	}
	return dst, true
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
