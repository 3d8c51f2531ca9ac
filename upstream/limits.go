package upstream

import (
	"fmt"
	"net/http"

	"github.com/relayload/relayload/envelope"
)

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
