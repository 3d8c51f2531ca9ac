// Package replay builds blast's pool from recorded envelopes instead of
// the generators: a directory of .envelope files, such as a fake
// upstream's capture (fake-upstream --capture, package capture) or a
// blast dump (blast --dump), read by Load and turned into a pool.Pool of
// any size by Build.
//
// # Corpus
//
// Every *.envelope file of the directory is one envelope, in Relay's
// framing (package envelope; a file it refuses is refused with its name and
// the byte offset of the fault), taken in name order. A manifest, when
// there is one, says where each file was first sent: manifest.jsonl of a
// capture or manifest.json of a dump give its project id, public key,
// HTTP User-Agent and X-Forwarded-For. Without one, the project comes from
// the envelope header's dsn, else from the dynamic sampling context's
// public_key; the User-Agent from the first event's request headers, else
// blast sends its own; the X-Forwarded-For is a public address drawn per
// file. Load holds the corpus in memory and refuses one larger than its
// limit (DefaultMaxBytes unless given).
//
// # Entries
//
// Entry i of a pool replays file i mod n, the n files in name order, so a
// pool the size of a dump replays the dump's envelopes in its order; a
// pool smaller than the corpus replays its first files. An entry's kind
// is that of its first item that is neither a client report nor metrics
// (else of its first item; CarriesData tells those kinds): event is errors,
// transaction transactions, session and sessions sessions, check_in
// checkins, log logs, and any other type its own name. Items counts a
// container's records (item_count), as the generated pool does.
//
// # Re-targeting
//
// The original project maps to one of the run's projects: to itself when
// it is one of them (a dump of the same --seed and --projects), else to
// one picked by a hash of its key, so that the same original project
// always lands on the same project of ours. The envelope header's dsn and
// the DSC's trace.public_key are replaced by that project's; the request
// path and X-Sentry-Auth are the project's, as for a generated pool.
//
// # Freshness
//
// Relay and Sentry drop or merge what they have seen, so each entry gets
// new ids and current timestamps, found by key name in the envelope header
// and in every JSON item, at any depth:
//
//   - ids (event_id, trace_id, span_id, parent_span_id, segment_id, sid,
//     check_in_id, replay_id, profile_id, profiler_id; string values): new
//     hex digits, same length, dashes and case, from a hash of (Seed, copy
//     number i / n, old id). Within one copy an id shared by several
//     envelopes (a session's init and update, a check-in's two halves,
//     spans of one trace) stays shared; every copy gets other ids.
//   - timestamps (timestamp, start_timestamp, end_timestamp, started,
//     sent_at, received): RFC 3339 strings and epoch seconds between 2000
//     and 2100, shifted so that the envelope's reference time (its
//     header's sent_at, else its latest timestamp) is Options.Now, written
//     in their own format (separator, fraction digits, zone) — a shift of
//     zero writes the same bytes. A session's seq, when it is epoch
//     milliseconds (Relay's default), is moved by one shift for the whole
//     corpus (its latest reference time to Now), so that the updates of a
//     session stay in order across envelopes; a small seq is kept, as it
//     orders the updates of a session whose sid is new anyway.
//
// String values with JSON escapes are left as they are (SDKs write ids
// and timestamps plainly), except the dsn and public_key, which are
// always replaced. Values are replaced in place in the bytes: nothing is
// re-marshalled, so key order, spacing and number formatting survive, and
// an item header's length is rewritten when its payload's length changed.
// Items that are not JSON (attachments, replay recordings, anything that
// does not parse) are replayed byte for byte.
package replay
