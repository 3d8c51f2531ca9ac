package profile

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FlameOptions says how WriteFlameSVG draws.
type FlameOptions struct {
	// Title is drawn at the top; default "Flame graph".
	Title string
	// Subtitle is drawn under the title; default Profile.Summary.
	Subtitle string
	// Width is the image width in pixels; default 1200.
	Width int
	// Icicle puts the root at the top and callees below it; the default is
	// a flame graph, root at the bottom.
	Icicle bool
	// MinPercent omits frames narrower than this share of all samples
	// (their time stays in their caller's width); default 0.1.
	MinPercent float64
	// MaxRects caps the number of frames drawn, the widest kept; default
	// 8000. Tooltips are cut at 600 characters, so a box takes at most
	// a few KB and the output is bounded (BenchmarkWriteFlameSVG).
	MaxRects int
	// Groups color the frames: a frame matching a group (the first, in
	// order) gets that group's hue family, a frame matching none the hue
	// of its nearest caller that matched one, else grey. Nil means
	// DefaultGroups; an empty non-nil slice colors everything grey.
	Groups []Group
	// Highlight names a group whose frames give their hue to everything
	// they call, so that the whole of that work stands out (the regex
	// matching under user-agent parsing is drawn as user-agent parsing).
	// Default GroupUserAgent; "-" for none.
	Highlight string
}

const (
	frameH     = 16
	fontSize   = 12
	charW      = 0.59 * fontSize // average advance of sans-serif at fontSize
	padX       = 10
	headH      = 56
	legendH    = 44
	maxTooltip = 600 // characters of a name in a tooltip
)

// rect is one frame drawn.
type rect struct {
	depth   int
	x, w    int64 // in weight units
	samples int64
	key     int32 // frame id, or -1-commID for a thread, or rootKey
	group   int   // index into groups, -1 for none
}

const rootKey = math.MinInt32

// WriteFlameSVG draws the profile as a static flame graph: one box per
// frame, as wide as its share of the samples, callers below callees (or
// above, with Icicle), siblings in name order. The root is "all"; its
// children are the threads (perf's comm). Each box has a <title> tooltip
// with the name, the samples and the percentage; its label is cut to fit.
// Colors are deterministic: a hue family per group (see FlameOptions), the
// shade from a hash of the name. The output is self-contained SVG 1.1 with
// a generic sans-serif font.
func (p *Profile) WriteFlameSVG(w io.Writer, opt FlameOptions) error {
	opt, groups, highlight := opt.withDefaults()
	if opt.Subtitle == "" {
		opt.Subtitle = p.Summary()
	}
	own := make([]int8, len(p.frames))
	for id, f := range p.frames {
		own[id] = -1
		for gi, g := range groups {
			if gi < 127 && g.Match != nil && g.Match(f) {
				own[id] = int8(gi)
				break
			}
		}
	}
	rects := p.layout(own, highlight, opt.MinPercent, opt.MaxRects)
	maxDepth := 0
	for _, r := range rects {
		maxDepth = max(maxDepth, r.depth)
	}
	levels := maxDepth + 1
	height := headH + levels*frameH + legendH
	scale := 0.0
	if p.Weight > 0 {
		scale = float64(opt.Width-2*padX) / float64(p.Weight)
	}

	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d">
<style>text{font-family:sans-serif;font-size:%dpx;fill:#000}.t{font-size:17px;text-anchor:middle}.s{fill:#555}rect.f{stroke:#fff;stroke-width:0.5}</style>
<rect x="0" y="0" width="%d" height="%d" fill="#fafafa"/>
`, opt.Width, height, opt.Width, height, fontSize, opt.Width, height)
	bw.WriteString(`<text class="t" x="` + itoa(opt.Width/2) + `" y="24">`)
	escape(bw, opt.Title, 300)
	bw.WriteString("</text>\n<text class=\"s\" x=\"" + itoa(padX) + "\" y=\"44\">")
	escape(bw, opt.Subtitle, 400)
	bw.WriteString("</text>\n<g>\n")
	for _, r := range rects {
		y := headH + (maxDepth-r.depth)*frameH
		if opt.Icicle {
			y = headH + r.depth*frameH
		}
		p.writeRect(bw, r, padX+float64(r.x)*scale, float64(r.w)*scale, y, groups)
	}
	bw.WriteString("</g>\n")
	writeLegend(bw, p.Groups(groups), groups, headH+levels*frameH+16, opt.Width)
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// withDefaults fills the options' defaults and returns the groups that
// color the frames and the index of the highlighted one (-1: none).
func (opt FlameOptions) withDefaults() (FlameOptions, []Group, int) {
	if opt.Title == "" {
		opt.Title = "Flame graph"
	}
	if opt.Width <= 0 {
		opt.Width = 1200
	}
	opt.Width = max(opt.Width, 200)
	if opt.MinPercent <= 0 {
		opt.MinPercent = 0.1
	}
	if opt.MaxRects <= 0 {
		opt.MaxRects = 8000
	}
	groups := opt.Groups
	if groups == nil {
		groups = DefaultGroups()
	}
	if opt.Highlight == "" {
		opt.Highlight = GroupUserAgent
	}
	highlight := -1
	for i, g := range groups {
		if g.Name == opt.Highlight {
			highlight = i
		}
	}
	return opt, groups, highlight
}

// writeRect draws one frame: its box, a tooltip and the label that fits.
func (p *Profile) writeRect(bw *bufio.Writer, r rect, x, wd float64, y int, groups []Group) {
	name := p.rectName(r)
	col := "rgb(220,220,220)"
	if r.key != rootKey {
		col = color(name, r.group, groups)
	}
	bw.WriteString("<g><title>")
	escape(bw, name, maxTooltip)
	bw.WriteString(" (" + samplesString(r.samples) + ", " + pctString(r.w, p.Weight) + ")")
	if r.group >= 0 {
		bw.WriteString(" [")
		escape(bw, groups[r.group].Name, 100)
		bw.WriteString("]")
	}
	bw.WriteString(`</title><rect class="f" x="` + ftoa(x) + `" y="` + itoa(y) + `" width="` + ftoa(wd) +
		`" height="` + itoa(frameH-1) + `" fill="` + col + `"/>`)
	if label := fit(name, wd); label != "" {
		bw.WriteString(`<text x="` + ftoa(x+3) + `" y="` + itoa(y+frameH-4) + `">`)
		escape(bw, label, len(label))
		bw.WriteString("</text>")
	}
	bw.WriteString("</g>\n")
}

