package orchestrate

import (
	"time"

	"github.com/relayload/relayload/internal/compare"
	"github.com/relayload/relayload/internal/replay"
	"github.com/relayload/relayload/upstream"
)

// Report is everything a sweep measured. It marshals to results.json as-is.
type Report struct {
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	Interrupted bool      `json:"interrupted,omitempty"`
	// Harness is true when no Relay ran: blast sent straight to the fake
	// upstream and CPU figures are orchestrate's own process.
	Harness bool     `json:"harness"`
	Host    Host     `json:"host"`
	Setup   Setup    `json:"setup"`
	Steps   []*Step  `json:"steps"`
	Summary []*Point `json:"summary"`
	// Comparisons are the other builds against the first, per rate.
	Comparisons []Comparison `json:"comparisons,omitempty"`
	// SliceRuns are the comparisons in slices (Config.Slices), per rate.
	SliceRuns []*SliceRun `json:"slice_runs,omitempty"`
	FindMax   []FindMax   `json:"find_max,omitempty"`
	// KeptUpWith is the highest rate the baseline build kept up with, per
	// build name (0: none).
	KeptUpWith map[string]float64 `json:"kept_up_with"`
	Failed     int                `json:"failed_steps"`
	Notes      []string           `json:"notes,omitempty"`
	// Gate is the comparison with a baseline run's thresholds, when asked.
	Gate *GateResult `json:"gate,omitempty"`
}

