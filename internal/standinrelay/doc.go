// Package standinrelay is a stand-in for Sentry's Relay, used only by
// relayload's tests. It is a test fixture, not Relay: no Relay binary can be
// built on the machines these tests run on, so orchestrate's end-to-end tests
// drive this instead (built as internal/cmd/standin-relay and started like
// Relay: standin-relay -c DIR run).
//
// What it does the way a managed, non-processing Relay 26.6 does
// (relay-protocol.md):
//   - registration: signed challenge/response, X-Sentry-Relay-Id, retry with
//     Relay's backoff (1 s ×1.5, capped at http.max_retry_interval),
//     re-authentication every http.auth_interval, 403 {"relay":"stop"} as a
//     permanent denial; no other upstream traffic before registration;
//   - the global config poll; nothing is processed before one ready global
//     config arrived (envelopes wait in a bounded buffer);
//   - v3 project configs: debounced batches (cache.batch_interval,
//     cache.batch_size, limits.max_concurrent_queries), revisions, pending
//     (re-asked, disabled after limits.query_timeout), unchanged, null /
//     missing / disabled:true as disabled, refetch after cache.project_expiry,
//     eviction after expiry + grace period;
//   - the SDK ingest endpoint POST /api/{id}/envelope/ with Relay's auth
//     sources, Content-Encoding, framing, size limits and status codes;
//   - cached upstream rate limits (429 with X-Sentry-Rate-Limits or
//     Retry-After) answered with 429 and rate_limited outcomes;
//   - forwarding split by processing group, with a rewritten envelope header,
//     http.encoding bodies, X-Sentry-Auth, and a signature over empty data;
//     retries on network errors and 502/503/504, other failures dropped as
//     received; at most limits.max_concurrent_requests in flight; outage
//     mode after http.outage_grace_period of network errors (upstream
//     traffic pauses, GET /api/0/relays/live/ polled with backoff);
//   - outcomes as 26.6+ c:outcomes/… metric buckets (emit_outcomes: true) or
//     as client reports (as_client_reports), aggregated per bucket interval;
//   - readiness and liveness endpoints, StatsD metrics, graceful shutdown
//     within limits.shutdown_timeout.
//
// What it deliberately does not do:
//   - Relay's normalization and PII engine. Events, transactions and log
//     containers get a JSON round trip and a small scrubbing pass (the
//     password rule on keys and values, session cookies, card/IBAN/SSN/PEM/
//     URL-password masks, logentry and log-body replacements, _meta remarks):
//     enough to remove relayload's canaries and to cost real, deterministic
//     CPU. Its CPU figures say nothing about Relay's.
//   - inbound filters, dynamic sampling, project quotas, metric extraction
//     (no transaction or session metrics are sent), metrics aggregation of
//     SDK metric items (forwarded as they came), spans, replays beyond
//     pass-through, attachments beyond pass-through;
//   - global metrics, legacy (≤ 26.5) HTTP outcomes, the disk spool,
//     memory-based health; registration is not paused by outage mode;
//   - other ingest routes (store, minidump, security, OTLP, …), downstream
//     relays, the public-keys endpoint;
//   - readiness is computed on every request instead of every 3 s.
//
// Durations read from config.yml may be fractional (tests use 0.1 s
// intervals); a real Relay wants whole seconds (milliseconds for
// cache.batch_interval). An extra "standin" section (ignored by Relay)
// bounds the envelope buffer: standin.max_buffered_envelopes (10 000) and
// standin.max_buffered_bytes (256 MiB).
package standinrelay
