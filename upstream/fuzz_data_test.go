package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/relayload/relayload/internal/tally"
)

// FuzzCheckRateLimits: an accepted rate_limits value is bounded in length
// and every quota's retry_after in seconds.
func FuzzCheckRateLimits(f *testing.F) {
	for _, s := range []string{"60::organization", "60:error;transaction:project:quota, 30::key", "3601:error", "x:error", ",,", "1.5:error", "-1:error", "NaN:error"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if checkRateLimits(v) != nil {
			return
		}
		if len(v) > maxRateLimitsLen {
			t.Fatalf("accepted %d bytes", len(v))
		}
		for _, q := range strings.Split(v, ",") {
			ra, _, _ := strings.Cut(strings.TrimSpace(q), ":")
			if ra == "" && strings.TrimSpace(q) == "" {
				continue
			}
			if secs, err := strconv.ParseFloat(ra, 64); err != nil || secs < 0 || secs > maxRetryAfter {
				t.Fatalf("accepted %q with retry_after %q", v, ra)
			}
		}
	})
}

// TestOutcomeRowsSaturate: an outcome row's sums stop at 2⁶³−1.
func TestOutcomeRowsSaturate(t *testing.T) {
	var tab outcomeTable
	tab.add("accepted", "error", "", math.MaxInt64)
	tab.add("accepted", "error", "", math.MaxInt64)
	if r := tab.rows[outcomeKey{"accepted", "error", ""}]; r.quantity != math.MaxInt64 || r.count != 2 {
		t.Errorf("row = %+v", *r)
	}
}

// outcomeRecord is one outcome as a carrier states it.
type outcomeRecord struct {
	outcome, category, reason string
	quantity                  int64
}

// hasDuplicateKeys reports whether some object in the JSON document b
// repeats a key (json.Unmarshal keeps the last, the streaming readers read
// both), or b is not one JSON document.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		keys   map[string]bool
		object bool
		atKey  bool
	}
	var stack []frame
	for {
		t, err := dec.Token()
		if err != nil {
			return !errors.Is(err, io.EOF)
		}
		top := len(stack) - 1
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top >= 0 && stack[top].object {
					stack[top].atKey = true
				}
				stack = append(stack, frame{keys: map[string]bool{}, object: d == '{', atKey: true})
			default:
				stack = stack[:top]
			}
			continue
		}
		if top >= 0 && stack[top].object {
			if stack[top].atKey {
				k := t.(string)
				if stack[top].keys[k] {
					return true
				}
				stack[top].keys[k] = true
			}
			stack[top].atKey = !stack[top].atKey
		}
	}
}

// referenceRecords decodes a carrier with json.Unmarshal (what the readers
// replaced) into the records it holds, in document order for lists. Kinds:
// 0 metric_buckets item, 1 client_report item, 2 metrics batch, 3 legacy
// batch.
func referenceRecords(kind int, b []byte) ([]outcomeRecord, int, error) {
	var recs []outcomeRecord
	other := 0
	buckets := func(bs []bucket) error {
		for _, bk := range bs {
			name, ok := strings.CutPrefix(bk.Name, outcomePrefix)
			if ok {
				name, ok = strings.CutSuffix(name, outcomeSuffix)
			}
			if !ok {
				other++
				continue
			}
			q, err := tally.ParseCount(bk.Value)
			if err != nil {
				return err
			}
			cat := bk.Tags["category"]
			if id, err := strconv.ParseInt(cat, 10, 64); err == nil {
				cat = idName(categoryNames[:], id)
			} else {
				cat = "unknown:" + clipReason(cat)
			}
			recs = append(recs, outcomeRecord{clipReason(name), cat, clipReason(bk.Tags["reason"]), q})
		}
		return nil
	}
	switch kind {
	case 0:
		var bs []bucket
		if err := json.Unmarshal(b, &bs); err != nil {
			return nil, 0, err
		}
		return recs, other, buckets(bs)
	case 1:
		var r map[string]json.RawMessage
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, 0, err
		}
		for _, key := range []string{"discarded_events", "rate_limited_events", "filtered_events", "filtered_sampling_events"} {
			var es []clientReportEntry
			if raw, ok := r[key]; ok {
				if err := json.Unmarshal(raw, &es); err != nil {
					return nil, 0, err
				}
			}
			for _, e := range es {
				recs = append(recs, outcomeRecord{clientReportOutcomes[key], clipReason(e.Category), clipReason(e.Reason), int64(e.Quantity)})
			}
		}
		return recs, 0, nil
	case 3:
		var top map[string]json.RawMessage
		if err := json.Unmarshal(b, &top); err != nil {
			return nil, 0, err
		}
		var outs []struct {
			Outcome  int64        `json:"outcome"`
			Category *int64       `json:"category"`
			Quantity *tally.Count `json:"quantity"`
			Reason   *string      `json:"reason"`
		}
		if raw, ok := top["outcomes"]; ok {
			if err := json.Unmarshal(raw, &outs); err != nil {
				return nil, 0, err
			}
		}
		for _, o := range outs {
			r := outcomeRecord{idName(outcomeNames[:], o.Outcome), "default", "", 1}
			if o.Category != nil {
				r.category = idName(categoryNames[:], *o.Category)
			}
			if o.Quantity != nil {
				r.quantity = int64(*o.Quantity)
			}
			if o.Reason != nil {
				r.reason = clipReason(*o.Reason)
			}
			recs = append(recs, r)
		}
		return recs, 0, nil
	default:
		// Top-level keys are matched exactly, as Relay (serde) does, not
		// case-insensitively as json.Unmarshal matches struct fields.
		var top map[string]json.RawMessage
		if err := json.Unmarshal(b, &top); err != nil {
			return nil, 0, err
		}
		var byKey map[string][]bucket
		if raw, ok := top["buckets"]; ok {
			if err := json.Unmarshal(raw, &byKey); err != nil {
				return nil, 0, err
			}
		}
		for _, bs := range byKey {
			if err := buckets(bs); err != nil {
				return nil, 0, err
			}
		}
		return recs, other, nil
	}
}

