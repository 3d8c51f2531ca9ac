// Package standinrelay is a stand-in for Sentry's Relay, used only by
// relayload's tests. It is a test fixture, not Relay: no Relay binary can be
// built on the machines these tests run on, so orchestrate's end-to-end tests
// drive this instead (built as internal/cmd/standin-relay and started like
// Relay: standin-relay -c DIR run).
//
// What it does the way a managed, non-processing Relay 26.6 does
// (docs/protocol.md):
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
// bounds the envelope buffer, standin.max_buffered_envelopes (10 000) and
// standin.max_buffered_bytes (256 MiB), and sets standin.capacity (below).
//
// # Finite capacity
//
// Seen with Relay 26.4.0 on 2 CPUs (measured by a colleague with
// relayload): offered 1,400 envelopes/s of mixed traffic, Relay kept
// answering 200 to the SDK while it forwarded only ~770/s upstream during
// the window; the accepted but unprocessed envelopes piled up in memory
// (its RSS grew linearly from 196 to 678 MB over the window), and after the
// load stopped it needed 16 s to forward the backlog. Sent as fast as
// possible (closed loop, 64 connections) it accepted ~11,770/s, forwarded
// ~360/s and its RSS reached 3.9 GB in 15 s. Relay's envelope buffer is in
// memory by default; it answers 503 only once memory is exhausted.
//
// standin.capacity models that: the envelopes per second the processing
// workers handle in total (0 or absent: unlimited, no pacing at all). The
// workers share one token bucket: a worker takes an envelope from the ready
// queue and sleeps until its slot, 1/capacity after the previous one; after
// an idle period up to 50 ms worth of capacity (at least one envelope) goes
// at once. So above capacity the ingest endpoint still answers 200, the
// excess waits in the buffer (the backlog: in memory, bounded by
// max_buffered_envelopes / max_buffered_bytes, 503 beyond them as before),
// forwarding runs at ≈ capacity/s, and the backlog is forwarded at capacity
// after the load stops: N·T envelopes of backlog take T s more at capacity
// N. The capacity counts SDK envelopes; one split by processing group
// reaches the upstream as several (relayload's pool envelopes are one group
// each). TestCapacityBacklog checks all of this against the real fake
// upstream. A graceful shutdown drains the backlog at capacity, too, for up
// to limits.shutdown_timeout; what is left is dropped unprocessed and
// logged (TestCapacityShutdownTimeout). The shutdown log line gives envelopes accepted and processed and
// the buffer's peak; Stats has Processed, Backlog (ready or being
// processed) and PeakBuffered; StatsD has Relay's buffer.envelopes_count
// gauge (every envelope held, the backlog included); no metric name was
// made up for the backlog.
//
// Not modelled: Relay's capacity comes from its CPU, so it depends on the
// traffic and the machine, and under a flood it fell (~360/s) as ingest
// took the CPU; the stand-in's is a fixed number at any offered load, and
// its 503 comes from the count and byte bounds, not from memory.
//
// The paced wait is a timer sleep and costs no CPU, and the stand-in does
// not burn CPU to make up for the envelopes it holds back: its CPU is what
// it spends on ingest and processing. (Burning it would take the 2 cores
// from blast and the fake upstream in the very tests that use this, and
// make the forwarded rate depend on the machine's load again.) Above
// capacity it ingests everything but processes only capacity/s, so its CPU
// per forwarded envelope stays about level instead of dropping. Measured by TestBinaryCapacityCPU (the
// built binary, capacity 200/s, mixed zstd pool, 3 s windows, CPU from
// /proc, this 2-core machine with a build running beside it, four runs):
// 2.0–2.5 ms per forwarded envelope offered 100/s (100/s forwarded),
// 1.8–2.1 ms offered 400/s (196–203/s forwarded), so above capacity it is
// 0.78–0.89 of the figure below, not half; 1.5–1.65 ms for the backlog's
// drain at 200/s afterwards (processing only); no measurable CPU idle.
// Level rather than constant: per envelope, processing apparently costs
// less at 200/s than at 100/s (compare the drain), which outweighs
// ingesting twice as many envelopes as are forwarded. These are the stand-in's figures and still say nothing about
// Relay's, which was CPU-bound when it fell behind.
//
// The default bounds keep such tests in memory: a mixed-pool envelope holds
// about 15 KB decoded (a 592-envelope backlog held 8.7 MB; the binary's
// RSS went from 27–35 MB to 53–55 MB with 590 buffered, growing with the
// backlog as Relay's did), so 10 000 envelopes (~150 MB, under the 256 MiB
// byte bound) hold the backlog of capacity N offered 2N/s for 10 000/N s:
// 50 s at N = 200, 10 s at N = 1000. They were not raised.
package standinrelay
