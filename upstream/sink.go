package upstream

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/canary"
	"github.com/relayload/relayload/internal/capture"
	"github.com/relayload/relayload/internal/tally"
	"github.com/relayload/relayload/projects"
)

// handleEnvelope is the envelope sink, POST /api/<project_id>/envelope/:
// it checks, decodes, frames and counts one envelope (in the order the
// package doc gives), then answers it.
func (s *Server) handleEnvelope(w *statusWriter, req *http.Request, c *counters, projectID string) *httpError {
	if req.Method != http.MethodPost {
		return methodNotAllowed(req)
	}
	at := s.cfg.Now()
	enc, e := parseEncoding(req)
	if e != nil {
		return e
	}
	fromRelay := req.Header.Get("X-Sentry-Relay-Id") != ""
	if fromRelay {
		if e := s.authRelay(req, c, nil); e != nil {
			return e
		}
	}
	pid, _ := strconv.ParseInt(projectID, 10, 64)
	pidx, ok := s.byID[pid]
	if !ok {
		return newError(http.StatusForbidden, "unknown_project", "unknown project", "project id "+projectID)
	}
	decoded, held, e := s.readDecodedAs(req, c, enc)
	if e != nil {
		return e
	}
	defer s.releaseBody(held)
	sum := s.sums.Get().(*envelope.Summary)
	defer s.putSummary(sum)
	if err := envelope.ScanLimit(decoded, sum, MaxEnvelopeItems); err != nil {
		return envelopeError(err)
	}
	h := req.Header
	key := sentryKeyOf(h.Get("X-Sentry-Auth"), h.Get("Authorization"), req.URL.RawQuery)
	if key == "" && len(sum.DSN) > 0 {
		key = dsnKey(sum.DSN)
	}
	if key == "" {
		return newError(http.StatusUnauthorized, "missing_auth", "missing authorization information",
			"no sentry_key in X-Sentry-Auth, Authorization, query string or envelope dsn")
	}
	if kidx, ok := s.byKey[key]; !ok || kidx != pidx {
		return newError(http.StatusForbidden, "key_project_mismatch", "the project key does not belong to this project",
			"project id "+projectID)
	}
	if e := checkEnvelopeLimits(sum); e != nil {
		return e
	}
	outcomes, e := readEnvelopeOutcomes(decoded, sum)
	if e != nil {
		return e
	}
	s.count(c, pidx, fromRelay, decoded, sum, at)
	if s.cfg.Capture != nil {
		s.cfg.Capture.Keep(capture.Entry{Route: routeNames[routeEnvelope], ReceivedAt: at, ProjectID: pid, PublicKey: key,
			FromRelay: fromRelay, UserAgent: h.Get("User-Agent"), ForwardedFor: h.Get("X-Forwarded-For"),
			Encoding: string(enc), Items: capture.ItemCounts(sum.Items), WireBytes: held.wire}, decoded)
	}
	c.countAgent(h.Get("User-Agent"))
	if outcomes != nil {
		outcomes.count(c)
	}
	w.answerEnvelope(sum.EventID)
	return nil
}

// envelopeAnswerLen bounds the envelope sink's answer, {"id":"<32 hex>"}.
const envelopeAnswerLen = 48

// answerEnvelope answers an accepted envelope with its event id (32 hex
// digits, or 36 with dashes, which it drops), or {} without a valid one,
// from the writer's buffer.
func (w *statusWriter) answerEnvelope(id []byte) {
	b := append(w.answer[:0], "{}"...)
	if len(id) == 32 || len(id) == 36 && bytes.Count(id, []byte("-")) == 4 {
		b = append(b[:1], `"id":"`...)
		for _, ch := range id {
			if ch != '-' {
				b = append(b, ch)
			}
		}
		b = append(b, `"}`...)
	}
	writeRawJSON(w, http.StatusOK, b)
}

// maxPooledSummaryItems is the largest item list a pooled summary keeps, so
// a rare envelope of many items does not pin a large list in the pool.
const maxPooledSummaryItems = 64

// putSummary returns sum to the pool, cleared so that it does not keep the
// decoded body it aliases alive.
func (s *Server) putSummary(sum *envelope.Summary) {
	if cap(sum.Items) > maxPooledSummaryItems {
		return
	}
	clear(sum.Items[:cap(sum.Items)])
	*sum = envelope.Summary{Items: sum.Items[:0]}
	s.sums.Put(sum)
}

// envelopeError names the framing rule an envelope broke.
func envelopeError(err error) *httpError {
	var pe *envelope.ParseError
	switch {
	case !errors.As(err, &pe):
		return newError(http.StatusBadRequest, "malformed_envelope", "invalid envelope", err.Error())
	case pe.Rule == envelope.RuleTooManyItems:
		return newError(http.StatusRequestEntityTooLarge, "envelope_too_many_items",
			"envelope exceeded size limits: more than "+strconv.Itoa(MaxEnvelopeItems)+" items", err.Error())
	}
	return newError(http.StatusBadRequest, "malformed_envelope:"+strings.ReplaceAll(string(pe.Rule), " ", "_"), "invalid envelope", err.Error())
}

