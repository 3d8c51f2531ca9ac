package profile

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// svgBox is one frame box of a flame graph SVG.
type svgBox struct {
	title string
	x, y  float64
	w     float64
	fill  string
	label string
}

// parseSVG checks that b is well-formed XML and returns its frame boxes
// (the <g> elements with a <title> and a <rect>).
func parseSVG(t testing.TB, b []byte) []svgBox {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	var boxes []svgBox
	var cur *svgBox
	var path []string
	var text strings.Builder
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			path = append(path, tok.Name.Local)
			text.Reset()
			if tok.Name.Local == "g" && len(path) == 3 {
				cur = &svgBox{}
			}
			if tok.Name.Local == "rect" && cur != nil {
				for _, a := range tok.Attr {
					v, _ := strconv.ParseFloat(a.Value, 64)
					switch a.Name.Local {
					case "x":
						cur.x = v
					case "y":
						cur.y = v
					case "width":
						cur.w = v
					case "fill":
						cur.fill = a.Value
					}
				}
			}
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			switch {
			case cur != nil && tok.Name.Local == "title":
				cur.title = text.String()
			case cur != nil && tok.Name.Local == "text":
				cur.label = text.String()
			case cur != nil && tok.Name.Local == "g" && len(path) == 3:
				boxes = append(boxes, *cur)
				cur = nil
			}
			path = path[:len(path)-1]
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return boxes
}

func svg(t testing.TB, p *Profile, opt FlameOptions) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := p.WriteFlameSVG(&b, opt); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func boxNamed(boxes []svgBox, prefix string) *svgBox {
	for i := range boxes {
		if strings.HasPrefix(boxes[i].title, prefix) {
			return &boxes[i]
		}
	}
	return nil
}

