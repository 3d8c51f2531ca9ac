package report

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
)

// TestChartsRender renders every chart with rsvg-convert (librsvg, what
// GNOME and many pipelines draw SVG with) and checks that nothing is cut
// at the image's edges: the outermost columns and rows must be background.
// It failed when the right-most x-axis label ("60000") ran off the canvas.
func TestChartsRender(t *testing.T) {
	rsvg, err := exec.LookPath("rsvg-convert")
	if err != nil {
		if os.Getenv("RELAYLOAD_REQUIRE_RSVG") != "" {
			t.Fatal("rsvg-convert is not installed and RELAYLOAD_REQUIRE_RSVG is set (CI)")
		}
		t.Skip("rsvg-convert is not installed (Debian: librsvg2-bin; .ci/run installs it)")
	}
	dir := t.TempDir()
	rep := sample()
	// Rates up to five digits, whose last tick label sits at the right edge.
	for _, st := range rep.Steps {
		st.Rate *= 100
	}
	for _, p := range rep.Summary {
		p.Rate *= 100
	}
	paths, err := Charts(dir, rep)
	if err != nil || len(paths) < 3 {
		t.Fatalf("charts %v: %v", paths, err)
	}
	for _, svg := range paths {
		out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(svg), ".svg")+".png")
		if b, err := exec.Command(rsvg, "-o", out, svg).CombinedOutput(); err != nil {
			t.Fatalf("%s: rsvg-convert: %v\n%s", svg, err, b)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if edge := inkAtEdge(img, 2); edge != "" {
			t.Errorf("%s: something is drawn at the %s edge(s) (cut off)", filepath.Base(svg), edge)
		}
		// The legend is beside the data, in a strip right of the chart's
		// own width: drawn over the data, its text ran into the lines.
		b := img.Bounds()
		strip := b.Min.X + int(float64(b.Dx())*float64(chartW)/float64(chartW+legendWidthOf(t, svg)))
		if !inkIn(img, strip+4, b.Max.X) {
			t.Errorf("%s: no legend right of the data", filepath.Base(svg))
		}
	}
}

// legendWidthOf is the width of the legend strip of the chart svg, from
// its width in the SVG header and the chart's own width.
func legendWidthOf(t *testing.T, svg string) vg.Length {
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<svg[^>]* width="([0-9.]+)(pt|px)?"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no width", svg)
	}
	w, _ := strconv.ParseFloat(string(m[1]), 64)
	own := chartW
	if strings.HasPrefix(filepath.Base(svg), "step-") {
		own = stepW
	}
	return vg.Length(w) - own
}

// isInk reports whether c is mostly opaque and darker than light grey
// (not premultiplied: a half-covered white pixel at the image's edge is
// white).
func isInk(c color.Color) bool {
	n := color.NRGBAModel.Convert(c).(color.NRGBA)
	return n.A > 0x80 && (int(n.R)+int(n.G)+int(n.B))/3 < 0xa0
}

// inkIn reports whether a pixel darker than light grey is in columns
// [x0, x1) of img.
func inkIn(img image.Image, x0, x1 int) bool {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := max(x0, b.Min.X); x < min(x1, b.Max.X); x++ {
			if isInk(img.At(x, y)) {
				return true
			}
		}
	}
	return false
}

// inkAtEdge names the edges of img within margin pixels of which a pixel
// is darker than light grey ("" when none).
func inkAtEdge(img image.Image, margin int) string {
	b := img.Bounds()
	dark := func(x, y int) bool { return isInk(img.At(x, y)) }
	edges := map[string]bool{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for m := 0; m < margin; m++ {
			edges["right"] = edges["right"] || dark(b.Max.X-1-m, y)
			edges["left"] = edges["left"] || dark(b.Min.X+m, y)
		}
	}
	for x := b.Min.X; x < b.Max.X; x++ {
		for m := 0; m < margin; m++ {
			edges["bottom"] = edges["bottom"] || dark(x, b.Max.Y-1-m)
			edges["top"] = edges["top"] || dark(x, b.Min.Y+m)
		}
	}
	var out []string
	for _, e := range []string{"left", "right", "top", "bottom"} {
		if edges[e] {
			out = append(out, e)
		}
	}
	return strings.Join(out, ", ")
}