// Host describes the machine.
type Host struct {
	CPUs      int    `json:"cpus"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	CPUModel  string `json:"cpu_model"`
}

// Setup echoes the options that shape the numbers.
type Setup struct {
	Builds []Build   `json:"builds"`
	Rates  []float64 `json:"rates"`
	Rounds int       `json:"rounds"`
	// Slice, Precision and Budget shape a comparison in slices.
	Slice     time.Duration `json:"slice_ns,omitempty"`
	Precision float64       `json:"precision,omitempty"`
	Budget    time.Duration `json:"budget_ns,omitempty"`
	FindMax   bool          `json:"find_max,omitempty"`
	Duration  time.Duration `json:"duration_ns"`
	Warmup    time.Duration `json:"warmup_ns"`
	Idle      time.Duration `json:"idle_ns"`
	Seed      uint64        `json:"seed"`
	Projects  int           `json:"projects"`
	PoolSize  int           `json:"pool_size"`
	Mix       string        `json:"mix"`
	// Corpus names the recorded envelopes the pool replayed (Config.Corpus):
	// directory, files, bytes, item types; Mix is empty then.
	Corpus           *replay.Summary `json:"corpus,omitempty"`
	UserAgents       int             `json:"user_agents"`
	UniqueUserAgents bool            `json:"unique_user_agents,omitempty"`
	UserAgentsFrom   string          `json:"user_agents_from,omitempty"` // the file of the agents; "" if generated
	Encoding         string          `json:"encoding"`
	RelayCPUs        string          `json:"relay_cpus,omitempty"`
	HarnessCPUs      string          `json:"harness_cpus,omitempty"`
	// HarnessProcs is orchestrate's GOMAXPROCS during the steps: 1 when it
	// shares unpinned CPUs with Relay (unless GOMAXPROCS is set).
	HarnessProcs int `json:"harness_gomaxprocs"`
	// HarnessSysmon is how orchestrate's Go runtime ran: SysmonQuiet
	// (started with GODEBUG schedtrace set, see QuietSysmon) or
	// SysmonDefault.
	HarnessSysmon string            `json:"harness_sysmon,omitempty"`
	Fault         *Fault            `json:"fault,omitempty"`
	PoolBytes     map[string]int64  `json:"pool_bytes,omitempty"`
	RelayConfig   map[string]any    `json:"relay_config_overrides,omitempty"`
	StatsDMetrics []string          `json:"statsd_metrics,omitempty"`
	Extra         map[string]string `json:"extra,omitempty"`
}

// Step is one fresh Relay (or harness) measured at one rate.
type Step struct {
	Index int    `json:"index"`
	Build string `json:"build"`
	Round int    `json:"round"`
	// Rate is the target envelopes per second; RateMax (0) is a closed-loop
	// step: Concurrency senders back to back, as fast as Relay answers.
	Rate        float64 `json:"target_rate"`
	Concurrency int     `json:"concurrency,omitempty"`
	Probe       bool    `json:"find_max_probe,omitempty"`
	Dir         string  `json:"dir,omitempty"`
	Failed      bool    `json:"failed,omitempty"`
	Error       string  `json:"error,omitempty"`
	// LogTail is the end of Relay's log when the step failed.
	LogTail string `json:"log_tail,omitempty"`

	Started time.Time     `json:"started"`
	Took    time.Duration `json:"took_ns"`
	// OutsideWindow is the share of Took (percent) outside the measured
	// window: Relay's start, warm-up, idle, blast's warm-up, drain and
	// shutdown.
	OutsideWindow float64       `json:"outside_window_pct"`
	ReadyAfter    time.Duration `json:"ready_after_ns,omitempty"`
	Warm          WarmUp        `json:"warm_up"`

	// Load, as blast saw it (measured window only; warm-up not included).
	Sent         int64            `json:"sent"`
	WarmupSent   int64            `json:"warmup_sent"`
	OK           int64            `json:"ok"`
	Dropped      int64            `json:"dropped"`
	Failures     int64            `json:"failures"`
	ByStatus     map[string]int64 `json:"by_status,omitempty"`
	Errors       map[string]int64 `json:"errors,omitempty"`
	Elapsed      time.Duration    `json:"elapsed_ns"`
	AchievedRate float64          `json:"achieved_rate"`
	AcceptedRate float64          `json:"accepted_rate"`
	Latency      Quantiles        `json:"latency_ms"`
	LagP99       float64          `json:"schedule_lag_p99_ms"`
	BlastInvalid []string         `json:"blast_invalid,omitempty"`

	// StoppedEarly says why blast was stopped before the end of the window
	// (Relay's RSS passed Config.MaxRelayRSS).
	StoppedEarly string `json:"stopped_early,omitempty"`

	// Stall is the longest gap between two 10 Hz samples: orchestrate
	// itself got no CPU for that long (machine overloaded or paused).
	Stall time.Duration `json:"stall_ns,omitempty"`

	Upstream UpstreamSeen `json:"upstream"`
	// Steady is whether forwarding kept pace with accepting.
	Steady   Steady     `json:"steady"`
	CPU      CPU        `json:"cpu"`
	Memory   Memory     `json:"memory"`
	Drain    Drain      `json:"drain"`
	Shutdown Shutdown   `json:"shutdown"`
	LoadAvg  [2]float64 `json:"loadavg_1m_before_after"`

	// StatsD holds the --statsd-metric timers (ms) and StatsDCounters the
	// counters among them, from the built-in receiver over the measured window
	// and the drain.
	StatsD         map[string]Quantiles `json:"statsd,omitempty"`
	StatsDCounters map[string]float64   `json:"statsd_counters,omitempty"`
	Fault          *FaultSeen           `json:"fault,omitempty"`
	Perf           *PerfRecord          `json:"perf,omitempty"`
	HarnessPerf    *PerfRecord          `json:"harness_perf,omitempty"` // orchestrate itself (Config.PerfHarness)

	Verdict string `json:"verdict"` // VerdictKeptUp, VerdictFellBehind, VerdictHarnessLimited, VerdictFailed, VerdictInterrupted
	// Partial: the run was interrupted during or after this step's blast;
	// its figures are what was measured until then, and it has no verdict.
	Partial bool     `json:"partial,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
	// Notes are observations that do not change the verdict.
	Notes []string `json:"notes,omitempty"`

	// Series for charts: Relay's RSS and CPU over the step, from the
	// 10 Hz sampler (seconds since blast started; negative during idle).
	Series []SeriesPoint `json:"series,omitempty"`
	// Seconds is the step second by second from blast's start to the end
	// of the drain: what blast sent and had accepted, what reached the
	// upstream, the backlog, Relay's RSS and CPU.
	Seconds []SecondPoint `json:"seconds,omitempty"`

	warmOK int64 // blast's 2xx during its warm-up
}

// Verdicts.
const (
	VerdictKeptUp         = "kept up"
	VerdictFellBehind     = "fell behind"
	VerdictHarnessLimited = "harness-limited"
	VerdictFailed         = "failed"
	VerdictInterrupted    = "interrupted"
)

// Quantiles of a latency distribution, in milliseconds.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// WarmUp is what the warm-up achieved before measuring.
type WarmUp struct {
	Took         time.Duration `json:"took_ns"`
	Complete     bool          `json:"complete"`
	ConfigsAsked int64         `json:"project_config_requests"`
	KeysServed   int64         `json:"keys_served"`
	Global       int64         `json:"global_config_requests"`
	Forwarded    int64         `json:"forwarded"`
	Note         string        `json:"note,omitempty"`
}

