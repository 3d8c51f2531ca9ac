package upstream

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayload/relayload/internal/canary"
	"github.com/relayload/relayload/internal/capture"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/promtext"
	"github.com/relayload/relayload/internal/tally"
	"github.com/relayload/relayload/projects"
)

// itemTypes are the envelope item types counted in their own slot; any
// other lands in "other", so clients cannot grow the table.
var itemTypes = [...]string{
	"event", "transaction", "session", "sessions", "check_in", "log", "span",
	"otel_log", "otel_span", "otel_traces_data", "trace_metric", "client_report",
	"metric_buckets", "statsd", "metric_meta", "attachment", "user_report",
	"user_report_v2", "feedback", "profile", "profile_chunk", "replay_event",
	"replay_recording", "replay_video", "security", "raw_security", "form_data",
	"nel", "unreal_report", "other",
}

const otherItemType = len(itemTypes) - 1

// Slots of the item types the sink reads or checks beyond counting them
// (TestItemTypeSlots holds them to itemTypes).
const (
	itemEvent         = 0
	itemTransaction   = 1
	itemSession       = 2
	itemSessions      = 3
	itemLog           = 5
	itemSpan          = 6
	itemClientReport  = 11
	itemMetricBuckets = 12
	itemStatsd        = 13
	itemMetricMeta    = 14
	itemAttachment    = 15
	itemUserReport    = 16
	itemUnrealReport  = 28
)

// itemTypeSlots maps each item type to its slot in itemTypes.
var itemTypeSlots = func() map[string]int {
	m := make(map[string]int, len(itemTypes))
	for i, t := range itemTypes {
		m[t] = i
	}
	return m
}()

// itemTypeIndex maps an item type to its slot without allocating (the
// compiler does not copy b for a map index m[string(b)]).
func itemTypeIndex(b []byte) int {
	if i, ok := itemTypeSlots[string(b)]; ok {
		return i
	}
	return otherItemType
}

// Route names used in request statistics.
const (
	routeChallenge = iota
	routeResponse
	routeProjectConfigs
	routePublicKeys
	routeEnvelope
	routeStore
	routeMetrics
	routeOutcomes
	routeLive
	routeStats
	routeStatsReset
	routeProjects
	routeControl
	routeNotFound
	numRoutes
)

var routeNames = [numRoutes]string{
	"register_challenge", "register_response", "projectconfigs", "publickeys",
	"envelope", "store", "metrics", "outcomes", "live", "stats", "stats_reset",
	"projects", "control", "not_found",
}

// statusNames name the slots of counters by HTTP status; slot 0 counts
// requests dropped without an answer.
var statusNames = func() (names [600]string) {
	for code := range names {
		names[code] = strconv.Itoa(code)
	}
	return names
}()

// encodings is the fixed order of per-encoding byte counters.
var encodings = compression.Encodings()

func encodingIndex(e compression.Encoding) int { return max(slices.Index(encodings, e), 0) }

// maxOutcomeRows bounds the (outcome, category, reason) rows kept as sent,
// since clients choose all three; later new rows fold into reason "other"
// rows (foldKey), one at most per known outcome and category.
const (
	maxOutcomeRows = 2000
	maxUserAgents  = 10_000
)

// counters is one generation of statistics. ResetStats swaps in a fresh
// generation; a request loads the pointer once and counts everything it does
// into that generation, so a reset never splits one request's counts.
type counters struct {
	started  time.Time
	inflight atomic.Int64 // requests counting into this generation

	envelopes, dataEnvelopes     atomic.Int64
	envelopesRelay, envelopesSDK atomic.Int64
	arrivals                     timeline // data envelopes per second
	agentsMu                     sync.RWMutex
	agents                       map[string]struct{} // distinct User-Agent headers of accepted envelopes
	items, records               [len(itemTypes)]atomic.Int64

	encRequests, encWire, encDecoded [5]atomic.Int64

	projEnvelopes, projItems []atomic.Int64 // by project index

	challenges, responses atomic.Int64
	regFail               tally.Reasons

	cfgGlobal, cfgProject                  atomic.Int64
	keysServed, keysPending, keysUnchanged atomic.Int64
	keysUnknown, globalPendingServed       atomic.Int64
	sigVerified, sigNotChecked             atomic.Int64

	metricBuckets atomic.Int64 // non-outcome buckets
	outcomeMsgs   [4]atomic.Int64
	outcomes      outcomeTable

	canaryLeaks, canaryKept, canaryFound []atomic.Int64 // by index into canaryKinds
	scannedItems, scrubbedItems, panics  atomic.Int64
	faultsInjected                       tally.Reasons

	errors   tally.Reasons
	requests [numRoutes][600]atomic.Int64

	http httpLayerCounters // what Go's HTTP layer did
}

