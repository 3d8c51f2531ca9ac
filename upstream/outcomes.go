package upstream

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
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

// outcomeName returns the name of outcome id (or "unknown:<id>").
func outcomeName(id int64) string {
	if id >= 0 && id < int64(len(outcomeNames)) {
		return outcomeNames[id]
	}
	return "unknown:" + strconv.FormatInt(id, 10)
}

// categoryName returns the name of data category id (or "unknown:<id>").
func categoryName(id int64) string {
	if id >= 0 && id < int64(len(categoryNames)) {
		return categoryNames[id]
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

// bucket is the part of a metric bucket the fake reads.
type bucket struct {
	Name  string            `json:"name"`
	Type  string            `json:"type"`
	Value json.RawMessage   `json:"value"`
	Tags  map[string]string `json:"tags"`
}

const outcomePrefix, outcomeSuffix = "c:outcomes/", "@none"

// addBuckets counts outcome buckets (c:outcomes/<name>@none) and other
// metric buckets. It returns false if the payload is not a bucket list.
func (s *Server) addBuckets(c *counters, buckets []bucket) {
	for _, b := range buckets {
		name, ok := strings.CutPrefix(b.Name, outcomePrefix)
		if ok {
			name, ok = strings.CutSuffix(name, outcomeSuffix)
		}
		if !ok {
			c.metricBuckets.Add(1)
			continue
		}
		var v float64
		if err := json.Unmarshal(b.Value, &v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			c.errors.add("bad_outcome_bucket", 1)
			continue
		}
		cat := b.Tags["category"]
		if id, err := strconv.ParseInt(cat, 10, 64); err == nil {
			cat = categoryName(id)
		} else {
			cat = "unknown:" + clipReason(cat)
		}
		c.outcomes.add(clipReason(name), cat, clipReason(b.Tags["reason"]), int64(v))
	}
}

// bucketOutcomes reads a metric_buckets item payload (a JSON bucket list).
func (s *Server) bucketOutcomes(c *counters, payload []byte, src int) {
	var buckets []bucket
	if err := json.Unmarshal(payload, &buckets); err != nil {
		c.errors.add("bad_metric_buckets", 1)
		return
	}
	c.outcomeMsgs[src].Add(1)
	s.addBuckets(c, buckets)
}

type clientReportEntry struct {
	Reason   string `json:"reason"`
	Category string `json:"category"`
	Quantity int64  `json:"quantity"`
}

type clientReport struct {
	Discarded        []clientReportEntry `json:"discarded_events"`
	RateLimited      []clientReportEntry `json:"rate_limited_events"`
	Filtered         []clientReportEntry `json:"filtered_events"`
	FilteredSampling []clientReportEntry `json:"filtered_sampling_events"`
}

// clientReportOutcomes reads a client_report item (docs/protocol.md, Outcomes).
func (s *Server) clientReportOutcomes(c *counters, payload []byte) {
	var r clientReport
	if err := json.Unmarshal(payload, &r); err != nil {
		c.errors.add("bad_client_report", 1)
		return
	}
	c.outcomeMsgs[srcClientReport].Add(1)
	for _, g := range []struct {
		outcome string
		rows    []clientReportEntry
	}{
		{"client_discard", r.Discarded},
		{"rate_limited", r.RateLimited},
		{"filtered", r.Filtered},
		{"filtered", r.FilteredSampling},
	} {
		for _, e := range g.rows {
			c.outcomes.add(g.outcome, clipReason(e.Category), clipReason(e.Reason), e.Quantity)
		}
	}
}

type legacyOutcome struct {
	Outcome  int64   `json:"outcome"`
	Category *int64  `json:"category"`
	Quantity *int64  `json:"quantity"`
	Reason   *string `json:"reason"`
}

// handleLegacyOutcomes serves POST /api/0/relays/outcomes/ (Relay ≤ 26.5).
func (s *Server) handleLegacyOutcomes(w http.ResponseWriter, req *http.Request, c *counters) {
	body, release, _, ok := s.signedQuery(w, req, c)
	if !ok {
		return
	}
	defer release()
	var q struct {
		Outcomes []legacyOutcome `json:"outcomes"`
	}
	if e := decodeJSON(body, &q, "outcomes batch"); e != nil {
		s.writeError(w, c, e)
		return
	}
	c.outcomeMsgs[srcLegacy].Add(1)
	for _, o := range q.Outcomes {
		cat := "default"
		if o.Category != nil {
			cat = categoryName(*o.Category)
		}
		qty := int64(1)
		if o.Quantity != nil {
			qty = *o.Quantity
		}
		reason := ""
		if o.Reason != nil {
			reason = clipReason(*o.Reason)
		}
		c.outcomes.add(outcomeName(o.Outcome), cat, reason, qty)
	}
	writeRawJSON(w, http.StatusOK, emptyObject)
}

// handleMetrics serves POST /api/0/relays/metrics/ (http.global_metrics):
// the body is compressed, the signature covers the decoded body.
func (s *Server) handleMetrics(w http.ResponseWriter, req *http.Request, c *counters) {
	body, release, _, ok := s.signedQuery(w, req, c)
	if !ok {
		return
	}
	defer release()
	var q struct {
		Buckets map[string][]bucket `json:"buckets"`
	}
	if e := decodeJSON(body, &q, "metrics batch"); e != nil {
		s.writeError(w, c, e)
		return
	}
	c.outcomeMsgs[srcMetricsEndpoint].Add(1)
	for _, bs := range q.Buckets {
		s.addBuckets(c, bs)
	}
	writeRawJSON(w, http.StatusOK, emptyObject)
}