// UpstreamSeen is what reached the fake upstream from the start of blast
// (warm-up included) until the drain ended.
type UpstreamSeen struct {
	// Envelopes counts every envelope; Forwarded those with data (an item
	// that is neither metrics nor a client report): the SDK traffic Relay
	// passed on, as opposed to its own metric and outcome flushes.
	Envelopes   int64            `json:"envelopes"`
	Forwarded   int64            `json:"forwarded"`
	ItemsByType map[string]int64 `json:"items_by_type"`
	// Gap is envelopes accepted by Relay (2xx to blast, warm-up included)
	// minus data envelopes forwarded.
	Gap      int64                       `json:"gap"`
	Outcomes []upstream.OutcomeRow       `json:"outcomes,omitempty"`
	Requests map[string]map[string]int64 `json:"requests,omitempty"`
	Errors   map[string]int64            `json:"errors,omitempty"`
	// Canaries is what the upstream found of the PII canaries the pool
	// plants: leaks (a canary Relay's default scrubbing should have removed
	// reached the upstream), the controls that must survive, the items
	// scanned. Without Relay (the harness) nothing scrubs, so every canary
	// arrives as planted.
	Canaries upstream.Canaries `json:"canaries"`
	// Signatures counts Relay's request signatures verified.
	Signatures upstream.Signatures `json:"signatures"`
}

// CPU is the measured process's CPU use. In harness mode it is
// orchestrate's own process (blast, fake upstream, sampler).
type CPU struct {
	IdleCores float64 `json:"idle_cores"`
	LoadCores float64 `json:"load_cores"` // measured window, gross
	NetCores  float64 `json:"net_cores"`  // LoadCores − IdleCores
	// MsPerEnv is the true cost of an envelope: CPU-seconds (idle
	// subtracted) from blast's start until forwarding settled, divided by
	// the envelopes forwarded in that span (CostSpan, CostCPUSecs,
	// CostEnvelopes). Dividing by accepted envelopes instead would dilute
	// it above capacity, where Relay accepts more than it processes.
	MsPerEnv      float64       `json:"ms_per_envelope"`
	CostSpan      time.Duration `json:"cost_span_ns"`
	CostCPUSecs   float64       `json:"cost_cpu_s"`
	CostEnvelopes int64         `json:"cost_envelopes"`
	PeakCores     float64       `json:"peak_cores_1s"`
	// HarnessCores is orchestrate's own CPU (blast, the fake upstream,
	// sampling) over the measured window, and HarnessShare that in percent
	// of Relay's LoadCores: on one machine, CPU Relay could not use.
	HarnessCores float64 `json:"harness_cores,omitempty"`
	HarnessShare float64 `json:"harness_share_pct,omitempty"`
	// HarnessSplit is HarnessCores by what the harness was doing, from its
	// perf recording (Config.PerfHarness).
	HarnessSplit *HarnessSplit `json:"harness_split,omitempty"`
	UserSecs     float64       `json:"total_user_s,omitempty"`
	SystemSecs   float64       `json:"total_system_s,omitempty"`
}

// Memory is the measured process's memory.
type Memory struct {
	PeakRSS      uint64 `json:"peak_rss_bytes"` // VmHWM before shutdown
	RusageMaxRSS uint64 `json:"rusage_maxrss_bytes,omitempty"`
	EndRSS       uint64 `json:"end_rss_bytes"`
}

// Drain is the wait after blast for forwarded counts and outcomes to settle.
type Drain struct {
	Took    time.Duration `json:"took_ns"`
	Settled bool          `json:"settled"`
	// LastForward is when the last data envelope arrived, from blast's end
	// (0 when none arrived after it).
	LastForward time.Duration `json:"last_forward_ns"`
}

