package profile

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// benchInput repeats a real fixture to about 4 MB.
func benchInput(b *testing.B, name string) []byte {
	b.Helper()
	one, err := os.ReadFile("testdata/" + name)
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Repeat(one, (4<<20)/len(one)+1)
}

// BenchmarkParse parses Relay's perf script output in perf's default
// format (with symbol offsets), the worst case for line length.
func BenchmarkParse(b *testing.B) {
	in := benchInput(b, "relay-errors.perf.txt")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(in)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseFields parses the -F fields Run asks perf for.
func BenchmarkParseFields(b *testing.B) {
	in := benchInput(b, "relay-errors.fields.perf.txt")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(in)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriteFlameSVG(b *testing.B) {
	p, err := Parse(bytes.NewReader(benchInput(b, "relay-errors.perf.txt")))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.WriteFlameSVG(io.Discard, FlameOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
