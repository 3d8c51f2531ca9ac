package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/relayload/relayload/internal/compression"
)

// readBody reads the whole body into a pooled buffer, capped at
// MaxWireBytes. Its first BodyPreSlotBytes are read holding no slot, within
// HTTPBodyTimeout, so a client that stalls holds nothing others need; the
// rest is read holding a read slot (large is then true) at HTTPMinBodyRate
// after HTTPBodyGrace. The caller gives back the buffer with putBuf and a
// read slot with <-s.readSlots.
func (s *Server) readBody(req *http.Request) (bp *[]byte, large bool, e *httpError) {
	n := req.ContentLength // -1: unknown (chunked)
	conn := requestConn(req)
	if n > s.cfg.MaxWireBytes {
		s.discardRefused(req.Body, n, 0, conn)
		return nil, false, newError(http.StatusRequestEntityTooLarge, "too_large_wire", "request body too large",
			fmt.Sprintf("Content-Length %d > limit %d", n, s.cfg.MaxWireBytes))
	}
	setBodyDeadline(conn, time.Now().Add(s.limits.bodyTimeout))
	first := int64(BodyPreSlotBytes)
	if n >= 0 && n < first {
		first = n
	}
	bp = s.bufs.Get().(*[]byte)
	if int64(cap(*bp)) < first {
		*bp = make([]byte, 0, first)
	}
	b, err := readUpTo(req.Body, (*bp)[:0], int(first))
	*bp = b
	switch {
	case err != nil && (n >= 0 || !errors.Is(err, io.EOF)):
		s.putBuf(bp)
		return nil, false, bodyReadError(err)
	case n >= 0 && n == first, n < 0 && err != nil: // all of it (a chunked body ended)
		bodyDone(conn)
		return bp, false, nil
	}
	select {
	case s.readSlots <- struct{}{}:
	case <-req.Context().Done():
		s.putBuf(bp)
		return nil, false, clientGone("while waiting for a large-body slot")
	}
	if err = s.readRest(req.Body, bp, int(n), conn); err != nil {
		read := int64(len(*bp))
		s.putBuf(bp)
		<-s.readSlots
		if errors.Is(err, errTooLargeWire) {
			s.discardRefused(req.Body, n, read, conn)
			return nil, false, newError(http.StatusRequestEntityTooLarge, "too_large_wire", "request body too large",
				fmt.Sprintf("more than %d bytes", s.cfg.MaxWireBytes))
		}
		return nil, false, bodyReadError(err)
	}
	bodyDone(conn)
	return bp, true, nil
}

// bodyDone clears the read deadline of a body read in full, else net/http's
// background read would hit it and cancel the request as if the client had
// gone. After a failed read it stays, bounding net/http's drain of the rest.
func bodyDone(conn net.Conn) { setBodyDeadline(conn, time.Time{}) }

// readUpTo reads from r into b until it holds limit bytes or r fails; an
// io.EOF with the last of limit bytes is no error.
func readUpTo(r io.Reader, b []byte, limit int) ([]byte, error) {
	for len(b) < limit {
		n, err := r.Read(b[len(b):limit])
		b = b[:len(b)+n]
		if err != nil && (len(b) < limit || !errors.Is(err, io.EOF)) {
			return b, err
		}
	}
	return b, nil
}

// bodyChunk is how much of a large body is read under one deadline.
const bodyChunk = 64 << 10

// errTooLargeWire: a body of unknown length ran past MaxWireBytes.
var errTooLargeWire = errors.New("body over the wire cap")

// readRest reads the rest of a body into *bp (which holds its start), at
// the minimum rate from now: n bytes in all, or, for n < 0 (chunked), up to
// its end and no further than one byte past the wire cap.
func (s *Server) readRest(r io.Reader, bp *[]byte, n int, conn net.Conn) error {
	limit := n
	if n < 0 {
		limit = int(s.cfg.MaxWireBytes) + 1
	} else if cap(*bp) < n {
		// Grow the pooled buffer in place: putting it back and taking
		// another would grow the pool with the request count
		// (TestBodyBuffersBoundedByInflight).
		*bp = append(make([]byte, 0, n), *bp...)
	}
	b := *bp
	t0, start := time.Now(), len(b)
	for len(b) < limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		end := min(cap(b), limit, len(b)+bodyChunk)
		setBodyDeadline(conn, t0.Add(s.limits.bodyGrace+atRate(int64(end-start), s.limits.minBodyRate)))
		m, err := r.Read(b[len(b):end])
		b = b[:len(b)+m]
		*bp = b
		switch {
		case n < 0 && len(b) == limit:
			return errTooLargeWire
		case err == nil || len(b) == n:
		case n < 0 && errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, io.EOF):
			return io.ErrUnexpectedEOF
		default:
			return err
		}
	}
	return nil
}

// maxRefusedBytes bounds how much of a body over the wire cap is read
// and thrown away before it is answered 413: Relay's own envelope limit
// (limits.max_envelope_size, 100 MiB) with room to spare.
const maxRefusedBytes = 128 << 20

