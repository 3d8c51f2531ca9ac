// Package blast sends a pool of pre-built Sentry envelopes to a Relay (or
// the fake upstream) on an exact open-loop schedule and measures what
// happened without coordinated omission.
//
// # Schedule
//
// The plan is shared by every process of a run: global slot k is due at
// t0 + k/Rate and sends pool entry k mod len(pool). A process started with
// Shard i of Shards N sends only the slots k ≡ i (mod N), so N processes
// (on N machines) send exactly what one process would, and Merge adds their
// Results up exactly (counters add; DDSketches merge bin by bin). Each
// Result records its schedule (rate, shards, seed, duration, count,
// warm-up, a digest of the pool's options and projects), a random run id
// and the shards it covers, so Merge refuses results of different
// schedules and any run or shard given twice.
//
// The pacer releases every slot already due each time it wakes, each
// stamped with its own intended time. Go's runtime timers wake an idle
// process on whole milliseconds (the netpoller's epoll_wait timeout is in
// ms, truncated), so on Linux the pacer sleeps a millisecond or more on a
// timerfd instead (one wake-up per slot, on time, at rates below 1000/s)
// and shorter sleeps on a runtime timer (above 1000/s: about one wake-up
// per millisecond). Latency runs from that
// intended time to the response, so a stalled generator or server shows up
// in the latency instead of being hidden; schedule lag (actual send −
// intended, ≥ 0) and service time (actual send → response) are recorded as
// separate sketches, so one can tell whether the generator or the target
// was late. A slot that is due while MaxInflight requests are outstanding
// is dropped and counted, never queued; a run with more than 0.1% drops, a
// lag p99 above 5 ms, or no request that succeeded is marked Invalid with
// the reasons.
//
// Rate 0 is a closed loop: Concurrency workers send back to back (lag is 0
// by definition there, and latency equals service time).
//
// # Recording
//
// Workers record into 16 striped recorders, each with a mutex, three
// DDSketches (α = 0.01, values in ms; sketches-go is not safe for
// concurrent use) and exact counters; they are merged once at the end.
// Striping instead of one recorder per worker keeps memory fixed when an
// overload spawns thousands of workers, and the lock is practically never
// contended. Per-second windows (by actual
// send time; drops by intended time) keep counts and a latency sketch for
// charts and for the ±1% per-second rate check. The hot path — send with
// the fasthttp client and record — makes no allocations (TestHotPathAllocs).
// A Result is JSON with encoded sketches: a few KB plus about 1 KB per
// second, never per-request data.
//
// # HTTP client
//
// Two senders exist behind a small interface: fasthttp (default) and
// net/http (a Transport with MaxConnsPerHost = MaxIdleConnsPerHost =
// MaxConns and DisableCompression). fasthttp is the default because it
// costs about half the CPU per request, allocates nothing per request, and
// keeps the schedule at rates where net/http's schedule lag does not
// (BenchmarkSendFastHTTP against BenchmarkSendNetHTTP in process;
// internal/cmd/blastbench for the built binary against a sink in another
// process, with vegeta beside it). On a busy machine stalls appear; blast
// then reports them as lag and drops and marks the run invalid. net/http
// stays available (Config.Client, --client net/http) for targets fasthttp
// cannot speak to.
package blast