func TestFlameSVG(t *testing.T) {
	p := parseFile(t, "hand-cycles.perf.txt")
	out := svg(t, p, FlameOptions{Title: "hand <cycles> & co"})
	// The title is escaped; the subtitle defaults to the profile's summary.
	if !strings.Contains(string(out), "hand &lt;cycles&gt; &amp; co") || !strings.Contains(string(out), p.Summary()) {
		t.Errorf("title or subtitle missing:\n%.600s", out)
	}
	boxes := parseSVG(t, out)
	wantTitles := []string{
		"all (7 samples, 100.00%)",
		"tokio-runtime-w (6 samples, 68.42%)",
		"relay-pool 3 (1 sample, 31.58%)",
		pe + " (3 samples, 47.37%)",
		pe + " (1 sample, 31.58%)",
		"relay_ua::parse_user_agent (1 sample, 10.53%) [user-agent]",
		"relay_event_normalization::normalize::user_agent::normalize_user_agent_info_generic (1 sample, 10.53%) [user-agent]",
		"__schedule (1 sample, 31.58%) [kernel]",
		"malloc (1 sample, 15.79%) [allocation]",
		"std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&) (1 sample, 15.79%)",
		"[relay] (1 sample, 5.26%)",
	}
	for _, w := range wantTitles {
		if boxNamed(boxes, w) == nil || boxNamed(boxes, w).title != w {
			t.Errorf("no box titled %q", w)
		}
	}
	// process_envelope appears once under tokio-runtime-w and once under
	// relay-pool 3: 20 boxes for 19 distinct frames.
	if len(boxes) != 20 {
		t.Errorf("%d boxes, want 20", len(boxes))
	}
	for _, s := range []string{"font-family:sans-serif", "hand &lt;cycles&gt; &amp; co", "user-agent 10.5%", "kernel 31.6%"} {
		if !bytes.Contains(out, []byte(s)) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	all := boxNamed(boxes, "all ")
	ua := boxNamed(boxes, "relay_ua::")
	pool := boxNamed(boxes, "relay-pool 3")
	if all == nil || ua == nil || pool == nil {
		t.Fatal("boxes missing")
	}
	// Widths are proportional to weight: 1180 px for 9500.
	if w := 1180 * 1000.0 / 9500; ua.w < w-0.1 || ua.w > w+0.1 {
		t.Errorf("relay_ua box %.1f px wide, want %.1f", ua.w, w)
	}
	// Flame orientation: the root at the bottom, callees above.
	if !(all.y > pool.y && pool.y > ua.y) {
		t.Errorf("flame orientation: y all %.0f, thread %.0f, leaf %.0f", all.y, pool.y, ua.y)
	}
	// User-agent frames are magenta: red and blue above green.
	var r, g, b int
	if _, err := fmt.Sscanf(ua.fill, "rgb(%d,%d,%d)", &r, &g, &b); err != nil || !(r > g+60 && b > g+60) {
		t.Errorf("user-agent fill %s is not magenta", ua.fill)
	}
	// Labels are cut to fit.
	for _, bx := range boxes {
		if bx.label != "" && float64(len([]rune(bx.label)))*charW > bx.w {
			t.Errorf("label %q (%d chars) overflows its %.1f px box", bx.label, len(bx.label), bx.w)
		}
	}
	if again := svg(t, p, FlameOptions{Title: "hand <cycles> & co"}); !bytes.Equal(out, again) {
		t.Error("two renderings differ")
	}

	ice := parseSVG(t, svg(t, p, FlameOptions{Icicle: true}))
	if a, u := boxNamed(ice, "all "), boxNamed(ice, "relay_ua::"); !(a.y < u.y) {
		t.Errorf("icicle: root at y %.0f, leaf at %.0f", a.y, u.y)
	}
}

func synth(stacks map[string]int) string {
	var b strings.Builder
	i := 0
	for st, n := range stacks {
		for range n {
			i++
			fmt.Fprintf(&b, "relay 1 %d.000001: cpu-clock: \n", i)
			fs := strings.Split(st, ";")
			for j := len(fs) - 1; j >= 0; j-- {
				fmt.Fprintf(&b, "\t  %x %s+0x1 (/opt/relay)\n", 0x1000+j, fs[j])
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func TestFlameSVGHighlightAndOmission(t *testing.T) {
	in := synth(map[string]int{
		"main;relay_event_normalization::event::normalize;<uaparser::parser::os::Matcher as uaparser::SubParser>::try_parse;regex_automata::hybrid::search::find_fwd": 1000,
		"main;relay_pii::processor::apply_regex_to_chunks;regex_automata::hybrid::search::find_fwd":                                                                   999,
		"main;tiny_function": 1,
	})
	// Names that need escaping, and bytes XML cannot carry.
	in += "relay 1 9.000001: 100 cpu-clock: \n\t  aa a<b>&\"c'\x01\xff (/opt/relay)\n\n"
	p, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	boxes := parseSVG(t, svg(t, p, FlameOptions{}))
	var underUA, underPII *svgBox
	for i := range boxes {
		if strings.HasPrefix(boxes[i].title, "regex_automata::hybrid::search::find_fwd") {
			if strings.HasSuffix(boxes[i].title, "[user-agent]") {
				underUA = &boxes[i]
			} else if strings.HasSuffix(boxes[i].title, "[regex]") {
				underPII = &boxes[i]
			}
		}
	}
	if underUA == nil || underPII == nil {
		t.Fatalf("regex under user-agent parsing should be colored as user-agent, elsewhere as regex: %+v", boxes)
	}
	if underUA.fill == underPII.fill {
		t.Errorf("same fill %s", underUA.fill)
	}
	if boxNamed(boxes, "tiny_function") != nil {
		t.Error("a frame of 0.05% was drawn at MinPercent 0.1")
	}
	if boxNamed(parseSVG(t, svg(t, p, FlameOptions{MinPercent: 0.01})), "tiny_function") == nil {
		t.Error("a frame of 0.05% was omitted at MinPercent 0.01")
	}
	if boxNamed(boxes, "a<b>&\"c'") == nil {
		t.Errorf("the name with XML specials is missing: %+v", boxes)
	}
	// No highlight: regex under uaparser is regex again.
	for _, b := range parseSVG(t, svg(t, p, FlameOptions{Highlight: "-"})) {
		if strings.HasPrefix(b.title, "regex_automata") && !strings.HasSuffix(b.title, "[regex]") {
			t.Errorf("without highlight: %q", b.title)
		}
	}
}

func TestFlameSVGBounded(t *testing.T) {
	stacks := map[string]int{}
	for i := range 3000 {
		stacks[fmt.Sprintf("main;mid%d;%s%d", i%50, strings.Repeat("n", 2000), i)] = 1 + i%3
	}
	p, err := Parse(strings.NewReader(synth(stacks)))
	if err != nil {
		t.Fatal(err)
	}
	out := svg(t, p, FlameOptions{MinPercent: 1e-9, MaxRects: 500})
	boxes := parseSVG(t, out)
	if len(boxes) != 500 {
		t.Errorf("%d boxes, want MaxRects 500", len(boxes))
	}
	if boxNamed(boxes, "all ") == nil || boxNamed(boxes, "main ") == nil {
		t.Error("the widest boxes were not kept")
	}
	if len(out) > 500*(maxTooltip+600) {
		t.Errorf("SVG of %d bytes for 500 boxes", len(out))
	}
	// Default options: 0.1% of 6000 samples.
	if n := len(parseSVG(t, svg(t, p, FlameOptions{}))); n != 3+50 {
		t.Errorf("%d boxes at the default MinPercent, want 53 (all, thread, main, 50 mid)", n)
	}
}

func TestFlameSVGRecorded(t *testing.T) {
	for _, f := range []string{"relay-errors.perf.txt", "go-flate.perf.txt", "gzip-stripped.perf.txt", "gzip-nocallchain.perf.txt"} {
		p := parseFile(t, f)
		out := svg(t, p, FlameOptions{Title: f})
		boxes := parseSVG(t, out)
		if len(boxes) < 3 || !strings.HasPrefix(boxes[0].title, "all (") {
			t.Errorf("%s: %d boxes", f, len(boxes))
		}
		if f == "relay-errors.perf.txt" && boxNamed(boxes, "relay_event_normalization::normalize::user_agent::normalize_user_agent_info_generic (") == nil {
			t.Errorf("%s: the user-agent hot function is not drawn", f)
		}
	}
	// A profile whose samples all weigh 0 still gives an image.
	p, err := Parse(strings.NewReader("relay 1 1.000001: 0 cycles: \n\t  aa f (/x)\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if boxes := parseSVG(t, svg(t, p, FlameOptions{})); len(boxes) != 0 {
		t.Errorf("%d boxes for a profile of weight 0", len(boxes))
	}
}

func TestCommas(t *testing.T) {
	for v, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := commas(v); got != want {
			t.Errorf("commas(%d) = %q", v, got)
		}
	}
}
