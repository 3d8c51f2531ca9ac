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

	"github.com/relayload/relayload/envelope"
)

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
	case errors.Is(err, errQuantity):
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
		q, err := parseQuantity(bk.Value)
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
	Reason   string   `json:"reason"`
	Category string   `json:"category"`
	Quantity quantity `json:"quantity"`
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
	Outcome  int64    `json:"outcome"`
	Category int64    `json:"category"`
	Quantity quantity `json:"quantity"`
	Reason   string   `json:"reason"`
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
