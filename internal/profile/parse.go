package profile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"strconv"
)

// Limits that bound what Parse keeps in memory.
const (
	// MaxDepth is the deepest stack kept: a deeper stack keeps its MaxDepth
	// innermost (leaf-side) frames and is counted in TruncatedSamples.
	MaxDepth = 1024
	// MaxLine is the longest input line read; the rest of a longer line is
	// skipped.
	MaxLine = 64 << 10
	// MaxName is the longest frame name kept; longer names are cut and end
	// in "...".
	MaxName = 8 << 10
	// maxPeriod caps one sample's weight so that sums cannot overflow.
	maxPeriod = 1 << 40
)

// ErrNotPerfScript is wrapped by Parse's error for input that is not the
// text output of `perf script`.
var ErrNotPerfScript = errors.New("not perf script output")

// ErrNoSamples is wrapped by Parse's error for input without any sample.
var ErrNoSamples = errors.New("no samples in perf script output")

// unknownSym is what perf prints for an address it cannot symbolize.
const unknownSym = "[unknown]"

// Frame is one distinct function name seen in a profile.
type Frame struct {
	// Name is the function name without its +0x offset, demangled if perf
	// left a legacy Rust name (_ZN…E) mangled. An unsymbolized frame in a
	// known binary is named after the binary, "[relay]", as flamegraph.pl
	// does; one with no binary either is "[unknown]". A ';' (as in the
	// Rust type [Item; 3]) becomes ':', since ';' separates frames in
	// folded stacks.
	Name string
	// DSO is the binary or library the name was first seen in (the base
	// name, e.g. "relay", "libc.so.6", "[kernel.kallsyms]"); empty for
	// inlined frames or when perf printed none.
	DSO string
	// Kernel reports whether the frame runs in the kernel: its binary is
	// [kernel.*] or its address is in the kernel half of the address space.
	Kernel bool
}

// Profile is the aggregated content of one `perf script` output: every
// distinct (thread name, stack) pair with its weight.
type Profile struct {
	// Event is the perf event the counted samples are of, as perf prints
	// it, e.g. "cpu-clock:ppp" or "cycles:P". Only samples of the first
	// event seen are counted; the others are in SkippedSamples.
	Event string
	// Samples is the number of counted samples.
	Samples int64
	// Weight is the sum of the counted samples' periods (a sample without a
	// period weighs 1). Every share is a fraction of it.
	Weight int64
	// UnknownSamples is how many counted samples have an empty stack or one
	// made only of [unknown] frames: CPU time that cannot be attributed.
	UnknownSamples int64
	// UnknownWeight is the weight of those samples.
	UnknownWeight int64
	// TruncatedSamples is how many stacks were deeper than MaxDepth.
	TruncatedSamples int64
	// SkippedSamples is how many samples were of another event than Event.
	SkippedSamples int64
	// BadLines is how many lines after the first sample could not be read
	// as a sample header or a stack frame and were skipped.
	BadLines int64

	frames []Frame
	comms  []string
	stacks []stackAgg
	arena  []int32 // frame ids of every stack, root first
}

// stackAgg is one distinct (thread, stack) with its totals.
type stackAgg struct {
	comm    int32
	off, n  int32 // frames are arena[off : off+n], root first
	weight  int64
	samples int64
}

// Frames returns every distinct frame of the profile, in no particular
// order. The slice is shared: do not modify it.
func (p *Profile) Frames() []Frame { return p.frames }

