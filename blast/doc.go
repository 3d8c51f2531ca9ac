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
// Results up exactly (counters add; DDSketches merge bin by bin).
//
// Go timers on the target VMs fire about 1 ms late for any sub-millisecond
// sleep (the netpoller waits with epoll_wait, whose timeout is in ms), so
// the pacer wakes about once a millisecond and releases every slot already
// due, each stamped with its own intended time. Latency runs from that
// intended time to the response, so a stalled generator or server shows up
// in the latency instead of being hidden; schedule lag (actual send −
// intended, ≥ 0) and service time (actual send → response) are recorded as
// separate sketches, so one can tell whether the generator or the target
// was late. A slot that is due while MaxInflight requests are outstanding
// is dropped and counted, never queued; a run with more than 0.1% drops or
// a lag p99 above 5 ms is marked Invalid with the reasons.
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
// net/http (a Transport with MaxIdleConnsPerHost = MaxInflight and
// DisableCompression). fasthttp is the default because it costs less CPU
// per request, allocates nothing per request, and held 20k/s where net/http
// did not. Measured on the shared 2-core VM (internal/cmd/blastbench: the
// built binary against a null fasthttp sink in another process, 20 000-entry
// mixed zstd pool, 5 s after 1 s warm-up, load average 4.5–6):
//
//	client    rate    blast CPU/request  lag p99   achieved
//	fasthttp  10k/s   20.4–21.7 µs       1.67 ms*  10 000.0/s
//	net/http  10k/s   34.8–35.1 µs       3.6–4.0 ms 10 000.0/s
//	fasthttp  20k/s   20.9–21.2 µs       1.51 ms*  20 000.0/s (1 of 2 runs; the other hit a machine stall)
//	net/http  20k/s   46.4–47.2 µs       159–172 ms 17 300/s, 13% dropped (both runs)
//
// (* the best of two runs; the other fasthttp 10k run had a 16 ms lag p99
// from a stall on the shared box.) Sequentially against a minimal in-process
// server (BenchmarkSendFastHTTP / BenchmarkSendNetHTTP) fasthttp took 28 µs
// and 0 allocs per request, net/http 39 µs and 67 allocs. net/http stays
// available (Config.Client, --client net/http) for targets fasthttp cannot
// speak to.
package blast
