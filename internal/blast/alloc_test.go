package blast

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/compression"
)

// allocFreeServer answers every request on a connection with a fixed 200,
// reading requests without allocating per request (so AllocsPerRun sees
// only the client's allocations).
func allocFreeServer(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReaderSize(c, 64<<10)
				for {
					// Headers up to the blank line; remember Content-Length.
					n := -1
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
						if len(line) > 16 && strings.EqualFold(string(line[:15]), "content-length:") {
							n = 0
							for _, b := range line[15:] {
								if b >= '0' && b <= '9' {
									n = n*10 + int(b-'0')
								}
							}
						}
					}
					if n < 0 {
						return
					}
					if _, err := br.Discard(n); err != nil {
						return
					}
					if _, err := c.Write(resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

func newTestRunner(t testing.TB, client string, addr string) (*runner, sender) {
	p := testPool(t, 50, compression.Zstd)
	cfg, u, err := Config{Target: "http://" + addr, Pool: p, Rate: 1000, Client: client}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: cfg, clock: newRealClock()}
	r.prepare(u.String())
	// The long timeout (exact): on a loaded machine a slow answer must not
	// turn into an error, which allocates and fails the warm-up's count.
	r.client, err = newHTTPClient(client, clientOptions{host: u.Host, encoding: "zstd", timeout: exact, maxConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.client.close)
	return r, r.client.newSender()
}

// The hot path (send with fasthttp + record) allocates nothing once warm.
func TestHotPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	addr := allocFreeServer(t)
	r, s := newTestRunner(t, ClientFastHTTP, addr)
	rec := r.newRecorder()
	k := int64(0)
	step := func() {
		r.do(rec, s, job{k: k, intended: r.clock.Now()})
		k++
	}
	for range 200 { // warm: connection, buffers, sketch bins, windows
		step()
	}
	if rec.sent != 200 || rec.ok != 200 {
		t.Fatalf("warm-up: sent %d ok %d, errors %v %q", rec.sent, rec.ok, rec.errs, rec.errSample)
	}
	if a := testing.AllocsPerRun(500, step); a > 0 {
		t.Errorf("fasthttp send+record: %.2f allocs per request, want 0", a)
	}
}

// Recording allocates nothing once warm, in every window and error case.
// Unlike the send path (fasthttp's sync.Pools drop items at random under
// the race detector) this holds with -race too, so CI checks it.
func TestRecordAllocs(t *testing.T) {
	r, _ := newTestRunner(t, ClientFastHTTP, "127.0.0.1:1")
	rec := r.newRecorder()
	k := int64(0)
	step := func() {
		k++
		at := time.Duration(k%3000) * time.Millisecond // a window change every 1000 records
		var err error
		status := 200
		switch k % 7 {
		case 3:
			status = 503
		case 5:
			status, err = 0, errTimeoutForTest
		}
		rec.record(r, job{k: k, intended: at}, uint8(k%int64(len(r.kinds))), at+time.Millisecond, at+3*time.Millisecond, status, err)
		if k%500 == 0 {
			rec.drop(r, job{k: k, intended: at})
		}
	}
	for range 6000 { // warm: sketch bins, windows 0..2, error samples
		step()
	}
	if a := testing.AllocsPerRun(3000, step); a > 0 {
		t.Errorf("record: %.3f allocs per outcome, want 0", a)
	}
	if rec.sent == 0 || rec.errs[classify(errTimeoutForTest)] == 0 || rec.dropped == 0 {
		t.Fatalf("outcomes not recorded: sent %d errors %v dropped %d", rec.sent, rec.errs, rec.dropped)
	}
}

func benchmarkSend(b *testing.B, client string) {
	addr := allocFreeServer(b)
	r, s := newTestRunner(b, client, addr)
	rec := r.newRecorder()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r.do(rec, s, job{k: int64(i), intended: r.clock.Now()})
	}
	if rec.ok != int64(b.N) {
		b.Fatalf("ok %d of %d", rec.ok, b.N)
	}
}

// Sequential request cost of each client against a minimal server (client
// and server share the CPU; compare the two, not the absolute numbers).
func BenchmarkSendFastHTTP(b *testing.B) { benchmarkSend(b, ClientFastHTTP) }
func BenchmarkSendNetHTTP(b *testing.B)  { benchmarkSend(b, ClientNetHTTP) }

func BenchmarkRecord(b *testing.B) {
	r, _ := newTestRunner(b, ClientFastHTTP, "127.0.0.1:1")
	rec := r.newRecorder()
	b.ReportAllocs()
	for i := range b.N {
		us := time.Duration(i%1000) * time.Microsecond
		rec.record(r, job{k: int64(i), intended: 0}, 0, us, 2*us+100*time.Microsecond, 200, nil)
	}
}
