// Package envelope reads and writes Sentry envelopes with the framing of
// Relay (getsentry/relay, relay-server/src/envelope: Envelope::parse_bytes,
// Item::parse), so that what Parse accepts is what Relay's parser accepts and
// every rejection names the byte offset and the rule broken.
//
// # Wire format
//
//	envelope = header *( LF item-header LF payload ) [LF]
//
// where the LF after the last header or payload may be missing when the input
// ends there (a bare final item header has an empty payload).
//
// The rules, each with the Relay behaviour it reproduces:
//
//   - Empty input is rejected (RuleEmpty): Relay answers "empty request body".
//   - The envelope header is one JSON object (RuleHeaderInvalid). Relay reads it
//     with serde_json's stream reader, so leading JSON whitespace is skipped and
//     the object ends at its closing '}'. A header that is only whitespace is
//     RuleHeaderInvalid too ("missing envelope header").
//   - The byte after a header's '}' must be LF, or the input must end there
//     (RuleMissingNewline, Relay's require_termination). A CR (CRLF line
//     endings) or a space after '}' is therefore an error.
//   - An item header is a JSON object (RuleItemHeaderInvalid) with a string
//     "type" (RuleMissingType, RuleTypeNotString). Unknown types are accepted;
//     "integration" is Relay-internal and rejected (RuleInternalType).
//   - "length", when present and not null, must be a JSON integer in
//     0..4294967295 (Relay's Option<u32>): no sign, fraction or exponent
//     (RuleBadLength). "item_count" likewise (RuleBadItemCount); 0 and null
//     read as absent.
//   - With "length", the payload is exactly that many bytes and may hold any
//     byte, LF included. A length past the end of the input is
//     RuleUnexpectedEOF; the byte after the payload must be LF or the end
//     (RuleMissingNewline). Without "length", the payload runs to the next LF
//     (exclusive) or the end of the input.
//   - Items follow each other until the input is used up. At most one final LF:
//     anything after the last item that is only whitespace, such as a second
//     final LF, is RuleTrailingData (Relay reads it as an item header and fails
//     with "unexpected end of file"). A header-only envelope is valid.
//   - Duplicate keys in the top level of an envelope or item header are
//     RuleDuplicateKey. Relay (serde with #[serde(flatten)]) rejects duplicates
//     of the keys it has struct fields for, such as two "sent_at", and keeps the
//     last of duplicated unknown keys; this package rejects both, as JSON with
//     duplicate keys means different things to different readers.
//
// Whitespace before a header's '{' — spaces, tabs, CR or LF, so also blank
// lines between items — is accepted because Relay accepts it. Payloads are
// never inspected.
//
// # Header JSON
//
// Headers are checked by a small hand-written JSON scanner (strings with
// escapes, nested objects and arrays such as "sdk" and "trace", numbers),
// which lets Scan run without allocating. Syntax agrees with encoding/json's
// json.Valid, plus the limits serde_json applies when Relay decodes a header:
// strings must be valid UTF-8 with paired UTF-16 surrogate escapes, numbers
// must fit a float64, and nesting is at most 127 levels deep.
//
// Fields Relay deserializes into typed struct fields must have the right JSON
// type: in the envelope header "event_id" (a UUID string: 32 hex digits,
// hyphenated, braced or urn:uuid:), "dsn" and "sent_at" (strings); in item
// headers "content_type", "attachment_type", "filename", "platform" (strings),
// "routing_hint" (a UUID string), and "metrics_extracted", "spans_extracted",
// "fully_normalized", "sampled" (booleans). null is the same as absent except
// for the booleans and "type". Relay checks more than this package does: the
// DSN's syntax, "sent_at" as a date, and request-metadata fields such as
// "origin"; those are left to the caller.
//
// # Reading fast
//
// Parse returns an Envelope whose header and payload slices alias the input.
// Scan applies the same rules and records only item types and payload bounds
// in a reusable Summary; once warm it does not allocate, which is what a fake
// upstream counting items at high rates needs.
//
// # Writing
//
// Marshal and AppendTo write every item with an explicit "length", so any
// payload round-trips, and end the envelope with one LF.
package envelope
