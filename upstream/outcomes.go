package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/tally"
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

// Outcome carriers (docs/protocol.md, Outcomes): client_report and
// metric_buckets items, legacy batches and metrics-endpoint batches. Each is
// streamed element by element (its memory is that of its largest element,
// not of its length) into the request's own outcomeBatch, merged into the
// counters only once the request is read in full: an invalid carrier is
// refused whole with 400 and leaves no partial counts.

// outcomeBatch is what one request's carriers hold, summed.
type outcomeBatch struct {
	table        outcomeTable
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
	c.outcomes.merge(&b.table)
}

// jsonWalker reads one JSON document token by token.
type jsonWalker struct{ dec *json.Decoder }

func newJSONWalker(b []byte) jsonWalker { return jsonWalker{json.NewDecoder(bytes.NewReader(b))} }

// each calls fn for each element of the array, or each key of the object,
// that comes next (null is an empty one, as for json.Unmarshal); fn must
// read the element, or the key's value.
func (w jsonWalker) each(open json.Delim, fn func(i int, key string) error) error {
	t, err := w.dec.Token()
	if err != nil || t == nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != open {
		return fmt.Errorf("want %s, found %v", string(open), t)
	}
	for i := 0; w.dec.More(); i++ {
		var key string
		if open == '{' {
			if t, err = w.dec.Token(); err != nil {
				return err
			}
			key = t.(string) // keys are strings
		}
		if err := fn(i, key); err != nil {
			return err
		}
	}
	_, err = w.dec.Token() // the closing delimiter
	return err
}

// skip reads and drops the next value.
func (w jsonWalker) skip() error {
	var v json.RawMessage
	return w.dec.Decode(&v)
}

// finish ends reading a carrier whose walk returned err: the document must
// end there; a bad quantity, or else reason with detail, answers a failure.
func (w jsonWalker) finish(err error, reason, detail, where string) *httpError {
	if _, end := w.dec.Token(); err == nil && !errors.Is(end, io.EOF) {
		err = errors.New("invalid character after top-level value")
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tally.ErrCount):
		return newError(http.StatusBadRequest, "bad_outcome_quantity", "invalid outcome quantity: a quantity is a whole number in 0..2^63-1",
			where+": "+err.Error())
	}
	return newError(http.StatusBadRequest, reason, detail, where+": "+err.Error())
}

// bucket is the part of a metric bucket the fake reads.
type bucket struct {
	Name  string            `json:"name"`
	Value json.RawMessage   `json:"value"`
	Tags  map[string]string `json:"tags"`
}

const outcomePrefix, outcomeSuffix = "c:outcomes/", "@none"

// bucketList reads a JSON list of buckets into b: outcome buckets
// (c:outcomes/<name>@none, whose value must be a quantity) as outcomes, the
// others only counted.
func (w jsonWalker) bucketList(b *outcomeBatch) error {
	var bk bucket
	return w.each('[', func(i int, _ string) error {
		bk = bucket{Value: bk.Value[:0]}
		if err := w.dec.Decode(&bk); err != nil {
			return fmt.Errorf("bucket %d: %w", i, err)
		}
		name, ok := strings.CutPrefix(bk.Name, outcomePrefix)
		if ok {
			name, ok = strings.CutSuffix(name, outcomeSuffix)
		}
		if !ok {
			b.otherBuckets++
			return nil
		}
		q, err := tally.ParseCount(bk.Value)
		if err != nil {
			return fmt.Errorf("bucket %d: %w", i, err)
		}
		cat := bk.Tags["category"]
		if id, err := strconv.ParseInt(cat, 10, 64); err == nil {
			cat = idName(categoryNames[:], id)
		} else {
			cat = "unknown:" + clipReason(cat)
		}
		b.table.add(clipReason(name), cat, clipReason(bk.Tags["reason"]), q)
		return nil
	})
}