// FuzzOutcomeCarriers: a carrier reader refuses with a 400 or accepts valid
// JSON, and, for documents without repeated keys, it accepts what
// json.Unmarshal accepts and sums the same records.
func FuzzOutcomeCarriers(f *testing.F) {
	f.Add(0, []byte(`[{"name":"c:outcomes/filtered@none","type":"c","value":2.0,"tags":{"category":"1","reason":"r"}},{"name":"d:x@ms","value":[1,2]}]`))
	f.Add(1, []byte(`{"timestamp":1,"discarded_events":[{"reason":"q","category":"error","quantity":4}],"filtered_events":null}`))
	f.Add(2, []byte(`{"buckets":{"k":[{"name":"c:outcomes/accepted@none","value":1,"tags":{}}]}}`))
	f.Add(1, []byte(`{"rate_limited_events":[{"category":"error","quantity":-1}]}`))
	f.Add(0, []byte(`null`))
	f.Add(2, []byte(`{"buckets":{"a":[],"a":[]}}`))
	f.Add(3, []byte(`{"outcomes":[{"outcome":2,"category":1,"reason":"r","quantity":7},{"outcome":3}]}`))
	f.Fuzz(func(t *testing.T, kind int, b []byte) {
		kind = (kind%4 + 4) % 4
		var batch outcomeBatch
		var checked *httpError
		switch kind {
		case 0:
			checked = readMetricBucketsItem(b, &batch, "fuzz")
		case 1:
			checked = readClientReportItem(b, &batch, "fuzz")
		case 2:
			checked = readMetricsBatch(b, &batch)
		default:
			checked = readLegacyBatch(b, &batch)
		}
		if checked != nil {
			if checked.status != 400 || checked.body.Detail == "" {
				t.Fatalf("refusal %+v", checked)
			}
		} else if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		if hasDuplicateKeys(b) {
			return
		}
		recs, other, err := referenceRecords(kind, b)
		if (err == nil) != (checked == nil) {
			t.Fatalf("json.Unmarshal: %v; streaming reader: %v (%q)", err, checked, b)
		}
		if err != nil {
			return
		}
		var want outcomeTable
		for _, r := range recs {
			want.add(r.outcome, r.category, r.reason, r.quantity)
		}
		if fmt.Sprint(tableRows(&want)) != fmt.Sprint(tableRows(&batch.table)) || batch.otherBuckets != int64(other) {
			t.Fatalf("rows\n got %v (+%d other)\nwant %v (+%d other)", tableRows(&batch.table), batch.otherBuckets, tableRows(&want), other)
		}
	})
}

// tableRows lists a table's rows sorted.
func tableRows(t *outcomeTable) []string {
	var out []string
	for k, r := range t.rows {
		out = append(out, fmt.Sprint(k, r.quantity, r.count, r.fold))
	}
	sort.Strings(out)
	return out
}

// TestOutcomeTableMergeFolds: a request's table folds past its own bound,
// and merging folds what the counters' table has no room for; every
// record's quantity arrives, and folded counts the records folded.
func TestOutcomeTableMergeFolds(t *testing.T) {
	var counters outcomeTable
	for i := 0; i < maxOutcomeRows-10; i++ {
		counters.add("accepted", "error", "r"+strconv.Itoa(i), 1)
	}
	var req outcomeTable
	for i := 0; i < maxOutcomeRows+500; i++ {
		req.add("filtered", "cat-"+strconv.Itoa(i), "x", 2)
	}
	if req.folded != 500 || len(req.rows) != maxOutcomeRows+1 {
		t.Fatalf("request table: %d rows, folded %d", len(req.rows), req.folded)
	}
	counters.merge(&req)
	var quantity int64
	for _, r := range counters.rows {
		quantity += r.quantity
	}
	if want := int64(maxOutcomeRows-10) + 2*int64(maxOutcomeRows+500); quantity != want {
		t.Errorf("quantity %d, want %d", quantity, want)
	}
	if want := int64(500 + maxOutcomeRows - 10); counters.folded != want {
		t.Errorf("folded %d, want %d (the request's 500 and all but 10 of its rows)", counters.folded, want)
	}
	if n := len(counters.rows); n != maxOutcomeRows+1 {
		t.Errorf("%d rows, want %d as sent and one fold row", n, maxOutcomeRows+1)
	}
	if r := counters.rows[outcomeKey{"filtered", "other", "other"}]; r == nil || !r.fold || r.count != int64(500+maxOutcomeRows-10) {
		t.Errorf("fold row %+v", r)
	}
}