// Steady is whether Relay's forwarding kept pace with what it accepted,
// from the per-second series.
type Steady struct {
	// ForwardedRate is data envelopes forwarded per second inside the
	// measured window: with a growing backlog, Relay's throughput ceiling.
	ForwardedRate float64 `json:"forwarded_rate"`
	// AcceptedRate is blast's 2xx per second over the same seconds.
	AcceptedRate float64 `json:"accepted_rate"`
	// BacklogEnd is the last second's Backlog: accepted envelopes Relay is
	// expected to forward (Expected of those accepted) less those
	// forwarded, at the end of the window.
	BacklogEnd int64 `json:"backlog_at_window_end"`
	// Expected is the share of accepted envelopes Relay is expected to
	// forward as data envelopes: 1 for a generated pool; less for a
	// replayed one holding envelopes of client reports or metrics alone,
	// or of item types Relay forwards nothing of (trace_metric).
	Expected float64 `json:"expected_share"`
	// BacklogGrowth is the backlog's slope over the second half of the
	// window (envelopes per second, least squares), after taking out the
	// share of accepted envelopes that Relay never forwarded (Loss).
	BacklogGrowth float64 `json:"backlog_growth_per_s"`
	// GrowthError is the standard error of that slope.
	GrowthError float64 `json:"backlog_growth_error_per_s"`
	// GrowthSpan is the seconds between the first and last point of that
	// fit; BacklogGrowth × GrowthSpan is how much the backlog grew.
	GrowthSpan float64 `json:"growth_span_s"`
	// Allowance is how much the backlog may grow over the second half:
	// one batching interval's worth of accepted envelopes.
	Allowance float64 `json:"allowance"`
	// Loss is the share of accepted envelopes never forwarded: those Relay
	// is not expected to forward (1 − Expected) and, once the drain
	// settled, those rate-limited or filtered inside Relay, or lost.
	Loss float64 `json:"loss"`
	// CatchUp is from blast's end until the last data envelope arrived;
	// −1 when forwarding had not settled when the drain gave up.
	CatchUp time.Duration `json:"catch_up_ns"`
	// RSSSlope is Relay's RSS growth over the window, MiB per second.
	RSSSlope float64 `json:"rss_slope_mib_per_s"`
	// Seconds is how many whole seconds of the window the figures cover.
	Seconds int `json:"seconds"`
}

// Shutdown is how Relay ended.
type Shutdown struct {
	Took   time.Duration `json:"took_ns"`
	Killed bool          `json:"killed,omitempty"`
	Exit   string        `json:"exit,omitempty"`
	// Strays are the processes Relay started that still ran outside its
	// process group once it was gone (daemons), which orchestrate ended:
	// "pid N (command line)".
	Strays []string `json:"strays,omitempty"`
}

// SecondPoint is one second of a step, counted from blast's start.
type SecondPoint struct {
	T         int   `json:"t"`
	Sent      int64 `json:"sent"`
	Accepted  int64 `json:"accepted"`
	Forwarded int64 `json:"forwarded"`
	// Backlog is accepted − forwarded, summed from blast's start to the
	// end of this second, counting of the accepted only the share Relay is
	// expected to forward (Steady.Expected): what it never forwards is not
	// a backlog.
	Backlog int64   `json:"backlog"`
	RSSMiB  float64 `json:"rss_mib"`
	Cores   float64 `json:"cores"`
}

// SeriesPoint is one sample.
type SeriesPoint struct {
	T     float64 `json:"t"`
	RSSMB float64 `json:"rss_mb"`
	Cores float64 `json:"cores"`
}

// FaultSeen is what happened around an injected fault.
type FaultSeen struct {
	Spec string `json:"spec"`
	// Forwarded envelopes per second before, during and after the fault.
	RateBefore float64 `json:"forwarded_rate_before"`
	RateDuring float64 `json:"forwarded_rate_during"`
	RateAfter  float64 `json:"forwarded_rate_after"`
	// Answers the upstream gave Relay during the fault, route → status → n.
	Answers map[string]map[string]int64 `json:"answers"`
	// Recovered is the time from the fault's end until forwarded envelopes
	// caught up with what blast had been accepted (−1: never, within the drain).
	Recovered time.Duration `json:"recovered_ns"`
	// ClientNon2xx and ClientP99 are what blast saw during the fault.
	ClientNon2xx int64   `json:"client_non_2xx"`
	ClientP99    float64 `json:"client_p99_ms"`
	Summary      string  `json:"summary"`
}

// PerfRecord is one perf recording.
type PerfRecord struct {
	File      string `json:"file"`
	Event     string `json:"event"`
	CallGraph string `json:"call_graph"`
	Exit      string `json:"exit"`
	Note      string `json:"note,omitempty"`
	// Profile is where Relay's time went, from `perf script` of File.
	Profile *PerfProfile `json:"profile,omitempty"`
}

