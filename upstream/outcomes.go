package upstream

import (
	"net/http"
	"strconv"
	"unicode/utf8"
)

// outcomeNames maps outcome ids to names (docs/protocol.md, Outcomes).
var outcomeNames = [...]string{"accepted", "filtered", "rate_limited", "invalid", "abuse", "client_discard", "cardinality_limited"}

// categoryNames maps data-category ids to names, as Relay 26.4.0's
// relay-base-schema DataCategory numbers them (docs/protocol.md, Outcomes).
var categoryNames = [...]string{
	"default", "error", "transaction", "security", "attachment", "session", "profile", "replay",
	"transaction_processed", "transaction_indexed", "monitor", "profile_indexed", "span",
	"monitor_seat", "feedback", "metric_bucket", "span_indexed", "profile_duration",
	"profile_chunk", "metric_second", "replay_video", "uptime", "attachment_item", "log_item",
	"log_byte", "profile_duration_ui", "profile_chunk_ui", "seer_autofix", "seer_scanner",
	"prevent_user", "prevent_review", "size_analysis", "installable_build", "trace_metric",
	"seer_user", "profile_backend", "profile_ui", "trace_metric_byte",
}

// idName returns the name of id in names (outcomeNames, categoryNames), or
// "unknown:<id>".
func idName(names []string, id int64) string {
	if id >= 0 && id < int64(len(names)) {
		return names[id]
	}
	return "unknown:" + strconv.FormatInt(id, 10)
}

// maxReasonLen truncates wire-provided reasons.
const maxReasonLen = 100

func clipReason(r string) string {
	if len(r) <= maxReasonLen {
		return r
	}
	// Cut at a rune boundary: the reason becomes a Prometheus label value,
	// which must be valid UTF-8.
	i := maxReasonLen
	for i > 0 && !utf8.RuneStart(r[i]) {
		i--
	}
	return r[:i]
}

// outcomeQuery serves a signed outcome carrier from source src, a legacy
// batch or a metrics-endpoint batch (http.global_metrics, signed over the
// decoded body): it reads it with read and counts it once read in full.
func (s *Server) outcomeQuery(w http.ResponseWriter, req *http.Request, c *counters, src int, read func([]byte, *outcomeBatch) *httpError) *httpError {
	body, held, e := s.signedBody(req, c)
	if e != nil {
		return e
	}
	defer s.releaseBody(held)
	var b outcomeBatch
	if e := read(body, &b); e != nil {
		return e
	}
	b.messages[src] = 1
	b.count(c)
	writeRawJSON(w, http.StatusOK, []byte("{}"))
	return nil
}