// countAgent adds ua to the distinct agents, maxUserAgents at most; a
// known agent costs a read lock and no allocation.
func (c *counters) countAgent(ua string) {
	c.agentsMu.RLock()
	_, known := c.agents[ua]
	full := len(c.agents) >= maxUserAgents
	c.agentsMu.RUnlock()
	if !known && !full {
		c.agentsMu.Lock()
		if len(c.agents) < maxUserAgents {
			c.agents[ua] = struct{}{}
		}
		c.agentsMu.Unlock()
	}
}

func (c *counters) userAgents() int64 {
	c.agentsMu.RLock()
	defer c.agentsMu.RUnlock()
	return int64(len(c.agents))
}

var (
	canaryKinds = canary.Kinds()
	canaryNames = func() (names []string) {
		for _, k := range canaryKinds {
			names = append(names, k.Name)
		}
		return names
	}()
)

func newCounters(nProjects int, now time.Time) *counters {
	c := &counters{
		started:       now,
		projEnvelopes: make([]atomic.Int64, nProjects),
		projItems:     make([]atomic.Int64, nProjects),
		agents:        map[string]struct{}{},
		canaryLeaks:   make([]atomic.Int64, len(canaryKinds)),
		canaryKept:    make([]atomic.Int64, len(canaryKinds)),
		canaryFound:   make([]atomic.Int64, len(canaryKinds)),
	}
	c.arrivals.start = now
	return c
}

// outcome sources in outcomeMsgs.
const (
	srcMetricBuckets = iota
	srcClientReport
	srcLegacy
	srcMetricsEndpoint
)

var outcomeSourceNames = [4]string{"metric_buckets", "client_report", "legacy_outcomes", "metrics_endpoint"}

type outcomeKey struct{ outcome, category, reason string }

// outcomeTable sums outcome records by (outcome, category, reason), in
// boundedly many rows (maxOutcomeRows); sums saturate at math.MaxInt64.
type outcomeTable struct {
	mu     sync.Mutex
	rows   map[outcomeKey]*outcomeRow
	asSent int   // rows created for a key as sent (≤ maxOutcomeRows)
	folded int64 // records folded into an "other" row
}

type outcomeRow struct {
	quantity, count int64
	fold            bool // created by folding
}

func (t *outcomeTable) add(outcome, category, reason string, quantity int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(outcomeKey{outcome, category, reason}, quantity, 1, false)
}

// merge adds o's rows (o must no longer change).
func (t *outcomeTable) merge(o *outcomeTable) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, r := range o.rows {
		t.addLocked(k, r.quantity, r.count, r.fold)
	}
	t.folded = tally.Add(t.folded, o.folded)
}

// addLocked adds count records of the given total quantity to row k; fold
// marks a row that is already the fold of others.
func (t *outcomeTable) addLocked(k outcomeKey, quantity, count int64, fold bool) {
	if t.rows == nil {
		t.rows = map[outcomeKey]*outcomeRow{}
	}
	r := t.rows[k]
	if r == nil {
		switch {
		case fold:
		case t.asSent < maxOutcomeRows:
			t.asSent++
		default:
			k, fold = foldKey(k), true
			t.folded = tally.Add(t.folded, count)
			r = t.rows[k]
		}
		if r == nil {
			r = &outcomeRow{fold: fold}
			t.rows[k] = r
		}
	}
	r.quantity = tally.Add(r.quantity, quantity)
	r.count = tally.Add(r.count, count)
}

