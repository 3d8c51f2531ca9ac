package upstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relayload/relayload/envelope"
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

// outcomeRecord is one outcome as a carrier states it.
type outcomeRecord struct {
	outcome, category, reason string
	quantity                  int64
}

// outcomeBatch is what one request's outcome carriers hold. A request's
// carriers are read in full before anything is counted, so one refused as
// bad input (a negative or fractional quantity, JSON that is not a report)
// leaves no partial counts behind.
type outcomeBatch struct {
	records      []outcomeRecord
	messages     [len(outcomeSourceNames)]int64 // carriers by source
	otherBuckets int64                          // metric buckets that are not outcomes
}

// count adds the batch to c.
func (b *outcomeBatch) count(c *counters) {
	for i, n := range b.messages {
		if n != 0 {
			c.outcomeMsgs[i].Add(n)
		}
	}
	if b.otherBuckets != 0 {
		c.metricBuckets.Add(b.otherBuckets)
	}
	if len(b.records) > 0 {
		c.outcomes.addAll(b.records)
	}
}

// badQuantity is the answer for a carrier with a quantity that is not a
// count; where says which carrier.
func badQuantity(err error, where string) *httpError {
	return newError(http.StatusBadRequest, "bad_outcome_quantity", "invalid outcome quantity: a quantity is a whole number in 0..2^63-1",
		where+": "+err.Error())
}

// carrierError answers a carrier that cannot be read: a bad quantity, else
// reason with detail.
func carrierError(err error, reason, detail, where string) *httpError {
	if errors.Is(err, errQuantity) {
		return badQuantity(err, where)
	}
	return newError(http.StatusBadRequest, reason, detail, where+": "+err.Error())
}

// readBuckets adds outcome buckets (c:outcomes/<name>@none) to b and counts
// the other metric buckets; an outcome bucket's value must be a quantity.
func (b *outcomeBatch) readBuckets(buckets []bucket, where string) *httpError {
	for i := range buckets {
		bk := &buckets[i]
		name, ok := strings.CutPrefix(bk.Name, outcomePrefix)
		if ok {
			name, ok = strings.CutSuffix(name, outcomeSuffix)
		}
		if !ok {
			b.otherBuckets++
			continue
		}
		q, err := parseQuantity(bk.Value)
		if err != nil {
			return badQuantity(err, where+" bucket "+strconv.Itoa(i))
		}
		cat := bk.Tags["category"]
		if id, err := strconv.ParseInt(cat, 10, 64); err == nil {
			cat = categoryName(id)
		} else {
			cat = "unknown:" + clipReason(cat)
		}
		b.records = append(b.records, outcomeRecord{clipReason(name), cat, clipReason(bk.Tags["reason"]), q})
	}
	return nil
}

// readMetricBucketsItem reads a metric_buckets item payload (a JSON bucket
// list).
func (b *outcomeBatch) readMetricBucketsItem(payload []byte, where string) *httpError {
	var buckets []bucket
	if err := json.Unmarshal(payload, &buckets); err != nil {
		return carrierError(err, "bad_metric_buckets", "invalid metric_buckets item", where)
	}
	b.messages[srcMetricBuckets]++
	return b.readBuckets(buckets, where)
}

type clientReportEntry struct {
	Reason   string   `json:"reason"`
	Category string   `json:"category"`
	Quantity quantity `json:"quantity"`
}

type clientReport struct {
	Discarded        []clientReportEntry `json:"discarded_events"`
	RateLimited      []clientReportEntry `json:"rate_limited_events"`
	Filtered         []clientReportEntry `json:"filtered_events"`
	FilteredSampling []clientReportEntry `json:"filtered_sampling_events"`
}

// readClientReportItem reads a client_report item (docs/protocol.md,
// Outcomes).
func (b *outcomeBatch) readClientReportItem(payload []byte, where string) *httpError {
	var r clientReport
	if err := json.Unmarshal(payload, &r); err != nil {
		return carrierError(err, "bad_client_report", "invalid client_report item", where)
	}
	b.messages[srcClientReport]++
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
			b.records = append(b.records, outcomeRecord{g.outcome, clipReason(e.Category), clipReason(e.Reason), int64(e.Quantity)})
		}
	}
	return nil
}

// readEnvelopeOutcomes reads the client_report and metric_buckets items of
// a scanned envelope. It returns nil, nil when the envelope has none, so
// envelopes of data allocate nothing here.
func readEnvelopeOutcomes(decoded []byte, sum *envelope.Summary) (*outcomeBatch, *httpError) {
	var b *outcomeBatch
	for i := range sum.Items {
		it := &sum.Items[i]
		ti := itemTypeIndex(it.Type)
		if ti != itemClientReport && ti != itemMetricBuckets {
			continue
		}
		if b == nil {
			b = &outcomeBatch{}
		}
		payload := decoded[it.PayloadStart:it.PayloadEnd]
		where := itemTypes[ti] + " item " + strconv.Itoa(i)
		var e *httpError
		if ti == itemClientReport {
			e = b.readClientReportItem(payload, where)
		} else {
			e = b.readMetricBucketsItem(payload, where)
		}
		if e != nil {
			return nil, e
		}
	}
	return b, nil
}

type legacyOutcome struct {
	Outcome  int64     `json:"outcome"`
	Category *int64    `json:"category"`
	Quantity *quantity `json:"quantity"`
	Reason   *string   `json:"reason"`
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
	if err := json.Unmarshal(body, &q); err != nil {
		s.writeError(w, c, carrierError(err, "bad_json", "invalid JSON in outcomes batch", "outcomes batch"))
		return
	}
	b := outcomeBatch{records: make([]outcomeRecord, 0, len(q.Outcomes))}
	b.messages[srcLegacy] = 1
	for _, o := range q.Outcomes {
		cat := "default"
		if o.Category != nil {
			cat = categoryName(*o.Category)
		}
		qty := int64(1)
		if o.Quantity != nil {
			qty = int64(*o.Quantity)
		}
		reason := ""
		if o.Reason != nil {
			reason = clipReason(*o.Reason)
		}
		b.records = append(b.records, outcomeRecord{outcomeName(o.Outcome), cat, reason, qty})
	}
	b.count(c)
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
	if err := json.Unmarshal(body, &q); err != nil {
		s.writeError(w, c, carrierError(err, "bad_json", "invalid JSON in metrics batch", "metrics batch"))
		return
	}
	var b outcomeBatch
	b.messages[srcMetricsEndpoint] = 1
	for key, bs := range q.Buckets {
		if e := b.readBuckets(bs, "metrics batch, project key "+clipReason(key)); e != nil {
			s.writeError(w, c, e)
			return
		}
	}
	b.count(c)
	writeRawJSON(w, http.StatusOK, emptyObject)
}
