package report

import (
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	}
}

// inkAtEdge names the edges of img within margin pixels of which a pixel
// is darker than light grey ("" when none).
func inkAtEdge(img image.Image, margin int) string {
	b := img.Bounds()
	dark := func(x, y int) bool {
		r, g, bl, a := img.At(x, y).RGBA()
		return a > 0x8000 && (r+g+bl)/3 < 0xa000
	}
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