// foldKey is the "other" row a key that found the table full goes to.
func foldKey(k outcomeKey) outcomeKey {
	out := outcomeKey{outcome: "other", category: "other", reason: "other"}
	if slices.Contains(outcomeNames[:], k.outcome) {
		out.outcome = k.outcome
	}
	if slices.Contains(categoryNames[:], k.category) {
		out.category = k.category
	}
	return out
}

// Stats is a snapshot of everything the fake upstream counted since start or
// the last reset. It marshals to the /stats JSON as-is.
type Stats struct {
	UptimeSeconds     float64 `json:"uptime_seconds" prom:"uptime_seconds,gauge" help:"Seconds since the fake upstream started."`
	SinceResetSeconds float64 `json:"since_reset_seconds" prom:"since_reset_seconds,gauge" help:"Seconds since the counters were last reset."`

	Registrations  Registrations  `json:"registrations"`
	ConfigRequests ConfigRequests `json:"config_requests"`
	Signatures     Signatures     `json:"signatures"`

	// Envelopes accepted by the envelope sink (2xx), by who sent them:
	// "relay" (X-Sentry-Relay-Id present and verified) or "sdk".
	Envelopes         int64            `json:"envelopes" prom:"envelopes_total" help:"Envelopes accepted by the sink."`
	EnvelopesBySender map[string]int64 `json:"envelopes_by_sender" prom:"envelopes_by_sender_total,sender" help:"Envelopes accepted by sender."`
	// DataEnvelopes are the envelopes with at least one item that is
	// neither metrics nor a client report; Timeline has them per second
	// (a series, so not in the Prometheus form).
	DataEnvelopes int64    `json:"data_envelopes" prom:"data_envelopes_total" help:"Envelopes with an item that is neither metrics nor a client report."`
	Timeline      Timeline `json:"timeline" prom:"-"`
	// UserAgents counts the distinct User-Agent headers of accepted
	// envelopes (a Relay's forwards carry its own), up to 10000.
	UserAgents int64 `json:"user_agents" prom:"user_agents,gauge" help:"Distinct User-Agent headers of accepted envelopes, up to 10000."`
	// ItemsByType counts envelope items; RecordsByType counts what they hold
	// (a log container's item_count, 1 for other items).
	ItemsByType   map[string]int64            `json:"items_by_type" prom:"items_total,type" help:"Envelope items by type."`
	RecordsByType map[string]int64            `json:"records_by_type" prom:"records_total,type" help:"Records in envelope items (item_count, else 1) by type."`
	Bytes         map[string]EncodingBytes    `json:"bytes_by_encoding" prom:",encoding"`
	TopProjects   []ProjectStats              `json:"top_projects"`
	MetricBuckets int64                       `json:"metric_buckets" prom:"metric_buckets_total" help:"Non-outcome metric buckets received."`
	Outcomes      Outcomes                    `json:"outcomes"`
	Canaries      Canaries                    `json:"canaries"`
	Errors        map[string]int64            `json:"errors" prom:"errors_total,reason" help:"Rejected requests by reason."`
	Requests      map[string]map[string]int64 `json:"requests" prom:"requests_total,route,status" help:"Requests by route and status."`
	Faults        map[string]int64            `json:"faults_injected" prom:"faults_injected_total,fault" help:"Injected faults by kind."`
	Panics        int64                       `json:"panics" prom:"panics_total" help:"Recovered handler panics."`
	// InFlight is the requests being handled when the snapshot was taken
	// (over /stats, not counting that request).
	InFlight int64 `json:"in_flight" prom:"in_flight_requests,gauge" help:"Requests being handled, not counting this one."`
	// HTTPLayer counts what Go's HTTP server rejected or cut before a
	// handler saw the request.
	HTTPLayer HTTPLayer `json:"http_layer"`
	// Capture counts what Config.Capture kept, since start: a reset does
	// not unkeep envelopes (nil without a capture).
	Capture *capture.Stats `json:"capture,omitempty"`
}

// AppendPrometheus appends st in the Prometheus text exposition format
// (version 0.0.4), one series per number of the /stats JSON (the prom tags
// of its fields name them). Metric names start with relayload_upstream_.
func (st *Stats) AppendPrometheus(b []byte) []byte { return promtext.Append(b, promPrefix, st) }

const promPrefix = "relayload_upstream_"

