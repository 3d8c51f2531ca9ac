// Package capture keeps the envelopes a fake upstream receives, one
// decoded .envelope file each, with a manifest that says where each came
// from, so that they can be replayed later (blast --envelopes).
package capture

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// ManifestName is the manifest's file name in a capture directory: one
// JSON Entry per line, in the order the envelopes' files were finished
// (which, with envelopes kept concurrently, may differ a little from the
// order of their numbers).
const ManifestName = "manifest.jsonl"

// Entry describes one kept envelope.
type Entry struct {
	// File is the envelope's file, relative to the capture directory: the
	// envelope as received, decompressed.
	File       string    `json:"file"`
	Route      string    `json:"route"` // "envelope": /api/<project_id>/envelope/
	ReceivedAt time.Time `json:"received_at"`
	ProjectID  int64     `json:"project_id"`
	PublicKey  string    `json:"public_key"`
	// FromRelay is true for a Relay's signed forward, false for an SDK
	// that sent straight to the fake upstream.
	FromRelay    bool   `json:"from_relay"`
	UserAgent    string `json:"user_agent,omitempty"`
	ForwardedFor string `json:"forwarded_for,omitempty"`
	// Encoding is the request's Content-Encoding ("" for none).
	Encoding string `json:"content_encoding,omitempty"`
	// Items counts the envelope's items by type.
	Items map[string]int `json:"items"`
	// Bytes is the decoded envelope's size, WireBytes the body as sent.
	Bytes     int `json:"bytes"`
	WireBytes int `json:"wire_bytes"`
}

// MaxManifestLine bounds one manifest line when reading.
const MaxManifestLine = 1 << 20

// ReadManifest reads dir's manifest. A manifest that is missing is
// reported with an error that matches os.ErrNotExist.
func ReadManifest(dir string) ([]Entry, error) {
	f, err := os.Open(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	defer f.Close()
	return DecodeManifest(f)
}

// DecodeManifest reads manifest lines from r. Errors name the line. A
// last line with no newline that does not decode is the tail of a capture
// killed mid-write and is left out, so such a capture reads up to its last
// whole line.
func DecodeManifest(r io.Reader) ([]Entry, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Entry
	var buf []byte
	for line := 1; ; line++ {
		b, whole, err := readLine(br, buf[:0])
		buf = b
		if err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return nil, fmt.Errorf("capture: manifest line %d: longer than %d bytes", line, MaxManifestLine)
			}
			return nil, fmt.Errorf("capture: manifest: %w", err)
		}
		if len(b) == 0 {
			if !whole {
				return out, nil
			}
			continue
		}
		var e Entry
		if err := json.Unmarshal(b, &e); err != nil {
			if !whole {
				return out, nil
			}
			return nil, fmt.Errorf("capture: manifest line %d: %w", line, err)
		}
		if !fileName(e.File) {
			return nil, fmt.Errorf("capture: manifest line %d: file %q: want a file name in the capture directory", line, e.File)
		}
		out = append(out, e)
		if !whole {
			return out, nil
		}
	}
}

// readLine appends the next line of br to b, without its newline; whole
// is false at the end of the input (b then holds any unterminated tail).
// A line over MaxManifestLine is bufio.ErrTooLong.
func readLine(br *bufio.Reader, b []byte) (line []byte, whole bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if len(b)+len(chunk) > MaxManifestLine+1 || len(b)+len(chunk) > MaxManifestLine && !bytes.HasSuffix(chunk, []byte{'\n'}) {
			return b, false, bufio.ErrTooLong
		}
		b = append(b, chunk...)
		switch {
		case err == nil:
			return b[:len(b)-1], true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return b, false, nil
		default:
			return b, false, err
		}
	}
}

// fileName reports whether name names a file in the capture directory.
func fileName(name string) bool {
	return name != "" && name != "." && name != ".." && !filepath.IsAbs(name) && name == filepath.Base(name)
}
