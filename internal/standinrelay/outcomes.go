package standinrelay

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Outcome ids (docs/protocol.md, Outcomes).
const (
	outcomeAccepted      = 0
	outcomeFiltered      = 1
	outcomeRateLimited   = 2
	outcomeInvalid       = 3
	outcomeAbuse         = 4
	outcomeClientDiscard = 5
)

var outcomeNames = map[int]string{
	outcomeAccepted: "accepted", outcomeFiltered: "filtered", outcomeRateLimited: "rate_limited",
	outcomeInvalid: "invalid", outcomeAbuse: "abuse", outcomeClientDiscard: "client_discard",
	6: "cardinality_limited",
}

// Data categories (docs/protocol.md, Outcomes) the stand-in produces.
const (
	catDefault            = 0
	catError              = 1
	catTransaction        = 2
	catSecurity           = 3
	catAttachment         = 4
	catSession            = 5
	catProfile            = 6
	catReplay             = 7
	catTransactionIndexed = 9
	catMonitor            = 10
	catSpan               = 12
	catFeedback           = 14
	catSpanIndexed        = 16
	catAttachmentItem     = 22
	catLogItem            = 23
	catLogByte            = 24
)

// categoryNames maps ids to the names used in client reports and rate limits.
var categoryNames = []string{
	"default", "error", "transaction", "security", "attachment", "session", "profile", "replay",
	"transaction_processed", "transaction_indexed", "monitor", "profile_indexed", "span",
	"monitor_seat", "feedback", "metric_bucket", "span_indexed", "profile_duration", "profile_chunk",
	"metric_second", "replay_video", "uptime", "attachment_item", "log_item", "log_byte",
	"profile_duration_ui", "profile_chunk_ui", "seer_autofix", "seer_scanner", "prevent_user",
	"prevent_review", "size_analysis", "installable_build", "trace_metric", "seer_user",
	"profile_backend", "profile_ui",
}

func categoryName(id int) string {
	if id >= 0 && id < len(categoryNames) {
		return categoryNames[id]
	}
	return "unknown"
}