// PerfProfile summarises a recording: shares are in percent of all
// samples (weighted by period).
type PerfProfile struct {
	Samples int64 `json:"samples"`
	// Unwound is the share of samples with a usable stack; the rest have
	// none or only [unknown] frames (perf's DWARF unwinding loses many on
	// a large binary), and count for no function.
	Unwound float64 `json:"unwound_pct"`
	// Top are the functions with the highest inclusive share.
	Top []FunctionShare `json:"top"`
	// Groups are named groups of functions (user-agent parsing, PII
	// scrubbing, …): the share of samples with any frame in the group.
	Groups []GroupShare `json:"groups"`
	// Folded and Flame are the folded stacks (speedscope, inferno) and the
	// flame graph SVG written next to the recording.
	Folded string `json:"folded,omitempty"`
	Flame  string `json:"flame,omitempty"`
	Note   string `json:"note,omitempty"`
}

// FunctionShare is one function's share of the samples.
type FunctionShare struct {
	Name      string  `json:"name"`
	Inclusive float64 `json:"inclusive_pct"`
	Self      float64 `json:"self_pct"`
}

// GroupShare is one named group's share of the samples.
type GroupShare struct {
	Name  string  `json:"name"`
	Share float64 `json:"share_pct"`
}

// Point summarises one build at one rate over the rounds: medians, and
// the spread (max−min)/median in percent.
type Point struct {
	Build        string  `json:"build"`
	Rate         float64 `json:"target_rate"`
	Runs         int     `json:"runs"`
	Failed       int     `json:"failed"`
	AchievedRate float64 `json:"achieved_rate"`
	AcceptedRate float64 `json:"accepted_rate"`
	// ForwardedRate, BacklogEnd, CatchUp and RSSSlope are medians of the
	// steps' Steady figures.
	ForwardedRate float64       `json:"forwarded_rate"`
	BacklogEnd    float64       `json:"backlog_at_window_end"`
	CatchUp       time.Duration `json:"catch_up_ns"`
	RSSSlope      float64       `json:"rss_slope_mib_per_s"`
	Latency       Quantiles     `json:"latency_ms"`
	NetCores      float64       `json:"net_cores"`
	IdleCores     float64       `json:"idle_cores"`
	MsPerEnv      float64       `json:"ms_per_envelope"`
	PeakRSS       float64       `json:"peak_rss_bytes"`
	Shutdown      float64       `json:"shutdown_s"`
	Gap           float64       `json:"gap"`
	// Spread of NetCores and MsPerEnv across rounds, in percent of the median.
	CoresSpread    float64 `json:"cores_spread_pct"`
	MsPerEnvSpread float64 `json:"ms_per_envelope_spread_pct"`
	KeptUp         int     `json:"kept_up"`
	// Partial: the figures are an interrupted step's (no round finished).
	Partial bool `json:"partial,omitempty"`
	// KeptUpJudged: every round that could be judged kept up (harness-
	// limited and interrupted rounds are not judged), and at least one did.
	KeptUpJudged bool     `json:"kept_up_judged"`
	Verdict      string   `json:"verdict"`
	Reasons      []string `json:"reasons,omitempty"`
}

// Comparison is one build against the baseline at one rate.
type Comparison struct {
	Build          string  `json:"build"`
	Baseline       string  `json:"baseline"`
	Rate           float64 `json:"target_rate"`
	BaseCores      float64 `json:"base_cores"`
	Cores          float64 `json:"cores"`
	CoresChange    float64 `json:"cores_change_pct"`
	BaseMsPerEnv   float64 `json:"base_ms_per_envelope"`
	MsPerEnv       float64 `json:"ms_per_envelope"`
	MsPerEnvChange float64 `json:"ms_per_envelope_change_pct"`
	P99Change      float64 `json:"p99_change_pct"`
	PeakRSSChange  float64 `json:"peak_rss_change_pct"`
	// With two rounds or more: the change of CPU per envelope and of
	// cores from the rounds taken as pairs (each round runs both builds
	// back to back), with its 95% interval (compare.Estimate).
	MsPerEnvPaired *compare.Change `json:"ms_per_envelope_paired,omitempty"`
	CoresPaired    *compare.Change `json:"cores_paired,omitempty"`
}

// FindMax is the result of a bisection for one build.
type FindMax struct {
	Build string `json:"build"`
	// KeptUp is the highest rate probed that kept up (0: not even the lower bound);
	// FellBehind the lowest that did not (0: not even the upper bound failed).
	KeptUp     float64   `json:"kept_up"`
	FellBehind float64   `json:"fell_behind"`
	Probes     []float64 `json:"probes"`
	// Stopped says why the search ended early, if it did.
	Stopped string `json:"stopped,omitempty"`
}
