// Package standinrelay is a stand-in for Sentry's Relay, used only by
// relayload's tests. It is a test fixture, not Relay, and must never be
// presented as Relay: no Relay can be built where these tests run, so
// orchestrate's end-to-end tests drive this instead (built as
// internal/cmd/standin-relay, started like Relay: standin-relay -c DIR run;
// its --version says "test fixture, not Relay").
//
// It models only what the tests outside this package need, and only
// behaviour a real Relay 26.4.0 was seen to have. "Seen" below names the
// command that showed it, run on this 2-core VM against the fake upstream,
// or the Relay source that does it (github.com/getsentry/relay at tag
// 26.4.0).
//
//   - Registration: a signed challenge and response, retried with Relay's
//     backoff (1 s, ×1.5, capped at http.max_retry_interval); nothing else
//     goes upstream before it succeeds. Readiness (GET /api/relay/
//     healthcheck/ready/) is 503 until then, 200 after. Seen: a Relay
//     started by hand against fake-upstream --latency register_challenge=2s
//     answered 503 and asked for no config until the delayed challenge was
//     answered, then 200 with one registration and the first config
//     request; Relay source: relay-
//     server/src/services/upstream.rs (UpstreamBroker::next_request waits
//     for authentication), services/health_check.rs (the auth probe),
//     utils/retry.rs. Relay also reports unready when memory or its buffer
//     is exhausted; the stand-in does not.
//   - The global config, asked for every cache.global_config_fetch_interval;
//     nothing is processed before a ready one arrived. Seen: against
//     fake-upstream --global-pending an envelope was answered 200 and held;
//     after the pending fault was cleared it was forwarded once the next
//     global request, 10 s after the first, brought a ready config
//     (relay.log: "global config from upstream is not yet ready", then
//     "received global config from upstream").
//   - Project configs (v3): the keys first seen within cache.batch_interval
//     go in one request (at most 500 keys); pending keys are asked for
//     again in the next batch; null, missing or disabled: true disable the
//     key: its held envelopes are dropped and later ones answered 403. A
//     config is fetched once and kept. Seen: orchestrate's warm-up against
//     Relay (one project-config request served every project's key, and
//     every warm-up envelope was forwarded); Relay source: services/projects/
//     source/upstream.rs (batches, pending), services/projects/cache/
//     project.rs (check_envelope: a disabled project's envelope rejected,
//     403 in endpoints/common.rs).
//   - Ingest, POST /api/{project_id}/envelope/ with X-Sentry-Auth and any
//     Content-Encoding relayload sends: answered 200 {"id": …} at once (the
//     header's event_id; {} without one, where Relay makes one up); the
//     envelope is held until its project config and the global config are
//     there. Above maxBuffered (10,000) envelopes held it answers 503, as
//     Relay does when its buffer has no capacity (services/buffer/mod.rs,
//     try_push); Relay's bound is memory, not a count.
//   - Forwarding: each envelope as it came, compressed with http.encoding
//     (zstd), with X-Sentry-Auth, X-Sentry-Relay-Id and a signature over
//     empty data, at most limits.max_concurrent_requests in flight. Seen:
//     orchestrate --relay-bin $RELAY_BIN --rates 100 --duration 5s: every
//     envelope forwarded, gap 0, every signature valid; Relay source:
//     services/processor.rs (SendEnvelope::sign, RequestSign), config.rs
//     (http.encoding zstd, max_concurrent_requests 100).
//   - Upstream failures, as Relay's upstream service handles them
//     (services/upstream.rs: execute, complete, UpstreamQueue; processor.rs:
//     SendEnvelope::respond): no answer, 502, 503 or 504 puts the envelope
//     in a retry queue that is sent http.retry_delay after the last failure
//     or at once after any success, so while every send fails nothing is
//     retried; any other answer counts as received and the envelope is
//     dropped. Seen: orchestrate ... --rates 100 --duration 8s --fault
//     outage=3s@2s: the upstream answered one 503 per envelope sent during
//     the outage (no retries while it lasted), then Relay forwarded its
//     backlog above the offered rate and lost nothing.
//   - 429 from the upstream: the envelope is dropped and the answer's rate
//     limits (X-Sentry-Rate-Limits, else Retry-After on all categories) are
//     cached for that project key; while they last its items are dropped at
//     ingest and the answer is 429 with Retry-After, the rest of an envelope
//     still queued. Seen: --fault 429-storm=3s@2s: the upstream answered a
//     few envelopes 429, clients then got 429s for many times as many, and
//     forwarding nearly stopped while the limits lasted; Relay source:
//     upstream.rs (UpstreamRateLimits::
//     scope), services/projects/cache/project.rs (check_envelope: cached
//     limits), endpoints/common.rs (handle_envelope, check_rate_limits).
//     Categories are matched for relayload's item types only.
//   - StatsD (metrics.statsd, metrics.prefix): event.accepted (a counter,
//     #handling:success) twice per forwarded envelope, when processing takes
//     its items and when the upstream has it, and event.processing_time (a
//     distribution in ms, |d|@1.0) once per envelope. Seen: a UDP listener
//     as metrics.statsd of Relay 26.4.0: two error envelopes gave
//     event.accepted counted four times (|c|#handling:success) and two
//     event.processing_time values (|d|@1.0|#group:error); Relay source:
//     processor.rs (process_with_processor accepts
//     the emptied envelope, SendEnvelope::respond the forwarded one). The
//     stand-in has no group tag, and it sends every 100 ms where Relay
//     aggregates for 10 s (relay-statsd/src/lib.rs, AggregationMode::
//     Aggressive): in short orchestrate runs against Relay the report may
//     lack either.
//   - Shutdown: on SIGTERM the listener closes at once, what is held goes
//     on being processed and forwarded, and after limits.shutdown_timeout
//     the process exits 0, whatever is left; SIGINT or a second SIGTERM
//     exits 0 at once. Seen: relay-26.4.0 -c DIR run under a Python
//     harness: connections refused right after SIGTERM, exit 0 once
//     shutdown_timeout had passed, not before; SIGINT, and a second
//     SIGTERM, exit 0 at once (TestBinarySignals holds the stand-in to
//     that); Relay source: relay-system/src/controller.rs,
//     services/buffer/mod.rs (the in-memory buffer pops until the timeout).
//
// # Finite capacity
//
// standin.capacity (a key of the stand-in's own; Relay 26.4.0 starts with
// it in its config and ignores it) is the envelopes per second the
// processing workers handle in total (0 or absent: unlimited). The workers
// share one token bucket: an envelope taken from the ready queue waits
// for its slot, 1/capacity after the previous one, with up to 50 ms of
// idle credit. Above capacity the stand-in still answers 200, holds the
// excess in memory and forwards at ≈ capacity, and after the load stops it
// forwards the backlog at capacity. This is what Relay 26.4.0 did above
// its capacity. Seen: orchestrate --relay-bin $RELAY_BIN --rates 1200
// --duration 8s --pool 1000: every request answered 200, a fraction of
// the offered rate forwarded, the backlog and RSS growing steadily, and
// forwarding still going long after blast ended. Relay's capacity comes
// from its CPU and depends on traffic and machine; the stand-in's is a
// fixed number.
// The wait is a timer sleep and burns no CPU.
//
// # What it does not do
//
// Of items it looks only at their types: client_report and trace_metric
// items are accepted and never forwarded, and an envelope of nothing else
// forwards nothing (Relay 26.4.0 turns client reports into outcomes and
// drops trace metrics; seen with a replayed SDK capture). No
// normalization, no PII scrubbing (canaries reach the upstream as sent),
// no inbound filters, quotas, dynamic sampling, metric extraction or
// feature checks; envelopes are not split by processing group nor
// otherwise rewritten. It sends no outcomes (Relay 26.4.0
// with emit_outcomes: true POSTs them to /api/0/relays/outcomes/; seen in
// the 429 storm above) and no metrics of its own. It has no outage mode
// (Relay's after http.outage_grace_period, 10 s, polling
// /api/0/relays/live/), no re-authentication, no handling of relay stop,
// no project-config expiry or eviction, no size limits beyond a 100 MiB
// body, no disk spool, no other endpoint (store, security, OTLP, liveness,
// …) and no other auth source than X-Sentry-Auth. Of config.yml it reads
// relay.*, http.encoding, http.retry_delay, http.max_retry_interval,
// cache.batch_interval, cache.global_config_fetch_interval,
// limits.max_concurrent_requests, limits.shutdown_timeout, metrics.statsd,
// metrics.prefix and standin.capacity, and takes fractional seconds where
// Relay wants whole ones.
//
// Its CPU time, memory and latencies are a Go program's handling of
// envelopes it does not process, and say nothing about Relay's.
package standinrelay