func categoryID(name string) (int, bool) {
	for i, n := range categoryNames {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// maxOutcomeRows bounds the aggregator (reasons may come from SDK client
// reports); rows beyond it are dropped and counted.
const maxOutcomeRows = 50_000

type outcomeRow struct {
	key       string
	projectID int64
	bucket    int64 // bucket index: floor(time / bucket_interval)
	outcome   int
	category  int
	reason    string
}

// outcomeAggregator sums outcomes per bucket_interval, the way 26.6+ feeds
// them into the metrics aggregator as counter buckets.
type outcomeAggregator struct {
	interval time.Duration
	mu       sync.Mutex
	rows     map[outcomeRow]float64
	dropped  int64
}

func newOutcomeAggregator(interval time.Duration) *outcomeAggregator {
	return &outcomeAggregator{interval: interval, rows: map[outcomeRow]float64{}}
}

func (a *outcomeAggregator) add(s scoping, outcome int, reason string, category int, qty float64, now time.Time) {
	if qty <= 0 {
		return
	}
	row := outcomeRow{key: s.key, projectID: s.projectID, bucket: now.UnixNano() / int64(a.interval), outcome: outcome, category: category, reason: reason}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.rows[row]; !ok && len(a.rows) >= maxOutcomeRows {
		a.dropped++
		return
	}
	a.rows[row] += qty
}

// take removes the rows of closed buckets (all rows if all is set).
func (a *outcomeAggregator) take(now time.Time, all bool) map[outcomeRow]float64 {
	current := now.UnixNano() / int64(a.interval)
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[outcomeRow]float64{}
	for row, q := range a.rows {
		if all || row.bucket < current {
			out[row] = q
			delete(a.rows, row)
		}
	}
	return out
}

// metricBucket is one element of a metric_buckets payload.
type metricBucket struct {
	Timestamp int64             `json:"timestamp"`
	Width     int64             `json:"width"`
	Name      string            `json:"name"`
	Type      string            `json:"type"`
	Value     float64           `json:"value"`
	Tags      map[string]string `json:"tags"`
}

type clientReportEntry struct {
	Reason   string  `json:"reason"`
	Category string  `json:"category"`
	Quantity float64 `json:"quantity"`
}

type clientReport struct {
	Timestamp      int64               `json:"timestamp"`
	RateLimited    []clientReportEntry `json:"rate_limited_events,omitempty"`
	Filtered       []clientReportEntry `json:"filtered_events,omitempty"`
	FilteredSample []clientReportEntry `json:"filtered_sampling_events,omitempty"`
	Discarded      []clientReportEntry `json:"discarded_events,omitempty"`
}

type projectScope struct {
	key       string
	projectID int64
}

// outcomeItems turns taken rows into one payload per project: a
// metric_buckets JSON array (emit_outcomes: true) or a client_report
// (as_client_reports). The item type is returned with each payload.
func (r *Relay) outcomeItems(rows map[outcomeRow]float64) map[projectScope][]itemPayload {
	if len(rows) == 0 || r.cfg.EmitOutcomes == OutcomesOff {
		return nil
	}
	byProject := map[projectScope][]outcomeRow{}
	for row := range rows {
		ps := projectScope{row.key, row.projectID}
		byProject[ps] = append(byProject[ps], row)
	}
	out := map[projectScope][]itemPayload{}
	for ps, rs := range byProject {
		sort.Slice(rs, func(i, j int) bool { return lessRow(rs[i], rs[j]) })
		if r.cfg.EmitOutcomes == OutcomesOn {
			buckets := make([]metricBucket, 0, len(rs))
			for _, row := range rs {
				tags := map[string]string{"category": strconv.Itoa(row.category)}
				if row.reason != "" {
					tags["reason"] = row.reason
				}
				if r.cfg.OutcomeSource != "" {
					tags["source"] = r.cfg.OutcomeSource
				}
				buckets = append(buckets, metricBucket{
					Timestamp: bucketTimestamp(row.bucket, r.cfg.BucketInterval),
					Name:      "c:outcomes/" + outcomeNames[row.outcome] + "@none",
					Type:      "c",
					Value:     rows[row],
					Tags:      tags,
				})
			}
			b, _ := json.Marshal(buckets)
			out[ps] = append(out[ps], itemPayload{typ: "metric_buckets", payload: b})
			continue
		}
		// as_client_reports: one report per bucket timestamp, only the
		// outcomes Relay reports this way (docs/protocol.md, Outcomes).
		reports := map[int64]*clientReport{}
		var order []int64
		for _, row := range rs {
			ts := bucketTimestamp(row.bucket, r.cfg.BucketInterval)
			e := clientReportEntry{Reason: row.reason, Category: categoryName(row.category), Quantity: rows[row]}
			rep := reports[ts]
			if rep == nil {
				rep = &clientReport{Timestamp: ts}
			}
			switch {
			case row.outcome == outcomeRateLimited:
				rep.RateLimited = append(rep.RateLimited, e)
			case row.outcome == outcomeFiltered && len(row.reason) >= 8 && row.reason[:8] == "Sampled:":
				rep.FilteredSample = append(rep.FilteredSample, e)
			case row.outcome == outcomeFiltered:
				rep.Filtered = append(rep.Filtered, e)
			case row.outcome == outcomeClientDiscard,
				row.outcome == outcomeInvalid && (row.reason == "invalid_signature" || row.reason == "missing_signature"):
				rep.Discarded = append(rep.Discarded, e)
			default:
				continue
			}
			if reports[ts] == nil {
				reports[ts] = rep
				order = append(order, ts)
			}
		}
		for _, ts := range order {
			b, _ := json.Marshal(reports[ts])
			out[ps] = append(out[ps], itemPayload{typ: "client_report", payload: b})
		}
	}
	return out
}

func lessRow(a, b outcomeRow) bool {
	if a.bucket != b.bucket {
		return a.bucket < b.bucket
	}
	if a.outcome != b.outcome {
		return a.outcome < b.outcome
	}
	if a.category != b.category {
		return a.category < b.category
	}
	return a.reason < b.reason
}

func bucketTimestamp(bucket int64, interval time.Duration) int64 {
	return int64(math.Floor(float64(bucket) * interval.Seconds()))
}

// itemPayload is one Relay-made item.
type itemPayload struct {
	typ     string
	payload []byte
}

// runOutcomes flushes closed outcome buckets after initial_delay and then
// every bucket_interval, until ctx ends.
func (r *Relay) runOutcomes(ctx context.Context) {
	if !sleep(ctx, r.cfg.InitialDelay) {
		return
	}
	t := time.NewTicker(r.cfg.BucketInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.flushOutcomes(ctx, false)
		}
	}
}

// flushOutcomes sends closed buckets (all with all) upstream, one envelope
// per project, through the forwarding queue.
func (r *Relay) flushOutcomes(ctx context.Context, all bool) {
	items := r.outcomeItems(r.outcomes.take(time.Now(), all))
	scopes := make([]projectScope, 0, len(items))
	for ps := range items {
		scopes = append(scopes, ps)
	}
	sort.Slice(scopes, func(i, j int) bool {
		return scopes[i].projectID < scopes[j].projectID || scopes[i].projectID == scopes[j].projectID && scopes[i].key < scopes[j].key
	})
	for _, ps := range scopes {
		for _, it := range items[ps] {
			body := r.relayEnvelope(ps, it)
			r.stats.outcomeEnvelopes.Add(1)
			r.forward(ctx, &envelopeRequest{projectID: ps.projectID, publicKey: ps.key, body: body}, "outcomes")
		}
	}
}

// emitOutcome records an outcome for a project whose scoping is known.
func (r *Relay) emitOutcome(s scoping, outcome int, reason string, category int, qty float64) {
	if r.cfg.EmitOutcomes == OutcomesOff || s.projectID == 0 {
		return
	}
	r.stats.outcomes.Add(int64(math.Round(qty)))
	r.metrics.Count("events.outcomes", int64(math.Round(qty)), "outcome:"+outcomeNames[outcome], "reason:"+reason, "category:"+categoryName(category))
	r.outcomes.add(s, outcome, reason, category, qty, time.Now())
}
