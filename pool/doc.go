// Package pool builds a deterministic pool of realistic Sentry envelopes for
// blast to replay: errors, transactions, sessions, cron check-ins and logs,
// addressed to Zipf-weighted projects and carrying realistic user agents.
//
// The pool is built once, before the clock starts, from Options.Seed. Every
// entry draws from its own math/rand/v2 PCG stream seeded with (seed, index),
// so entry i does not depend on build order or parallelism.
package pool
