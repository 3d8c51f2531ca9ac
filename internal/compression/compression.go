// Package compression implements HTTP Content-Encoding in both directions for
// the codings Sentry's Relay speaks: identity, gzip, deflate, br and zstd.
//
// fake-upstream decodes every envelope Relay forwards (tens of thousands of
// requests per second on two cores), pool pre-encodes envelopes once, and the
// stand-in relay encodes what it forwards. Both directions therefore reuse
// their codec state instead of building it per request:
//
//   - zstd decoding goes through one shared zstd.Decoder in buffer mode
//     (DecodeAll), which is safe for concurrent use and makes no allocations
//     when dst has room. A zstd.Decoder built per request allocates its
//     tables and starts its goroutines each time, which on an envelope
//     costs more than decoding it (BenchmarkDecode reuses one).
//   - gzip, zlib, raw deflate and brotli readers are kept in sync.Pools and
//     re-armed with Reset, which saves allocating their tables per request
//     (TestDecodeAllocs).
//   - Encoders are reused the same way: one zstd.Encoder used with EncodeAll,
//     pooled gzip/zlib/brotli writers. Output depends only on the input, not
//     on what a pooled writer encoded before (see encode.go for why brotli
//     uses the matchfinder writer).
//
// Both Decode and Encode append to dst[:0] and return the result; a caller
// that keeps the returned slice and passes it back next time decodes with no
// allocations (zstd, gzip, deflate; brotli's reader allocates a few small
// tables per stream). Decoder and Encoder are safe for concurrent use.
//
// # Limits
//
// A Decoder has a cap, maxDecoded, on the decoded size of one body. Going over
// it is ErrTooLarge, never an allocation proportional to what the input
// claims: stream codings (gzip, deflate, br) are read through a limit of
// maxDecoded+1 bytes, so at most maxDecoded bytes are kept; zstd runs
// DecodeAll with WithDecodeAllCapLimit, which stops decoding once the output
// passes the capacity of the buffer it is given, and that capacity never
// exceeds maxDecoded plus one block (128 KiB + 32 bytes). A zstd frame that declares a content size above the cap is refused before
// anything is decoded (WithDecoderMaxMemory/WithDecoderMaxWindow additionally
// refuse windows above max(cap, 8 MiB)). zstd checks the limit once per block,
// so it may decode up to one block (≤ 128 KiB) beyond the cap internally
// before stopping; without a declared size it sizes its buffer by growing it
// 4× at a time and decoding again (and klauspost appends an RLE block that
// overflows the buffer before noticing). The brotli reader also allocates a
// ring buffer as large as the stream's window (≤ 16 MiB; readers that
// decoded more than 1 MiB are therefore not pooled). So a bomb costs a
// small multiple of the cap in short-lived allocation, never what it would
// decode to: TestBombs holds every coding to a bound.
// What Decode returns never exceeds the cap. Callers still bound the
// compressed body themselves (http.MaxBytesReader).
//
// Input that is not a valid, complete stream of its coding (bad header,
// truncated, bad checksum, trailing bytes after the last member/frame, an
// empty body under a non-identity coding) is ErrCorrupt, wrapped with the
// decoder's detail.
//
// # deflate
//
// HTTP (RFC 9110 §8.4.1.2) and Relay (HttpEncoding::Deflate, its upstream
// http.encoding and its ingest endpoint) use "deflate" for the zlib format
// (RFC 1950) around raw deflate (RFC 1951). Encode writes zlib. Decode accepts
// zlib and, because some clients send raw deflate under this name, falls back
// to raw deflate when the first two bytes are not a zlib header (CM = 8,
// CINFO ≤ 7, (CMF·256+FLG) mod 31 = 0), or when a stream that looks like zlib
// fails to decode as zlib but decodes completely as raw deflate. Relay's
// ingest endpoint decodes "deflate" with a zlib decoder (tower-http), so this
// fallback is more lenient than Relay.
package compression

