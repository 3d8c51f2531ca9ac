// Package pool builds a deterministic pool of realistic Sentry envelopes for
// blast to replay: errors, transactions, sessions, cron check-ins and logs,
// addressed to Zipf-weighted projects and carrying realistic user agents.
// Everything is built once, before the clock starts; sending compresses
// nothing and marshals nothing.
//
// # Determinism and time
//
// Entry i is a function of (Options.Seed, i) and the options: its kind, its
// project, its agent and every byte of its payload come from math/rand/v2
// PCG streams seeded with (seed, i), so the result does not depend on build
// order or GOMAXPROCS (Build uses GOMAXPROCS workers), and a smaller pool
// is a prefix of a larger one (except a check-in pair cut by the end).
// Pool.Hash covers every raw envelope and entry's metadata.
//
// Timestamps are the exception: they are relative to Options.Now, and
// sent_at = Now. blast rebuilds the pool for every run with Now =
// time.Now(), because Relay checks time windows (docs/protocol.md, What
// Relay checks in what blast sends): it drops sessions older than 5 days or
// more than 60 s in the future, moves events older than the project's
// retention (90 days by default) to the receive time, and drops transactions
// outside its metrics window. Relay also corrects clock drift from sent_at once it differs from
// the receive time by ≥ 55 minutes, shifting all timestamps by the
// difference, so a pool stays valid even if a run lasts hours. A
// byte-identical pool therefore needs a fixed Now (the tests use one).
// Offsets from Now:
//
//	errors        timestamp 0.05–20 s before Now; breadcrumbs before it
//	transactions  end 0.05–20 s before Now; 30 ms–3 s long (server), 0.5–8 s (browser)
//	sessions      started 1–120 min before Now, timestamp between started and Now;
//	              aggregates: one bucket per minute for the last 1–30 minutes
//	logs          ascending, from 15–25 s to at least 5 s before Now
//	check-ins     no timestamps (Relay stamps them)
//
// # Kinds
//
// Measured on a 20,000-entry pool (seed 1, default mix, 100 projects);
// sizes are uncompressed bytes of the whole envelope, ratios zstd:
//
//	kind          share  size min / median / mean / max        items      zstd
//	errors          30%  7.2K / 19.6K / 21.2K / 59K             1 event    3.5x
//	transactions    20%  8.6K / 19.2K / 22.3K / 50K             1          6.0x
//	sessions        20%  357 / 548 / 792 / 2.7K                 1–5        1.9x
//	checkins        10%  340 / 379 / 425 / 595                  1          1.1x
//	logs            20%  730 / 5.4K / 16.8K / 91K               1–100 recs 7.4x
//	all                  mean 14.4K per envelope (288 MB raw, 62 MB zstd)   4.6x
//
// Counts on that pool: frames of the caught exception 20–80 (median 35,
// mean 40), breadcrumbs 5–60 (mean 32), exceptions 1–3 (mean 1.3), spans
// 20–100 (median 40, mean 46), log records 1–100 (median 7, mean 21),
// aggregate buckets 1–30.
//
// gzip, deflate and brotli compress the pool 4.9–5.0x. Shapes:
//
//   - errors (item "event"): platform javascript (browser), node, python,
//     java, go or cocoa, chosen to fit the agent (browser SDKs only with
//     browser agents, the iOS SDK with iOS app clients); 1–3 exceptions
//     (30% chained, causes first, mechanism chained/exception_id/parent_id);
//     the caught exception has 20–80 frames (median 35), the causes 5–30;
//     library frames around in-app frames, context lines (5+1+5) and vars on
//     a share of frames as each SDK sends them; 5–60 breadcrumbs (http,
//     navigation, ui.click, query, console); request with url, method,
//     query_string, 10–11 headers (User-Agent = the entry's agent), cookies
//     and a JSON body; user, contexts (trace, runtime, os, device, app,
//     culture as the platform sends them), 3–8 tags, extra, logentry,
//     release, environment, sdk with integrations and packages. The envelope
//     header carries the dynamic sampling context (trace).
//   - transactions: 20–100 spans (median 40) in a tree under the root
//     (contexts.trace): ~65% direct children of the root, the rest nested up
//     to 4 levels under function/middleware spans; every child lies within
//     its parent, siblings run one after another. SQL spans (op "db", Java
//     "db.sql.query") with realistic statements and the platform's
//     placeholders (%s, $1, ?), N+1 runs of one statement 10–30 times,
//     http.client, cache.get/put, resource.* (browser), function spans;
//     span data as in the span data conventions; browser web vitals and
//     some custom measurements as {value, unit}; DSC in the envelope header.
//   - sessions: 70% one "session" update (init, ok update, or terminal
//     exited/errored/crashed/abnormal with duration), 10% 2–5 updates, 20%
//     one "sessions" item with 1–30 per-minute aggregate buckets; attrs
//     release, environment, ip_address {{auto}}, user_agent.
//   - checkins: pairs of consecutive entries sharing check_in_id (and
//     project, slug, and agent unless agents are unique): in_progress, then ok (80%) or error with a
//     duration; 30% of monitors send monitor_config (crontab or interval).
//   - logs: one "log" container (content_type
//     application/vnd.sentry.items.log+json, item_count = records) with 1–100
//     records (median 7, mean 21), level and severity_number, trace/span ids,
//     5–15 typed attributes (SDK defaults, message template and parameters,
//     server.address, user_agent.original for browser logs, custom ones).
//
// # PII canaries
//
// Every error envelope carries every error canary of package canary exactly
// once, at the place its Where names, with value Kind.Value(entry index):
// request.data.password, Authorization (Bearer), X-Api-Key, the sessionid
// cookie, password= in the query string, a frame's vars.api_key, a
// breadcrumb's data.token, extra.db_url (URL password), extra.credentials,
// user.username "secret-…", a PEM private key in extra.cert, and the masked
// card, IBAN, SSN (extra.*_note) and logentry.formatted card; transactions
// carry span_data_password on one span; logs carry log_body_email in one
// body and log_attribute_password as attribute "password" of one record;
// errors and transactions carry the Kept control extra.public_note. No
// other value contains words Relay's default rules match (password, secret,
// auth, credentials, token=, Bearer, card/IBAN/SSN-shaped numbers), so
// Relay's scrubbing changes exactly the canaries (checked against
// sentry_relay in interop/test_pool.py).
//
// # Projects, agents, addresses
//
// Each entry's project is drawn with Zipf (exponent ZipfS) over
// Options.Projects: rank i is project i, so project 0 gets the most. Agents
// come from package useragent (Chrome, Mobile Safari, Edge, Firefox,
// Samsung, Opera, crawlers, legacy browsers, app clients, tools): a table
// of UserAgents distinct agents drawn with Zipf, or with UniqueUserAgents
// one agent per entry that no other entry has. Options.Agents (a list of
// real agents) replace them: drawn with Zipf in list order or by their
// weights, or with UniqueUserAgents each in turn; useragent.Classify says
// which SDKs fit each.
// The agent is where Relay reads it (event request.headers User-Agent,
// session attrs.user_agent, log attribute user_agent.original) and in
// Entry.UserAgent for the HTTP header. Entry.ForwardedFor is a public IPv4
// (85%) or IPv6 address, never private, loopback, link-local, CGNAT,
// benchmarking or documentation space, so Relay's localhost filter keeps
// browser events; it is only ever a header value. Envelope headers carry
// no dsn (blast authenticates with X-Sentry-Auth).
//
// # Memory
//
// Raw envelopes are written straight into 8 MiB per-worker chunks (the
// payload first, its headers copied in front of it afterwards), and encoded
// bodies into 1 MiB chunks; with Encoding identity Body is the raw slice.
// Stats.HeldBytes is the chunk memory (raw + encoded + the chunks' unused
// ends). Dropping every reference to
// the raw slices (as blast.ForSending does) frees the raw chunks.
//
// # Speed
//
// BenchmarkBuild20k builds 20,000 entries; it reports CPU seconds per
// build next to wall time because the machine it runs on is shared.
package pool