// Summary is one line for a report: the event, the sample count and how
// many samples had no usable stack.
func (p *Profile) Summary() string {
	s := fmt.Sprintf("%d samples of %s, %d (%.1f%%) with no usable stack (empty or only [unknown] frames)",
		p.Samples, orDash(p.Event), p.UnknownSamples, pct(p.UnknownWeight, p.Weight))
	if p.TruncatedSamples > 0 {
		s += fmt.Sprintf(", %d cut at %d frames", p.TruncatedSamples, MaxDepth)
	}
	if p.SkippedSamples > 0 {
		s += fmt.Sprintf(", %d samples of other events skipped", p.SkippedSamples)
	}
	if p.BadLines > 0 {
		s += fmt.Sprintf(", %d unreadable lines skipped", p.BadLines)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pct(part, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return 100 * float64(part) / float64(total)
}

// parser is the state of one Parse.
type parser struct {
	p *Profile

	names   map[string]int32 // frame name → id
	commIDs map[string]int32
	keys    map[string]int32 // stack key → index in p.stacks

	// the sample being read
	in         bool // a header was read and its sample not yet added
	skip       bool // the sample is of another event
	comm       int32
	weight     int64
	frames     []int32 // leaf first
	known      bool    // some frame was symbolized
	truncated  bool
	eventSet   bool
	keyBuf     []byte
	nameBuf    []byte
	lineNo     int64
	badStreak  bool // skipping frame lines after a bad header line
	lastNoEOL  bool
	seenHeader bool
}

// Parse reads the default text output of `perf script` (perf 6.x; also the
// output of `perf script -F comm,pid,tid,time,period,event,ip,sym,dso`,
// with or without callchains) and aggregates its samples.
//
// Each sample is a header line, "COMM PID[/TID] [CPU] TIME: [PERIOD]
// EVENT:", followed by its stack, one frame a line, leaf first, each
// "ADDR SYMBOL[+0xOFF] (DSO)", and a blank line. COMM may contain spaces.
// The input must start with a sample (comment lines starting with # may
// come first); otherwise the error wraps ErrNotPerfScript. A final sample
// cut short is kept as far as it goes.
func Parse(r io.Reader) (*Profile, error) {
	ps := &parser{
		p:       &Profile{},
		names:   make(map[string]int32),
		commIDs: make(map[string]int32),
		keys:    make(map[string]int32),
	}
	br := bufio.NewReaderSize(r, 16<<10)
	var long []byte
	for {
		line, err := readLine(br, &long)
		if len(line) > 0 || err == nil {
			ps.lineNo++
			ps.lastNoEOL = err != nil
			if perr := ps.line(line); perr != nil {
				return nil, perr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("profile: reading perf script output: %w", err)
		}
	}
	ps.flush()
	if ps.p.Samples == 0 {
		return nil, fmt.Errorf("profile: %w", ErrNoSamples)
	}
	return ps.p, nil
}

// readLine returns the next line without its newline, at most MaxLine
// bytes of it; the rest of a longer line is discarded. The slice is valid
// until the next call; long lines are assembled in *long.
func readLine(br *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// ReadSlice's buffer is reused by later reads, so copy.
		buf := append((*long)[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = br.ReadSlice('\n')
			if room := MaxLine - len(buf); room > 0 {
				buf = append(buf, line[:min(len(line), room)]...)
			}
		}
		*long = buf
		line = buf
		if err != nil && err != io.EOF {
			return nil, err
		}
	}
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	return line, err
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// line handles one input line.
func (ps *parser) line(line []byte) error {
	if isBlank(line) {
		ps.flush()
		ps.badStreak = false
		return nil
	}
	if line[0] == '\t' {
		if !ps.seenHeader {
			return ps.notPerf(line)
		}
		if ps.lastNoEOL && !bytes.HasSuffix(bytes.TrimRight(line, " \r"), []byte(")")) {
			return nil // a final frame line cut short
		}
		if ps.in {
			ps.frame(line)
			return nil
		}
		if !ps.badStreak {
			ps.p.BadLines++
			ps.badStreak = true
		}
		return nil
	}
	if !ps.seenHeader && line[0] == '#' {
		return nil // perf script --header, or a comment
	}
	h, ok := parseHeader(line)
	if !ok {
		if ps.in && line[0] == ' ' {
			ps.frame(line) // a stack frame indented with spaces
			return nil
		}
		if !ps.seenHeader {
			return ps.notPerf(line)
		}
		if ps.lastNoEOL {
			return nil // a final line cut short
		}
		ps.flush()
		ps.p.BadLines++
		ps.badStreak = true
		if ps.p.BadLines > 1000 && ps.p.BadLines > ps.p.Samples {
			return fmt.Errorf("profile: line %d: %w: %d unreadable lines, more than samples (%d)",
				ps.lineNo, ErrNotPerfScript, ps.p.BadLines, ps.p.Samples)
		}
		return nil
	}
	ps.flush()
	ps.badStreak = false
	if h.sideband {
		ps.seenHeader = true
		return nil // a side-band event shown with --show-*-events
	}
	ps.seenHeader = true
	ps.in = true
	if !ps.eventSet {
		ps.p.Event = string(h.event)
		ps.eventSet = true
	}
	ps.skip = string(h.event) != ps.p.Event
	ps.comm = ps.commID(h.comm)
	ps.weight = 1
	if h.hasPeriod {
		ps.weight = h.period
	}
	ps.frames = ps.frames[:0]
	ps.known = false
	ps.truncated = false
	if len(h.tail) > 0 {
		// A recording without callchains: the sample's one frame is on
		// its header line.
		ps.frame(h.tail)
	}
	return nil
}

func (ps *parser) notPerf(line []byte) error {
	if bytes.HasPrefix(line, []byte("PERFILE")) {
		return fmt.Errorf("profile: %w: this is a perf.data file; run perf script on it first (or use Run)", ErrNotPerfScript)
	}
	if len(line) > 80 {
		line = line[:80]
	}
	return fmt.Errorf("profile: line %d: %w: expected a sample header like \"relay 12345/12360 [001] 1234.567890: 5050505 cycles:P:\", got %q",
		ps.lineNo, ErrNotPerfScript, line)
}

func (ps *parser) commID(b []byte) int32 {
	if id, ok := ps.commIDs[string(b)]; ok {
		return id
	}
	id := int32(len(ps.p.comms))
	s := string(b)
	ps.p.comms = append(ps.p.comms, s)
	ps.commIDs[s] = id
	return id
}

// frame adds one stack line to the current sample.
func (ps *parser) frame(line []byte) {
	if len(ps.frames) >= MaxDepth {
		ps.truncated = true
		return
	}
	addr, hasAddr, sym, dso := parseFrame(line)
	if len(sym) == 0 && !hasAddr {
		return // e.g. a source line shown with -F srcline
	}
	unknown := len(sym) == 0 || string(sym) == unknownSym
	if !unknown {
		ps.known = true
	}
	ps.frames = append(ps.frames, ps.frameID(addr, hasAddr, sym, dso, unknown))
}

// frameID interns the frame's name.
func (ps *parser) frameID(addr uint64, hasAddr bool, sym, dso []byte, unknown bool) int32 {
	base := dso
	if i := bytes.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	noDSO := len(base) == 0 || string(base) == unknownSym || string(base) == "inlined"
	name := sym
	switch {
	case unknown && !noDSO && base[0] == '[':
		name = base // [kernel.kallsyms], [vdso]
	case unknown && !noDSO:
		// As flamegraph.pl: an unsymbolized frame is named after its
		// binary.
		ps.nameBuf = append(ps.nameBuf[:0], '[')
		ps.nameBuf = append(ps.nameBuf, base...)
		ps.nameBuf = append(ps.nameBuf, ']')
		name = ps.nameBuf
	case unknown:
		name = []byte(unknownSym)
	case bytes.HasPrefix(sym, []byte("_ZN")):
		if d, ok := demangleRust(sym, ps.nameBuf[:0]); ok {
			ps.nameBuf = d
			name = d
		}
	}
	if len(name) > MaxName || bytes.IndexByte(name, ';') >= 0 {
		// Cut long names; ';' separates frames in folded stacks.
		if len(name) > MaxName {
			name = append(append([]byte(nil), name[:MaxName-3]...), "..."...)
		} else {
			name = append([]byte(nil), name...)
		}
		for i, c := range name {
			if c == ';' {
				name[i] = ':'
			}
		}
	}
	if id, ok := ps.names[string(name)]; ok {
		return id
	}
	id := int32(len(ps.p.frames))
	f := Frame{Name: string(name)}
	if !noDSO {
		f.DSO = string(base)
	}
	f.Kernel = bytes.HasPrefix(base, []byte("[kernel")) ||
		(hasAddr && addr >= 0xffff800000000000 && addr != 0xffffffffffffffff)
	ps.p.frames = append(ps.p.frames, f)
	ps.names[f.Name] = id
	return id
}

// flush adds the current sample, if any, to the profile.
func (ps *parser) flush() {
	if !ps.in {
		return
	}
	ps.in = false
	p := ps.p
	if ps.skip {
		p.SkippedSamples++
		return
	}
	w := ps.weight
	p.Samples++
	p.Weight = satAdd(p.Weight, w)
	if !ps.known {
		p.UnknownSamples++
		p.UnknownWeight = satAdd(p.UnknownWeight, w)
	}
	if ps.truncated {
		p.TruncatedSamples++
	}
	// The key: thread id, then frame ids root first.
	key := ps.keyBuf[:0]
	key = binary.LittleEndian.AppendUint32(key, uint32(ps.comm))
	for i := len(ps.frames) - 1; i >= 0; i-- {
		key = binary.LittleEndian.AppendUint32(key, uint32(ps.frames[i]))
	}
	ps.keyBuf = key
	if i, ok := ps.keys[string(key)]; ok {
		s := &p.stacks[i]
		s.weight = satAdd(s.weight, w)
		s.samples++
		return
	}
	off := int32(len(p.arena))
	for i := len(ps.frames) - 1; i >= 0; i-- {
		p.arena = append(p.arena, ps.frames[i])
	}
	ps.keys[string(key)] = int32(len(p.stacks))
	p.stacks = append(p.stacks, stackAgg{comm: ps.comm, off: off, n: int32(len(ps.frames)), weight: w, samples: 1})
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// header is a parsed sample header line.
type header struct {
	comm      []byte
	event     []byte
	period    int64
	hasPeriod bool
	tail      []byte // what follows the event: the frame of a sample without callchain
	sideband  bool   // a PERF_RECORD_* line, not a sample
}

// parseHeader reads "COMM PID[/TID] [CPU] TIME: [PERIOD] EVENT: [TAIL]".
// COMM may contain spaces (and perf right-aligns it without callchains), so
// the line is anchored on the first TIME token ("123.456789:") preceded by a
// PID token, with an optional [CPU] token between them.
func parseHeader(line []byte) (header, bool) {
	var h header
	type tok struct{ s, e int }
	var toks [40]tok
	n := 0
	for i := 0; i < len(line) && n < len(toks); {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i >= len(line) {
			break
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		toks[n] = tok{i, j}
		n++
		i = j
	}
	t := func(k int) []byte { return line[toks[k].s:toks[k].e] }
	ti := -1
	for k := 1; k < n; k++ {
		if !isTime(t(k)) {
			continue
		}
		j := k - 1
		if isCPU(t(j)) {
			j--
		}
		if j >= 1 && isPID(t(j)) {
			h.comm = bytes.TrimRight(line[toks[0].s:toks[j].s], " \t")
			ti = k
			break
		}
	}
	if ti < 0 {
		return h, false
	}
	k := ti + 1
	if k < n && bytes.HasPrefix(t(k), []byte("PERF_RECORD_")) {
		h.sideband = true
		return h, true
	}
	if k < n && isDigits(t(k)) {
		v, err := strconv.ParseInt(string(t(k)), 10, 64)
		if err != nil || v > maxPeriod {
			v = maxPeriod
		}
		h.period, h.hasPeriod = v, true
		k++
	}
	if k < n {
		ev := t(k)
		if len(ev) > 1 && ev[len(ev)-1] == ':' {
			h.event = ev[:len(ev)-1]
			k++
		}
	}
	if k < n && h.event != nil {
		tail := line[toks[k].s:]
		// Only a frame ("ADDR SYM (DSO)") is a tail worth keeping; a
		// tracepoint's arguments are not.
		if sp := bytes.IndexAny(tail, " \t"); sp > 0 && isHex(tail[:sp]) {
			h.tail = tail
		} else if sp < 0 && isHex(tail) {
			h.tail = tail
		}
	}
	return h, true
}

func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func isHex(b []byte) bool {
	if len(b) == 0 || len(b) > 16 {
		return false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// isTime reports whether b is "SECONDS.FRACTION:".
func isTime(b []byte) bool {
	if len(b) < 4 || b[len(b)-1] != ':' {
		return false
	}
	b = b[:len(b)-1]
	dot := bytes.IndexByte(b, '.')
	return dot > 0 && isDigits(b[:dot]) && isDigits(b[dot+1:])
}

// isCPU reports whether b is "[001]".
func isCPU(b []byte) bool {
	return len(b) >= 3 && b[0] == '[' && b[len(b)-1] == ']' && isDigits(b[1:len(b)-1])
}

// isPID reports whether b is "PID" or "PID/TID" (perf prints -1 for an
// unknown one).
func isPID(b []byte) bool {
	num := func(b []byte) bool {
		if len(b) > 0 && b[0] == '-' {
			b = b[1:]
		}
		return isDigits(b)
	}
	if i := bytes.IndexByte(b, '/'); i >= 0 {
		return num(b[:i]) && num(b[i+1:])
	}
	return num(b)
}

// parseFrame reads one stack line: "ADDR SYM[+0xOFF] (DSO)". SYM may
// contain spaces and parentheses; DSO is the last parenthesized group,
// preceded by a space, that ends the line.
func parseFrame(line []byte) (addr uint64, hasAddr bool, sym, dso []byte) {
	line = bytes.TrimSpace(line)
	if n := len(line); n > 0 && line[n-1] == ')' {
		depth := 0
		for i := n - 1; i >= 0; i-- {
			switch line[i] {
			case ')':
				depth++
			case '(':
				depth--
			}
			if depth == 0 {
				if i > 0 && line[i-1] == ' ' {
					dso = line[i+1 : n-1]
					line = bytes.TrimRight(line[:i-1], " ")
				} else if i == 0 {
					dso = line[1 : n-1]
					line = nil
				}
				break
			}
		}
	}
	sp := bytes.IndexByte(line, ' ')
	first := line
	if sp >= 0 {
		first = line[:sp]
	}
	if isHex(first) {
		if v, err := strconv.ParseUint(string(first), 16, 64); err == nil {
			addr, hasAddr = v, true
			line = line[len(first):]
			for len(line) > 0 && line[0] == ' ' {
				line = line[1:]
			}
		}
	}
	sym = stripOffset(line)
	return addr, hasAddr, sym, dso
}

// stripOffset removes a trailing "+0x1a2b" from a symbol.
func stripOffset(sym []byte) []byte {
	i := bytes.LastIndex(sym, []byte("+0x"))
	if i <= 0 || i+3 == len(sym) {
		return sym
	}
	for _, c := range sym[i+3:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return sym
		}
	}
	return sym[:i]
}