// writeLegend draws one swatch per group with its inclusive share,
// wrapping at the image's width.
func writeLegend(bw *bufio.Writer, shares []GroupShare, groups []Group, y, width int) {
	x := float64(padX)
	for gi, g := range groups {
		label := fmt.Sprintf("%s %.1f%%", g.Name, shares[gi].Inclusive)
		wd := 18 + float64(utf8.RuneCountInString(label))*charW + 14
		if x+wd > float64(width-padX) {
			x = padX
			y += 18
		}
		bw.WriteString(`<rect x="` + ftoa(x) + `" y="` + itoa(y-11) + `" width="14" height="14" fill="` + baseColor(gi, groups) + `"/>`)
		bw.WriteString(`<text x="` + ftoa(x+18) + `" y="` + itoa(y) + `">`)
		escape(bw, label, 200)
		bw.WriteString("<title>")
		escape(bw, g.Desc, 300)
		bw.WriteString("</title></text>\n")
		x += wd
	}
}

// rectName is the name shown for a rect.
func (p *Profile) rectName(r rect) string {
	switch {
	case r.key == rootKey:
		return "all"
	case r.key < 0:
		return p.comms[-1-r.key]
	default:
		return p.frames[r.key].Name
	}
}

// layout merges the sorted stacks into boxes: a box per run of stacks that
// share a path from the root, kept when at least minPct of the total wide,
// at most maxRects of them, the widest first.
func (p *Profile) layout(own []int8, highlight int, minPct float64, maxRects int) []rect {
	if p.Weight <= 0 {
		return nil
	}
	minW := int64(math.Ceil(minPct / 100 * float64(p.Weight)))
	minW = max(minW, 1)
	type openNode struct {
		key           int32
		x, samples    int64
		group         int
		inHighlighted bool
	}
	var rects []rect
	var open []openNode
	var x, samples int64
	closeTo := func(n int) {
		for len(open) > n {
			o := open[len(open)-1]
			open = open[:len(open)-1]
			if w := x - o.x; w >= minW {
				rects = append(rects, rect{depth: len(open), x: o.x, w: w, samples: samples - o.samples, key: o.key, group: o.group})
			}
		}
	}
	push := func(key int32) {
		parent := openNode{group: -1}
		if len(open) > 0 {
			parent = open[len(open)-1]
		}
		n := openNode{key: key, x: x, samples: samples, group: parent.group, inHighlighted: parent.inHighlighted}
		if key >= 0 {
			switch g := int(own[key]); {
			case parent.inHighlighted:
			case g >= 0:
				n.group = g
				n.inHighlighted = g == highlight
			}
		}
		open = append(open, n)
	}
	push(rootKey)
	for _, si := range p.order() {
		s := &p.stacks[si]
		fs := p.arena[s.off : s.off+s.n]
		path := func(d int) int32 { // the key at depth d >= 1
			if d == 1 {
				return -1 - s.comm
			}
			return fs[d-2]
		}
		depth := 2 + len(fs)
		k := 1
		for k < len(open) && k < depth && open[k].key == path(k) {
			k++
		}
		closeTo(k)
		for d := k; d < depth; d++ {
			push(path(d))
		}
		x = satAdd(x, s.weight)
		samples += s.samples
	}
	closeTo(0)
	// Keep the widest; a caller is never narrower than its callee, and at
	// equal width the shallower comes first, so no box loses its caller.
	slices.SortFunc(rects, func(a, b rect) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		if c := cmp.Compare(a.depth, b.depth); c != 0 {
			return c
		}
		return cmp.Compare(a.x, b.x)
	})
	if len(rects) > maxRects {
		rects = rects[:maxRects]
	}
	slices.SortFunc(rects, func(a, b rect) int {
		if c := cmp.Compare(a.depth, b.depth); c != 0 {
			return c
		}
		return cmp.Compare(a.x, b.x)
	})
	return rects
}