// Registrations counts the two registration steps.
type Registrations struct {
	Challenges int64            `json:"challenges" prom:"registration_challenges_total" help:"Registration challenge requests."`
	Responses  int64            `json:"responses" prom:"registration_responses_total" help:"Registration response requests."`
	Failures   map[string]int64 `json:"failures" prom:"registration_failures_total,reason" help:"Failed registration steps by reason."`
}

// ConfigRequests counts project-config traffic.
type ConfigRequests struct {
	Global        int64 `json:"global" prom:"config_requests_global_total" help:"Global config requests."`
	GlobalPending int64 `json:"global_pending" prom:"config_requests_global_pending_total" help:"Global config answers with globalStatus pending."`
	Project       int64 `json:"project" prom:"config_requests_project_total" help:"Project config requests with at least one key."`
	KeysServed    int64 `json:"keys_served" prom:"config_keys_served_total" help:"Project keys answered with a config."`
	Pending       int64 `json:"pending" prom:"config_keys_pending_total" help:"Project keys answered as pending."`
	Unchanged     int64 `json:"unchanged" prom:"config_keys_unchanged_total" help:"Project keys answered as unchanged."`
	Unknown       int64 `json:"unknown" prom:"config_keys_unknown_total" help:"Unknown project keys (omitted)."`
}

// Signatures counts how request signatures were checked.
type Signatures struct {
	// Verified: full Ed25519 verification succeeded; NotChecked:
	// verification switched off.
	Verified   int64 `json:"verified" prom:"signatures_total,result=verified" help:"Relay signature checks by result."`
	NotChecked int64 `json:"not_checked" prom:"signatures_total,result=not_checked"`
}

// EncodingBytes counts bodies per Content-Encoding.
type EncodingBytes struct {
	Requests int64 `json:"requests" prom:"bodies_total" help:"Request bodies by Content-Encoding."`
	Wire     int64 `json:"wire" prom:"wire_bytes_total" help:"Body bytes as received by Content-Encoding."`
	Decoded  int64 `json:"decoded" prom:"decoded_bytes_total" help:"Body bytes after decoding by Content-Encoding."`
}

// ProjectStats is one project's share.
type ProjectStats struct {
	ID        int64 `json:"id" promlabel:"project"`
	Envelopes int64 `json:"envelopes" prom:"project_envelopes_total" help:"Envelopes of the busiest projects."`
	Items     int64 `json:"items" prom:"project_items_total" help:"Envelope items of the busiest projects."`
}

// Outcomes aggregates outcomes from every source, by quantity.
type Outcomes struct {
	ByOutcome  map[string]int64 `json:"by_outcome"`
	ByCategory map[string]int64 `json:"by_category"`
	ByReason   map[string]int64 `json:"by_reason"`
	Rows       []OutcomeRow     `json:"rows"`
	Messages   map[string]int64 `json:"messages" prom:"outcome_messages_total,source" help:"Outcome carriers by source."`
	// Folded counts the records that found the table full (2000 rows) and
	// went to a row of reason "other": their quantities are in the rows.
	Folded int64 `json:"folded" prom:"outcomes_folded_total" help:"Outcome records folded into a reason \"other\" row because the outcome table was full."`
}

// OutcomeRow is one (outcome, category, reason) combination.
type OutcomeRow struct {
	Outcome  string `json:"outcome" promlabel:"outcome"`
	Category string `json:"category" promlabel:"category"`
	Reason   string `json:"reason" promlabel:"reason"`
	Quantity int64  `json:"quantity" prom:"outcomes_quantity_total" help:"Outcome quantities by outcome, category and reason."`
	Count    int64  `json:"count" prom:"outcomes_records_total" help:"Outcome records (rows, buckets, batch entries) by outcome, category and reason."`
}