// count records one accepted envelope, but not its outcomes.
func (s *Server) count(c *counters, pidx int, fromRelay bool, decoded []byte, sum *envelope.Summary, at time.Time) {
	c.envelopes.Add(1)
	if fromRelay {
		c.envelopesRelay.Add(1)
	} else {
		c.envelopesSDK.Add(1)
	}
	c.projEnvelopes[pidx].Add(1)
	c.projItems[pidx].Add(int64(len(sum.Items)))
	data := false
	for i := range sum.Items {
		it := &sum.Items[i]
		ti := itemTypeIndex(it.Type)
		c.items[ti].Add(1)
		if n := int64(it.ItemCount); n > 1 {
			// item_count reaches 2³²−1 per item: saturate, never wrap.
			tally.AddAtomic(&c.records[ti], n)
		} else {
			c.records[ti].Add(1)
		}
		switch ti {
		case itemClientReport, itemMetricBuckets, itemStatsd, itemMetricMeta:
			// Relay's own traffic about the data (metrics, client reports).
		case itemEvent, itemTransaction, itemLog, itemSpan:
			data = true
			s.scanCanaries(c, decoded[it.PayloadStart:it.PayloadEnd])
		default:
			data = true
		}
	}
	if data {
		c.dataEnvelopes.Add(1)
		c.arrivals.add(at)
	}
}

// scanCanaries counts canaries found in a forwarded payload and whether the
// payload records a scrubbing remark in _meta.
func (s *Server) scanCanaries(c *counters, payload []byte) {
	c.scannedItems.Add(1)
	canary.Scan(payload, func(f canary.Finding) {
		i := slices.Index(canaryKinds, f.Kind)
		if i < 0 {
			return
		}
		c.canaryFound[i].Add(1)
		if f.Leaked {
			c.canaryLeaks[i].Add(1)
		}
		if f.Kind.Expect == canary.Kept {
			c.canaryKept[i].Add(1)
		}
	})
	if canary.ScrubRemark(payload) {
		c.scrubbedItems.Add(1)
	}
}

// sentryKeyOf finds sentry_key in X-Sentry-Auth, Authorization or the query.
func sentryKeyOf(auth, authz, rawQuery string) string {
	if h := cmp.Or(auth, authz); h != "" {
		return projects.ParseAuthKey(h)
	}
	if rawQuery != "" {
		q, _ := url.ParseQuery(rawQuery)
		return q.Get("sentry_key")
	}
	return ""
}

// dsnKey extracts the public key from a DSN "scheme://key[:secret]@host/id".
func dsnKey(dsn []byte) string {
	u, err := url.Parse(string(dsn))
	if err != nil || u.User == nil {
		return ""
	}
	return u.User.Username()
}

// Envelope limits: the decoded cap (Config.MaxDecodedBytes) bounds an
// envelope's bytes, these its items. The per-type ones are Relay's defaults
// (relay-config Limits, enforced in relay-server's
// check_envelope_size_limits with a 413); MaxEnvelopeItems is the fake's
// own, well above their sum.
const (
	// MaxEnvelopeItems bounds the items of one envelope (413 beyond).
	MaxEnvelopeItems = 1000

	maxSessionItems       = 100       // session + sessions: limits.max_session_count
	maxAttachmentItems    = 30        // attachment + unreal_report + user_report: limits.max_attachment_count
	maxClientReportItems  = 100       // limits.max_client_reports_count
	maxClientReportsBytes = 100 << 10 // limits.max_client_reports_size
	maxStandaloneSpans    = 25        // span items outside a span container: limits.max_standalone_span_count
)

// checkEnvelopeLimits applies the per-type limits to a scanned envelope.
func checkEnvelopeLimits(sum *envelope.Summary) *httpError {
	var sessions, attachments, reports, reportBytes, spans int
	for i := range sum.Items {
		it := &sum.Items[i]
		var n *int
		limit := 0
		switch itemTypeIndex(it.Type) {
		case itemSession, itemSessions:
			n, limit = &sessions, maxSessionItems
		case itemAttachment, itemUserReport, itemUnrealReport:
			n, limit = &attachments, maxAttachmentItems
		case itemClientReport:
			reportBytes += it.PayloadEnd - it.PayloadStart
			if reportBytes > maxClientReportsBytes {
				return envelopeLimit(it.Type, fmt.Sprintf("client_report items hold more than %d bytes (limits.max_client_reports_size)", maxClientReportsBytes))
			}
			n, limit = &reports, maxClientReportItems
		case itemSpan:
			// A span item of a container type (Relay's
			// ContentType::is_container) is no standalone span.
			switch string(it.ContentType) {
			case "application/vnd.sentry.items.log+json", "application/vnd.sentry.items.span.v2+json",
				"application/vnd.sentry.items.trace-metric+json":
				continue
			}
			n, limit = &spans, maxStandaloneSpans
		default:
			continue
		}
		if *n++; *n > limit {
			return envelopeLimit(it.Type, fmt.Sprintf("more than %d %s items", limit, it.Type))
		}
	}
	return nil
}

// envelopeLimit is Relay's answer to an envelope over a limit (413,
// BadStoreRequest::Overflow).
func envelopeLimit(typ []byte, cause string) *httpError {
	return newError(http.StatusRequestEntityTooLarge, "envelope_limit",
		"envelope exceeded size limits for type '"+clipReason(string(typ))+"'", cause)
}