// fit returns as much of name as fits in a box wd pixels wide, cut with
// "..", or "" when not even three characters fit.
func fit(name string, wd float64) string {
	n := int((wd - 6) / charW)
	if n < 3 {
		return ""
	}
	if utf8.RuneCountInString(name) <= n {
		return name
	}
	i, c := 0, 0
	for i < len(name) && c < n-2 {
		_, sz := utf8.DecodeRuneInString(name[i:])
		i += sz
		c++
	}
	return name[:i] + ".."
}

// hueFamily is a range of HSL colors for a group.
type hueFamily struct {
	hue, hueSpan float64
	sat, light   float64 // base saturation and lightness, 0..1
}

// families are the hue families of the default groups: user-agent parsing
// in a saturated magenta no other family comes near.
var families = map[string]hueFamily{
	GroupUserAgent:     {300, 18, 0.85, 0.58},
	GroupPII:           {208, 14, 0.65, 0.62},
	GroupNormalization: {172, 14, 0.55, 0.52},
	GroupJSON:          {105, 22, 0.55, 0.55},
	GroupCompression:   {28, 10, 0.55, 0.45},
	GroupSigning:       {50, 8, 0.85, 0.55},
	GroupRegex:         {250, 14, 0.55, 0.66},
	GroupAllocation:    {0, 8, 0.70, 0.62},
	GroupKernel:        {200, 10, 0.32, 0.60},
}

// neutral is the family of frames in no group.
var neutral = hueFamily{38, 12, 0.14, 0.80}

func family(gi int, groups []Group) hueFamily {
	if gi < 0 || gi >= len(groups) {
		return neutral
	}
	if f, ok := families[groups[gi].Name]; ok {
		return f
	}
	// A group of the caller's own: hues spread by golden angle.
	return hueFamily{math.Mod(80+float64(gi)*137.508, 360), 10, 0.6, 0.6}
}

// color is a frame's fill: its group's family, the shade from the name.
func color(name string, gi int, groups []Group) string {
	f := family(gi, groups)
	h := fnv.New64a()
	h.Write([]byte(name))
	v := h.Sum64()
	u1 := float64(v&0xffff) / 0xffff
	u2 := float64(v>>16&0xffff) / 0xffff
	u3 := float64(v>>32&0xffff) / 0xffff
	return hsl(f.hue+(u1-0.5)*f.hueSpan, clamp01(f.sat+(u2-0.5)*0.15), clamp01(f.light+(u3-0.5)*0.14))
}

func baseColor(gi int, groups []Group) string {
	f := family(gi, groups)
	return hsl(f.hue, f.sat, f.light)
}

func clamp01(v float64) float64 { return math.Max(0, math.Min(1, v)) }

// hsl formats an HSL color as rgb(r,g,b).
func hsl(h, s, l float64) string {
	h = math.Mod(math.Mod(h, 360)+360, 360) / 360
	var r, g, b float64
	if s == 0 {
		r, g, b = l, l, l
	} else {
		q := l * (1 + s)
		if l >= 0.5 {
			q = l + s - l*s
		}
		pp := 2*l - q
		r = hue2rgb(pp, q, h+1.0/3)
		g = hue2rgb(pp, q, h)
		b = hue2rgb(pp, q, h-1.0/3)
	}
	c := func(v float64) string { return strconv.Itoa(int(math.Round(clamp01(v) * 255))) }
	return "rgb(" + c(r) + "," + c(g) + "," + c(b) + ")"
}

func hue2rgb(p, q, t float64) float64 {
	if t < 0 {
		t++
	}
	if t > 1 {
		t--
	}
	switch {
	case t < 1.0/6:
		return p + (q-p)*6*t
	case t < 0.5:
		return q
	case t < 2.0/3:
		return p + (q-p)*(2.0/3-t)*6
	}
	return p
}

// escape writes s, cut to max runes, as XML character data.
func escape(w *bufio.Writer, s string, max int) {
	if utf8.RuneCountInString(s) > max {
		i, c := 0, 0
		for i < len(s) && c < max-3 {
			_, sz := utf8.DecodeRuneInString(s[i:])
			i += sz
			c++
		}
		s = s[:i] + "..."
	}
	xml.EscapeText(w, []byte(s)) // replaces what XML cannot carry with U+FFFD
}

func itoa(v int) string { return strconv.Itoa(v) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func pctString(part, total int64) string {
	return strconv.FormatFloat(pct(part, total), 'f', 2, 64) + "%"
}

func samplesString(n int64) string {
	if n == 1 {
		return "1 sample"
	}
	return commas(n) + " samples"
}

// commas formats 1234567 as "1,234,567".
func commas(v int64) string {
	s := strconv.FormatInt(v, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