// Canaries reports PII canaries found in forwarded payloads.
type Canaries struct {
	ItemsScanned int64            `json:"items_scanned" prom:"canary_items_scanned_total" help:"Items scanned for PII canaries."`
	Leaks        map[string]int64 `json:"leaks" prom:"canary_leaks_total,kind" help:"PII canaries that survived scrubbing, by kind."`
	// KeptFound: negative controls found (expected to survive).
	KeptFound map[string]int64 `json:"kept_found" prom:"canary_kept_found_total,kind" help:"Negative-control canaries found, by kind."`
	// Found: every marker found, by kind (leaked or properly masked).
	Found map[string]int64 `json:"found" prom:"canary_found_total,kind" help:"Canary markers found, by kind."`
	// ScrubbedItems: items whose payload carries a _meta remark ("rem").
	ScrubbedItems int64 `json:"scrubbed_items" prom:"scrubbed_items_total" help:"Items whose _meta records a scrubbing remark."`
}

// topProjects is how many projects /stats lists.
const topProjects = 20

// snapshot reads every counter of the generation into a Stats. Counters are
// read one by one while requests may still be counting into them, so a
// snapshot taken under load is not of a single instant.
func (c *counters) snapshot(s *Server) Stats {
	now := s.cfg.Now() // the clock s.started and c.started were read from
	st := Stats{
		UptimeSeconds:     now.Sub(s.started).Seconds(),
		SinceResetSeconds: now.Sub(c.started).Seconds(),
		Registrations: Registrations{
			Challenges: c.challenges.Load(),
			Responses:  c.responses.Load(),
			Failures:   c.regFail.Snapshot(),
		},
		ConfigRequests: ConfigRequests{
			Global:        c.cfgGlobal.Load(),
			GlobalPending: c.globalPendingServed.Load(),
			Project:       c.cfgProject.Load(),
			KeysServed:    c.keysServed.Load(),
			Pending:       c.keysPending.Load(),
			Unchanged:     c.keysUnchanged.Load(),
			Unknown:       c.keysUnknown.Load(),
		},
		Signatures:        Signatures{Verified: c.sigVerified.Load(), NotChecked: c.sigNotChecked.Load()},
		Envelopes:         c.envelopes.Load(),
		EnvelopesBySender: map[string]int64{"relay": c.envelopesRelay.Load(), "sdk": c.envelopesSDK.Load()},
		DataEnvelopes:     c.dataEnvelopes.Load(),
		UserAgents:        c.userAgents(),
		Timeline:          c.arrivals.snapshot(),
		ItemsByType:       loadNonZero(itemTypes[:], c.items[:]),
		RecordsByType:     loadNonZero(itemTypes[:], c.records[:]),
		Bytes:             c.bytesByEncoding(),
		TopProjects:       c.topProjects(s.cfg.Projects),
		MetricBuckets:     c.metricBuckets.Load(),
		Outcomes:          c.outcomeStats(),
		Canaries: Canaries{
			ItemsScanned:  c.scannedItems.Load(),
			Leaks:         loadNonZero(canaryNames, c.canaryLeaks),
			KeptFound:     loadNonZero(canaryNames, c.canaryKept),
			Found:         loadNonZero(canaryNames, c.canaryFound),
			ScrubbedItems: c.scrubbedItems.Load(),
		},
		Errors:    c.errors.Snapshot(),
		Requests:  c.requestCounts(),
		Faults:    c.faultsInjected.Snapshot(),
		Panics:    c.panics.Load(),
		HTTPLayer: c.http.snapshot(),
	}
	if s.cfg.Capture != nil {
		cs := s.cfg.Capture.Stats()
		st.Capture = &cs
	}
	return st
}

// loadNonZero maps names[i] to counts[i] for each count that is not zero.
func loadNonZero(names []string, counts []atomic.Int64) map[string]int64 {
	out := map[string]int64{}
	for i, name := range names {
		if n := counts[i].Load(); n != 0 {
			out[name] = n
		}
	}
	return out
}

func (c *counters) bytesByEncoding() map[string]EncodingBytes {
	out := map[string]EncodingBytes{}
	for i, e := range encodings {
		if n := c.encRequests[i].Load(); n != 0 {
			out[string(e)] = EncodingBytes{Requests: n, Wire: c.encWire[i].Load(), Decoded: c.encDecoded[i].Load()}
		}
	}
	return out
}