// readMetricBucketsItem reads a metric_buckets item payload (a JSON bucket
// list).
func readMetricBucketsItem(payload []byte, b *outcomeBatch, where string) *httpError {
	w := newJSONWalker(payload)
	err := w.bucketList(b)
	return w.finish(err, "bad_metric_buckets", "invalid metric_buckets item", where)
}

type clientReportEntry struct {
	Reason   string      `json:"reason"`
	Category string      `json:"category"`
	Quantity tally.Count `json:"quantity"`
}

// clientReportOutcomes are the outcomes of a client report's lists, by key.
var clientReportOutcomes = map[string]string{"discarded_events": "client_discard", "rate_limited_events": "rate_limited",
	"filtered_events": "filtered", "filtered_sampling_events": "filtered"}

// readClientReportItem reads a client_report item (docs/protocol.md,
// Outcomes).
func readClientReportItem(payload []byte, b *outcomeBatch, where string) *httpError {
	w := newJSONWalker(payload)
	err := w.each('{', func(_ int, key string) error {
		outcome := clientReportOutcomes[key]
		if outcome == "" {
			return w.skip()
		}
		var e clientReportEntry
		return w.each('[', func(i int, _ string) error {
			e = clientReportEntry{}
			if err := w.dec.Decode(&e); err != nil {
				return fmt.Errorf("%s %d: %w", key, i, err)
			}
			b.table.add(outcome, clipReason(e.Category), clipReason(e.Reason), int64(e.Quantity))
			return nil
		})
	})
	return w.finish(err, "bad_client_report", "invalid client_report item", where)
}

// readEnvelopeOutcomes reads the client_report and metric_buckets items of
// a scanned envelope. It returns nil when the envelope has none, so an
// envelope of data costs one pass over its item types here and allocates
// nothing.
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
			e = readClientReportItem(payload, b, where)
			b.messages[srcClientReport]++
		} else {
			e = readMetricBucketsItem(payload, b, where)
			b.messages[srcMetricBuckets]++
		}
		if e != nil {
			return nil, e
		}
	}
	return b, nil
}

// legacyOutcome is one outcome of a legacy batch. A field it lacks, or
// holds as null, keeps its default: category 0 ("default"), quantity 1.
type legacyOutcome struct {
	Outcome  int64       `json:"outcome"`
	Category int64       `json:"category"`
	Quantity tally.Count `json:"quantity"`
	Reason   string      `json:"reason"`
}

// readLegacyBatch reads a legacy outcome batch {"outcomes": [...]}.
func readLegacyBatch(body []byte, b *outcomeBatch) *httpError {
	w := newJSONWalker(body)
	err := w.each('{', func(_ int, key string) error {
		if key != "outcomes" {
			return w.skip()
		}
		var o legacyOutcome
		return w.each('[', func(i int, _ string) error {
			o = legacyOutcome{Quantity: 1}
			if err := w.dec.Decode(&o); err != nil {
				return fmt.Errorf("outcome %d: %w", i, err)
			}
			b.table.add(idName(outcomeNames[:], o.Outcome), idName(categoryNames[:], o.Category), clipReason(o.Reason), int64(o.Quantity))
			return nil
		})
	})
	return w.finish(err, "bad_json", "invalid JSON in outcomes batch", "outcomes batch")
}

// readMetricsBatch reads a metrics endpoint batch {"buckets": {key: [...]}}.
func readMetricsBatch(body []byte, b *outcomeBatch) *httpError {
	w := newJSONWalker(body)
	err := w.each('{', func(_ int, key string) error {
		if key != "buckets" {
			return w.skip()
		}
		return w.each('{', func(_ int, projectKey string) error {
			if err := w.bucketList(b); err != nil {
				return fmt.Errorf("project key %s: %w", clipReason(projectKey), err)
			}
			return nil
		})
	})
	return w.finish(err, "bad_json", "invalid JSON in metrics batch", "metrics batch")
}