// discardRefused reads and throws away the rest of a body refused as too
// large (n bytes in all, -1: chunked; read of them read already), up to
// maxRefusedBytes, at the minimum body rate and holding no slot: a client
// that writes its whole body before reading its answer (blast's fasthttp
// client, many SDKs) then reads the 413 instead of a reset. A longer body
// is answered at once and its connection closed.
func (s *Server) discardRefused(body io.Reader, n, read int64, conn net.Conn) {
	if n > maxRefusedBytes || read >= maxRefusedBytes {
		return
	}
	var buf [32 << 10]byte
	t0, start := time.Now(), read
	for read < maxRefusedBytes {
		setBodyDeadline(conn, t0.Add(s.limits.bodyGrace+atRate(read-start+bodyChunk, s.limits.minBodyRate)))
		m, err := body.Read(buf[:min(int64(len(buf)), maxRefusedBytes-read)])
		read += int64(m)
		if errors.Is(err, io.EOF) {
			bodyDone(conn)
			return
		}
		if err != nil {
			return
		}
	}
}

// bodyReadError answers a body that could not be read: 408 when it did
// not come in time, else 400.
func bodyReadError(err error) *httpError {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return newError(http.StatusRequestTimeout, "body_timeout", "request body not received in time", err.Error())
	}
	return newError(http.StatusBadRequest, "body_read_error", "reading the request body failed", err.Error())
}

// clientGone is the outcome of a request whose client hung up before its
// body was processed: counted, not answered, and not processed.
func clientGone(when string) *httpError {
	return newError(0, "client_gone", "the client closed the connection", when)
}

// maxPooledBuf keeps huge one-off bodies from pinning memory in the pool.
const maxPooledBuf = 1 << 20

func (s *Server) putBuf(bp *[]byte) {
	if cap(*bp) > maxPooledBuf {
		return
	}
	*bp = (*bp)[:0]
	s.bufs.Put(bp)
}

// parseEncoding reads Content-Encoding from all its header lines: an
// unknown coding, or two stacked, is 415.
func parseEncoding(req *http.Request) (compression.Encoding, *httpError) {
	lines := req.Header.Values("Content-Encoding")
	if len(lines) == 0 {
		return compression.Identity, nil
	}
	enc, err := compression.ParseContentEncoding(lines)
	if err != nil {
		return "", newError(http.StatusUnsupportedMediaType, "bad_encoding", "unsupported Content-Encoding", err.Error())
	}
	return enc, nil
}

// readDecoded reads a request body and undoes its Content-Encoding; the
// caller gives back what it holds with s.releaseBody(held).
func (s *Server) readDecoded(req *http.Request, c *counters) (body []byte, held heldBody, e *httpError) {
	enc, e := parseEncoding(req)
	if e != nil {
		return nil, heldBody{}, e
	}
	return s.readDecodedAs(req, c, enc)
}

// heldBody is what readDecoded holds until releaseBody: the pooled buffer
// the body aliases, an ingest slot and maybe a read slot.
type heldBody struct {
	buf   *[]byte
	large bool
	wire  int // the body's length as received
}

// readDecodedAs is readDecoded for a parsed Content-Encoding. It takes an
// ingest slot only once the whole body is in, dropping the request
// (client_gone) if its client has gone; an encoded body's wire buffer and
// read slot go back once it is decoded, the rest with s.releaseBody(held).
func (s *Server) readDecodedAs(req *http.Request, c *counters, enc compression.Encoding) (body []byte, held heldBody, e *httpError) {
	bp, large, e := s.readBody(req)
	if e != nil {
		return nil, heldBody{}, e
	}
	if e := s.takeSlot(req.Context()); e != nil {
		s.putBuf(bp)
		if large {
			<-s.readSlots
		}
		return nil, heldBody{}, e
	}
	held = heldBody{buf: bp, large: large, wire: len(*bp)}
	body = *bp
	if enc != compression.Identity {
		held.buf = s.bufs.Get().(*[]byte)
		var err error
		body, err = s.dec.Decode(enc, *bp, (*held.buf)[:0])
		if cap(body) >= cap(*held.buf) {
			*held.buf = body[:0]
		}
		s.putBuf(bp)
		if large {
			<-s.readSlots
			held.large = false
		}
		switch {
		case errors.Is(err, compression.ErrTooLarge):
			e = newError(http.StatusRequestEntityTooLarge, "too_large_decoded", "decoded body too large", err.Error())
		case err != nil:
			e = newError(http.StatusBadRequest, "bad_compression", "body does not decode as "+string(enc), err.Error())
		}
	} else if int64(len(body)) > s.cfg.MaxDecodedBytes {
		e = newError(http.StatusRequestEntityTooLarge, "too_large_decoded", "decoded body too large",
			fmt.Sprintf("%d bytes > limit %d", len(body), s.cfg.MaxDecodedBytes))
	}
	if e != nil {
		s.releaseBody(held)
		return nil, heldBody{}, e
	}
	i := encodingIndex(enc)
	c.encRequests[i].Add(1)
	c.encWire[i].Add(int64(held.wire))
	c.encDecoded[i].Add(int64(len(body)))
	return body, held, nil
}

// takeSlot takes an ingest slot, unless the client hangs up first.
func (s *Server) takeSlot(ctx context.Context) *httpError {
	select {
	case s.slots <- struct{}{}:
	default:
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return clientGone("while waiting for an ingest slot")
		}
	}
	if ctx.Err() != nil {
		<-s.slots
		return clientGone("before its body was processed")
	}
	return nil
}

// releaseBody gives back what readDecodedAs holds.
func (s *Server) releaseBody(held heldBody) {
	s.putBuf(held.buf)
	if held.large {
		<-s.readSlots
	}
	<-s.slots
}

// decodeJSON decodes a JSON request body into v.
func decodeJSON(body []byte, v any, what string) *httpError {
	if err := json.Unmarshal(body, v); err != nil {
		return newError(http.StatusBadRequest, "bad_json", "invalid JSON in "+what, err.Error())
	}
	return nil
}