// topProjects returns the topProjects busiest projects, most envelopes
// first (then by id).
func (c *counters) topProjects(ps []projects.Project) []ProjectStats {
	out := []ProjectStats{}
	for i := range c.projEnvelopes {
		if n := c.projEnvelopes[i].Load(); n != 0 {
			out = append(out, ProjectStats{ID: ps[i].ID, Envelopes: n, Items: c.projItems[i].Load()})
		}
	}
	slices.SortFunc(out, func(a, b ProjectStats) int {
		return cmp.Or(cmp.Compare(b.Envelopes, a.Envelopes), cmp.Compare(a.ID, b.ID))
	})
	if len(out) > topProjects {
		out = out[:topProjects]
	}
	return out
}

// requestCounts returns the answers by route name and status.
func (c *counters) requestCounts() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for r := range c.requests {
		if m := loadNonZero(statusNames[:], c.requests[r][:]); len(m) > 0 {
			out[routeNames[r]] = m
		}
	}
	return out
}

// outcomeStats returns the outcome rows, sorted by outcome, category and
// reason, their sums by each of the three, and the carriers by source.
func (c *counters) outcomeStats() Outcomes {
	out := Outcomes{
		ByOutcome:  map[string]int64{},
		ByCategory: map[string]int64{},
		ByReason:   map[string]int64{},
		Rows:       []OutcomeRow{},
		Messages:   loadNonZero(outcomeSourceNames[:], c.outcomeMsgs[:]),
	}
	c.outcomes.mu.Lock()
	for k, r := range c.outcomes.rows {
		out.Rows = append(out.Rows, OutcomeRow{Outcome: k.outcome, Category: k.category, Reason: k.reason, Quantity: r.quantity, Count: r.count})
		out.ByOutcome[k.outcome] = tally.Add(out.ByOutcome[k.outcome], r.quantity)
		out.ByCategory[k.category] = tally.Add(out.ByCategory[k.category], r.quantity)
		out.ByReason[k.reason] = tally.Add(out.ByReason[k.reason], r.quantity)
	}
	out.Folded = c.outcomes.folded
	c.outcomes.mu.Unlock()
	slices.SortFunc(out.Rows, func(x, y OutcomeRow) int {
		return cmp.Or(cmp.Compare(x.Outcome, y.Outcome), cmp.Compare(x.Category, y.Category), cmp.Compare(x.Reason, y.Reason))
	})
	return out
}

// TimelineSeconds is how many one-second buckets a timeline holds after
// start or a reset; later arrivals are counted in Timeline.Later.
const TimelineSeconds = 3600

// timeline counts data envelopes by the second they arrived in: beside what
// the load generator sent, it tells a Relay that keeps pace from a backlog.
type timeline struct {
	start   time.Time
	seconds [TimelineSeconds]atomic.Int64
	later   atomic.Int64
}

func (t *timeline) add(now time.Time) {
	sec := int64(now.Sub(t.start) / time.Second)
	if sec < 0 {
		sec = 0 // a clock step back: count it in the first second
	}
	if sec >= TimelineSeconds {
		t.later.Add(1)
		return
	}
	t.seconds[sec].Add(1)
}

// Timeline is the data envelopes (Stats.DataEnvelopes) received per second
// since the server's start or the last reset.
type Timeline struct {
	// Start is when second 0 began.
	Start time.Time `json:"start"`
	// Envelopes[i] arrived in [Start+i s, Start+i+1 s); the slice ends
	// with the last second that had an arrival.
	Envelopes []int64 `json:"envelopes_per_second"`
	// Later counts arrivals after the last of TimelineSeconds buckets.
	Later int64 `json:"later,omitempty"`
}

func (t *timeline) snapshot() Timeline {
	n := len(t.seconds)
	for n > 0 && t.seconds[n-1].Load() == 0 {
		n--
	}
	out := Timeline{Start: t.start, Envelopes: make([]int64, n), Later: t.later.Load()}
	for i := range out.Envelopes {
		out.Envelopes[i] = t.seconds[i].Load()
	}
	return out
}

// Total is the sum of every bucket and Later.
func (t Timeline) Total() int64 {
	n := t.Later
	for _, v := range t.Envelopes {
		n += v
	}
	return n
}

// DataEnvelopes is Stats().DataEnvelopes in one atomic load, cheap enough to
// poll many times a second.
func (s *Server) DataEnvelopes() int64 {
	return s.stats.Load().dataEnvelopes.Load()
}