import (
	"errors"
	"fmt"
	"strings"
)

// Encoding is an HTTP content coding.
type Encoding string

// The content codings Relay speaks, by their HTTP token.
const (
	Identity Encoding = "identity"
	Gzip     Encoding = "gzip"
	Deflate  Encoding = "deflate" // zlib (RFC 1950), as in HTTP and Relay
	Brotli   Encoding = "br"
	Zstd     Encoding = "zstd"
)

var (
	// ErrTooLarge is returned (wrapped) when a body decodes to more than the
	// Decoder's maxDecoded bytes.
	ErrTooLarge = errors.New("compression: decoded body exceeds limit")
	// ErrCorrupt is returned (wrapped, with the codec's detail) for input that
	// is not a complete, valid stream of its coding.
	ErrCorrupt = errors.New("compression: corrupt input")
	// ErrUnknownEncoding is returned (wrapped) by ParseEncoding, Decode and
	// Encode for a coding this package does not implement.
	ErrUnknownEncoding = errors.New("compression: unsupported content encoding")
	// ErrStackedEncodings is returned (wrapped) by ParseContentEncoding for
	// a body with more than one coding applied.
	ErrStackedEncodings = errors.New("compression: more than one content coding")
)

// Encodings returns all five codings in a fixed order.
func Encodings() []Encoding {
	return []Encoding{Identity, Gzip, Deflate, Brotli, Zstd}
}

// ParseEncoding maps a Content-Encoding header value to an Encoding.
//
// Matching is case-insensitive and ignores surrounding whitespace. "" and
// "identity" are Identity; so is "UTF-8", which Relay ignores because some
// SDKs send it (sentry.java.android 2.0.0; sentry-ruby 5.x sends ""). "x-gzip"
// is Gzip (RFC 9110 §8.4.1.3). Anything else, including stacked codings such
// as "gzip, br", is an error wrapping ErrUnknownEncoding.
func ParseEncoding(s string) (Encoding, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "", strings.EqualFold(s, "identity"), strings.EqualFold(s, "utf-8"):
		return Identity, nil
	case strings.EqualFold(s, "gzip"), strings.EqualFold(s, "x-gzip"):
		return Gzip, nil
	case strings.EqualFold(s, "deflate"):
		return Deflate, nil
	case strings.EqualFold(s, "br"):
		return Brotli, nil
	case strings.EqualFold(s, "zstd"):
		return Zstd, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownEncoding, s)
}

// String returns the HTTP token.
func (e Encoding) String() string { return string(e) }

// ParseContentEncoding reads the Content-Encoding of a request from all its
// header lines (http.Header.Values) as the one list RFC 9110 §5.3 and §8.4
// define: the lines joined with commas, elements separated by commas and
// optional whitespace, empty elements ignored. The codings are listed in the
// order they were applied, so a body is decoded by undoing them in reverse.
// This package decodes one coding, so the list may hold one real coding;
// identity (and what ParseEncoding maps to it) is a no-op wherever it
// stands. No element: Identity. An unknown element is ErrUnknownEncoding,
// two or more real codings (gzip, br — on one line or on two) are
// ErrStackedEncodings: refused alike, whatever the number of lines, so
// that no coding a client names is ignored.
//
// Relay (tower-http's RequestDecompression) reads only the first header
// line and refuses a list on it; Relay itself never sends more than one
// coding.
func ParseContentEncoding(lines []string) (Encoding, error) {
	enc := Identity
	for _, line := range lines {
		for line != "" {
			var elem string
			elem, line, _ = strings.Cut(line, ",")
			e, err := ParseEncoding(elem)
			if err != nil {
				return "", err
			}
			if e == Identity {
				continue
			}
			if enc != Identity {
				return "", fmt.Errorf("%w: %s then %s (decoding stacked codings is not supported)", ErrStackedEncodings, enc, e)
			}
			enc = e
		}
	}
	return enc, nil
}
