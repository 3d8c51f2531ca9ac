package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/projects"
)

// TestBatchForwards: with Config.BatchForwards, a Relay forward whose header
// passes is answered {} at once and counted only once the batch is checked
// (Stats does); a bad signature or an unknown project is still answered at
// once; what fails a check on the body was answered 200 and is counted as
// that error; SDK envelopes and bodies past BodyPreSlotBytes are checked
// before they are answered, as without batching.
func TestBatchForwards(t *testing.T) {
	for _, mode := range []struct {
		name string
		hold int64
	}{{"batch", 0}, {"hold", 2 << 20}} {
		t.Run(FastHTTP+"/"+mode.name, func(t *testing.T) { testBatchForwards(t, mode.hold) })
	}
}

// testBatchForwards is TestBatchForwards with a batch, or a hold of hold
// bytes, in which only the relay's registration is checked before the
// answer (a case marked later waits there with its body's checks).
func testBatchForwards(t *testing.T, hold int64) {
	// An hour: nothing is due by age, so only reading the counts checks.
	f := newFixture(t, func(c *Config) { c.BatchForwards, c.HoldForwards = time.Hour, hold })
	r := newRelay(t)
	f.register(r)
	p := f.ps[0]
	good := envelopeBody(p, eventID, item("event", `{"message":"x"}`), item("attachment", "abc"))
	short := []byte(`{"event_id":"` + eventID + `"}` + "\n" + `{"type":"event","length":100}` + "\n{}\n")
	big := envelopeBody(p, eventID, item("event", `{"message":"`+strings.Repeat("x", BodyPreSlotBytes)+`"}`))
	relay := func(extra map[string]string) map[string]string {
		h := f.forwardHeaders(r, p)
		maps.Copy(h, extra)
		return h
	}
	idAnswer := `{"id":"` + eventID + `"}`
	for _, tc := range []struct {
		name    string
		path    string
		body    []byte
		enc     compression.Encoding
		hdr     map[string]string
		status  int
		answer  string // exact body of a 200
		batched bool   // waits in the batch
		reason  string // the error it is counted under
		later   bool   // a hold answers it 200 and checks it with its body
	}{
		{name: "good forward", body: good, enc: compression.Zstd, hdr: relay(nil), status: 200, answer: "{}", batched: true},
		{name: "good forward, identity", body: good, hdr: relay(nil), status: 200, answer: "{}", batched: true},
		{name: "framing fails after the answer", body: short, hdr: relay(nil), status: 200, answer: "{}", batched: true, reason: "malformed_envelope"},
		{name: "decoding fails after the answer", body: []byte("not zstd at all"), enc: compression.Zstd, hdr: relay(nil), status: 200, answer: "{}", batched: true, reason: "bad_compression"},
		{name: "bad signature", body: good, hdr: relay(map[string]string{"X-Sentry-Relay-Signature": newRelay(t).sk.Sign(nil, f.clock.Now())}), status: 401, reason: "bad_signature", later: true},
		{name: "expired signature", body: good, hdr: relay(map[string]string{"X-Sentry-Relay-Signature": r.sk.Sign(nil, f.clock.Now().Add(-DefaultMaxSignatureAge-time.Minute))}), status: 401, reason: "expired_signature", later: true},
		{name: "unknown project", path: "/api/999999/envelope/", body: good, hdr: relay(nil), status: 403, reason: "unknown_project", later: true},
		{name: "unknown encoding", body: good, hdr: relay(map[string]string{"Content-Encoding": "snappy"}), status: 415, reason: "bad_encoding", later: true},
		{name: "unregistered relay answered at once", body: good, hdr: relay(map[string]string{"X-Sentry-Relay-Id": newRelay(t).id}), status: 403, reason: "unknown_relay"},
		{name: "large body checked before the answer", body: big, hdr: relay(nil), status: 200, answer: idAnswer},
		{name: "SDK envelope checked before the answer", body: good, hdr: map[string]string{"X-Sentry-Auth": p.AuthHeader("sdk/1.0")}, status: 200, answer: idAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.later && hold > 0 {
				tc.status, tc.answer, tc.batched = 200, "{}", true
			}
			before := f.srv.Stats()
			path := tc.path
			if path == "" {
				path = p.EnvelopePath()
			}
			hdr := map[string]string{"Content-Type": "application/x-sentry-envelope"}
			maps.Copy(hdr, tc.hdr)
			body := tc.body
			if tc.enc != "" && tc.enc != compression.Identity {
				hdr["Content-Encoding"] = string(tc.enc)
				if tc.reason == "" {
					body = encode(t, tc.enc, body)
				}
			}
			resp := f.do("POST", path, body, hdr)
			if resp.status != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.status, tc.status, resp.body)
			}
			if tc.status == 200 && string(resp.body) != tc.answer {
				t.Errorf("answer %s, want %s", resp.body, tc.answer)
			}
			c := f.srv.stats.Load()
			if got, want := c.envelopes.Load()-before.Envelopes, int64(0); tc.batched && got != want {
				t.Errorf("counted before the batch was checked: %d envelopes", got)
			}
			after := f.srv.Stats()
			wantEnv := int64(0)
			if tc.status == 200 && tc.reason == "" {
				wantEnv = 1
			}
			if got := after.Envelopes - before.Envelopes; got != wantEnv {
				t.Errorf("envelopes counted %d, want %d", got, wantEnv)
			}
			wantChecked, wantFailed := int64(0), int64(0)
			if tc.batched {
				wantChecked = 1
				if tc.reason != "" {
					wantFailed = 1
				}
			}
			if got := after.BatchedForwards.Checked - before.BatchedForwards.Checked; got != wantChecked {
				t.Errorf("batched checked %d, want %d", got, wantChecked)
			}
			if got := after.BatchedForwards.FailedAfterAnswer - before.BatchedForwards.FailedAfterAnswer; got != wantFailed {
				t.Errorf("failed after answer %d, want %d", got, wantFailed)
			}
			if tc.reason != "" {
				var n int64
				for k, v := range after.Errors {
					if strings.HasPrefix(k, tc.reason) {
						n += v - before.Errors[k]
					}
				}
				if n != 1 {
					t.Errorf("errors %v: want one more under %s", after.Errors, tc.reason)
				}
			}
			if after.InFlight != 0 {
				t.Errorf("in flight %d after the batch was checked", after.InFlight)
			}
		})
	}
	if hold > 0 {
		t.Run("signature aged at its arrival", func(t *testing.T) {
			before := f.srv.Stats()
			if resp := f.do("POST", p.EnvelopePath(), good, relay(nil)); resp.status != 200 {
				t.Fatalf("status %d: %s", resp.status, resp.body)
			}
			f.clock.Add(DefaultMaxSignatureAge + time.Minute) // past its age limit before the check
			after := f.srv.Stats()
			if env, failed := after.Envelopes-before.Envelopes, after.BatchedForwards.FailedAfterAnswer-before.BatchedForwards.FailedAfterAnswer; env != 1 || failed != 0 {
				t.Errorf("%d envelopes counted, %d failed after the answer (errors %v): want the forward counted", env, failed, after.Errors)
			}
		})
	}
}

// TestBatchForwardsTimesAndResets: a batched forward is counted in the
// timeline second it arrived in, however late the batch is checked; a
// reset counts what waits into the generation it arrived in, without
// waiting out resetWait; a batch is checked in the background a period
// after its first forward, or once checkAt forwards wait.
func TestBatchForwardsTimesAndResets(t *testing.T) {
	t.Run(FastHTTP, func(t *testing.T) {
		f, r := newBatchFixture(t, time.Hour)
		p := f.ps[1]
		post := func() {
			t.Helper()
			hdr := f.forwardHeaders(r, p)
			wantStatus(t, f.do("POST", p.EnvelopePath(), envelopeBody(p, eventID, item("event", `{"message":"x"}`)), hdr), 200, "")
		}
		counted := func() int64 { return f.srv.stats.Load().envelopes.Load() }
		waitCounted := func(want int64, why string) {
			t.Helper()
			deadline := time.Now().Add(5 * time.Second)
			for counted() != want {
				if time.Now().After(deadline) {
					t.Fatalf("%s: %d envelopes counted, want %d", why, counted(), want)
				}
				time.Sleep(time.Millisecond)
			}
		}
		f.srv.ResetStats()
		post()
		f.clock.Add(3 * time.Second)
		st := f.srv.Stats()
		if got := st.Timeline.Envelopes; len(got) != 1 || got[0] != 1 {
			t.Errorf("timeline %v, want the forward in second 0", got)
		}

		post()
		post()
		start := time.Now()
		old := f.srv.ResetStats()
		if took := time.Since(start); took >= resetWait {
			t.Errorf("reset took %s: it waited for the batch", took)
		}
		if old.Envelopes != 3 || old.BatchedForwards.Checked != 3 {
			t.Errorf("reset's last snapshot: %d envelopes, %d batched, want 3 and 3", old.Envelopes, old.BatchedForwards.Checked)
		}
		if n := counted(); n != 0 {
			t.Errorf("new generation has %d envelopes", n)
		}

		setBatch(f.srv, func(b *forwardBatch) { b.checkAt = 3 })
		post()
		post()
		time.Sleep(50 * time.Millisecond)
		if n := counted(); n != 0 {
			t.Fatalf("%d counted with 2 of 3 waiting and the period an hour", n)
		}
		post()
		waitCounted(3, "the third of checkAt 3")

		setBatch(f.srv, func(b *forwardBatch) { b.checkAt, b.period = batchCheckAt, 20*time.Millisecond })
		post()
		waitCounted(4, "a period after the batch's first forward")
	})
}

// TestBatchForwardsFull: a forward that finds the batch full is checked
// and answered at once, with its event id, and counted before anything
// reads the counts.
func TestBatchForwardsFull(t *testing.T) {
	t.Run(FastHTTP, func(t *testing.T) {
		f, r := newBatchFixture(t, time.Hour)
		p := f.ps[2]
		post := func() response {
			t.Helper()
			hdr := f.forwardHeaders(r, p)
			return f.do("POST", p.EnvelopePath(), envelopeBody(p, eventID, item("event", `{"message":"x"}`)), hdr)
		}
		for _, tc := range []struct {
			name                 string
			maxForwards, maxByte int
			batched              int // of three forwards
		}{
			{"two forwards at most", 2, maxBatchedBytes, 2},
			{"no room for a buffer", maxBatchedForwards, 1, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				f.srv.ResetStats()
				setBatch(f.srv, func(b *forwardBatch) { b.maxForwards, b.maxBytes = tc.maxForwards, tc.maxByte })
				for i := range 3 {
					resp := post()
					want := "{}"
					if i >= tc.batched {
						want = `{"id":"` + eventID + `"}`
					}
					if resp.status != 200 || string(resp.body) != want {
						t.Errorf("forward %d: %d %s, want 200 %s", i, resp.status, resp.body, want)
					}
				}
				if n := f.srv.stats.Load().envelopes.Load(); n != int64(3-tc.batched) {
					t.Errorf("%d counted before the batch was checked, want %d", n, 3-tc.batched)
				}
				st := f.srv.Stats()
				if st.Envelopes != 3 || st.BatchedForwards.Checked != int64(tc.batched) {
					t.Errorf("envelopes %d, batched %d; want 3 and %d", st.Envelopes, st.BatchedForwards.Checked, tc.batched)
				}
			})
		}
	})
}

// TestBatchForwardsConcurrent: forwards from many connections, batches
// checked in the background and by readers at the same time, every forward
// counted once (run it with -race).
func TestBatchForwardsConcurrent(t *testing.T) {
	t.Run(FastHTTP, func(t *testing.T) {
		f, r := newBatchFixture(t, time.Millisecond)
		f.srv.ResetStats()
		const senders, each = 8, 40
		done := make(chan struct{})
		readerDone := make(chan struct{})
		go func() { // a reader, and a clock that makes batches due
			defer close(readerDone)
			for {
				select {
				case <-done:
					return
				default:
				}
				f.clock.Add(time.Millisecond)
				_ = f.srv.DataEnvelopes()
				time.Sleep(100 * time.Microsecond)
			}
		}()
		errc := make(chan string, senders*each)
		var wg sync.WaitGroup
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := f.ps[g%len(f.ps)]
				for i := range each {
					hdr := f.forwardHeaders(r, p)
					hdr["Content-Encoding"] = "zstd"
					// 1 to 4 attachments: a body mixed up between forwards
					// changes the attachments counted.
					items := []envelope.Item{item("event", `{"message":"x"}`)}
					for range attachmentsOf(g, i) {
						items = append(items, item("attachment", "abc"))
					}
					resp := f.do("POST", p.EnvelopePath(), encode(t, compression.Zstd, envelopeBody(p, eventID, items...)), hdr)
					if resp.status != 200 {
						errc <- string(resp.body)
					}
				}
			}()
		}
		wg.Wait()
		close(done)
		<-readerDone
		close(errc)
		for e := range errc {
			t.Errorf("forward refused: %s", e)
		}
		st := f.srv.Stats()
		var attachments int64
		for g := range senders {
			for i := range each {
				attachments += int64(attachmentsOf(g, i))
			}
		}
		if got := st.ItemsByType["attachment"]; got != attachments {
			t.Errorf("attachments counted %d, want %d", got, attachments)
		}
		if st.Envelopes != senders*each || st.BatchedForwards.Checked != senders*each || st.DataEnvelopes != senders*each || st.InFlight != 0 {
			t.Errorf("envelopes %d, batched %+v, data %d, in flight %d; want %d each and none in flight",
				st.Envelopes, st.BatchedForwards, st.DataEnvelopes, st.InFlight, senders*each)
		}
	})
}

// attachmentsOf is how many attachments forward i of sender g carries.
func attachmentsOf(g, i int) int { return (g*7+i*3)%4 + 1 }

// setBatch changes a server's batch settings under its lock.
func setBatch(s *Server, set func(*forwardBatch)) {
	s.batch.mu.Lock()
	set(s.batch)
	s.batch.mu.Unlock()
}

// FuzzBatchedForwardsCountAlike sends every input as a Relay forward to two
// fake upstreams on fasthttp, one checking before it answers and one in
// batches: whatever the body, both count the same envelopes, items,
// records, outcomes, canaries, bytes and errors, and the batched one
// counts a failure after its answer exactly when the other refused the
// forward for its body.
func FuzzBatchedForwardsCountAlike(f *testing.F) {
	ps, _ := projects.Generate(3, 5)
	p := ps[0]
	good := envelopeBody(p, eventID, item("event", `{"a":1,"user":{"email":"rlcnry-em-aaaab x"}}`), item("client_report", `{"discarded_events":[{"reason":"x","category":"error","quantity":2}]}`),
		item("metric_buckets", `[{"name":"c:outcomes/filtered@none","type":"c","value":1,"tags":{"category":"1"}}]`))
	enc := compression.NewEncoder()
	for i, e := range compression.Encodings() {
		b, _ := enc.Encode(e, good, nil)
		f.Add(uint8(i), b)
		f.Add(uint8(i), good)
	}
	f.Add(uint8(0), []byte(`{"event_id":"`+eventID+`"}`+"\n"+`{"type":"event","length":100}`+"\n{}\n"))
	const relayID = "3c8c1c7e-6d5e-4b8a-9a0e-6a8b2d9f0c11"
	serve := func(batch time.Duration, hold int64) (*Server, string) {
		srv, err := New(Config{Projects: ps, MaxWireBytes: 1 << 20, MaxDecodedBytes: 4 << 20, BatchForwards: batch, HoldForwards: hold})
		if err != nil {
			f.Fatal(err)
		}
		srv.RegisterRelay(relayID, newRelay(f).pub)
		return srv, serveFastServer(f, srv)
	}
	inline, inlineAddr := serve(0, 0)
	batched, batchedAddr := serve(time.Hour, 0)
	held, heldAddr := serve(time.Hour, 64<<10) // a hold half full every few inputs
	client := &http.Client{Transport: &http.Transport{}}
	post := func(t *testing.T, addr string, e compression.Encoding, body []byte) int {
		req, err := http.NewRequest("POST", "http://"+addr+p.EnvelopePath(), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if e != compression.Identity {
			req.Header.Set("Content-Encoding", string(e))
		}
		req.Header.Set("X-Sentry-Auth", p.AuthHeader("fuzz"))
		req.Header.Set("X-Sentry-Relay-Id", relayID)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// counted is what both must agree on.
	counted := func(st Stats) string {
		b, _ := json.Marshal([]any{st.Envelopes, st.EnvelopesBySender, st.DataEnvelopes, st.ItemsByType, st.RecordsByType,
			st.MetricBuckets, st.Outcomes, st.Canaries, st.Bytes, st.Errors, st.Panics})
		return string(b)
	}
	f.Fuzz(func(t *testing.T, encIdx uint8, body []byte) {
		encs := compression.Encodings()
		e := encs[int(encIdx)%len(encs)]
		failedBefore := batched.Stats().BatchedForwards.FailedAfterAnswer
		inlineStatus := post(t, inlineAddr, e, body)
		batchedStatus := post(t, batchedAddr, e, body)
		heldStatus := post(t, heldAddr, e, body)
		a, b, h := inline.Stats(), batched.Stats(), held.Stats()
		if ca, cb := counted(a), counted(b); ca != cb {
			t.Fatalf("counted differently (inline %d, batched %d):\ninline  %s\nbatched %s", inlineStatus, batchedStatus, ca, cb)
		}
		if ca, ch := counted(a), counted(h); ca != ch {
			t.Fatalf("counted differently (inline %d, held %d):\ninline %s\nheld   %s", inlineStatus, heldStatus, ca, ch)
		}
		failed := b.BatchedForwards.FailedAfterAnswer - failedBefore
		switch {
		case len(body) > BodyPreSlotBytes && batchedStatus != inlineStatus:
			t.Fatalf("a %d-byte body is not batched, yet answered %d and %d", len(body), inlineStatus, batchedStatus)
		case inlineStatus/100 == 4 && batchedStatus == 200 && failed != 1,
			inlineStatus == 200 && (batchedStatus != 200 || failed != 0),
			batchedStatus/100 == 4 && batchedStatus != inlineStatus:
			t.Fatalf("answered %d inline, %d batched, %d failed after the answer", inlineStatus, batchedStatus, failed)
		}
	})
}

// TestHoldForwards: with Config.HoldForwards, batched forwards wait until
// their counts are read, past the batch period; their bodies go into the
// slab ReserveHold made, which comes back for the next forwards once they
// are checked; a hold half full is checked in the background (HoldFull),
// and a forward that finds it full is checked before it is answered.
func TestHoldForwards(t *testing.T) {
	t.Run(FastHTTP, func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.BatchForwards, c.HoldForwards = 10*time.Millisecond, 2<<20 })
		r := newRelay(t)
		f.register(r)
		p := f.ps[0]
		body := encode(t, compression.Zstd, envelopeBody(p, eventID, item("event", `{"message":"x"}`), item("attachment", "abc")))
		post := func() response {
			t.Helper()
			hdr := f.forwardHeaders(r, p)
			hdr["Content-Encoding"] = "zstd"
			return f.do("POST", p.EnvelopePath(), body, hdr)
		}
		counted := func() int64 { return f.srv.stats.Load().envelopes.Load() }
		slabs := func() (total int64, used, free int) {
			b := f.srv.batch
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.slabs.total, len(b.slabs.used), len(b.slabs.free)
		}
		f.srv.ResetStats()
		f.srv.ReserveHold(100, 3<<20) // more than half the hold, which is all a hold fills: one slab
		if total, used, free := slabs(); total != holdSlab || used != 0 || free != 1 || cap(f.srv.batch.queue) < 100 {
			t.Fatalf("reserved %d bytes in %d used and %d free slabs, room for %d forwards; want one free slab, 100 forwards",
				total, used, free, cap(f.srv.batch.queue))
		}
		for range 5 {
			if resp := post(); resp.status != 200 || string(resp.body) != "{}" {
				t.Fatalf("held forward answered %d %s", resp.status, resp.body)
			}
		}
		time.Sleep(50 * time.Millisecond) // five batch periods
		if n := counted(); n != 0 {
			t.Errorf("%d counted before anything read the counts", n)
		}
		if total, used, free := slabs(); total != holdSlab || used != 1 || free != 0 {
			t.Errorf("held in %d bytes of slabs, %d used, %d free: want the reserved one", total, used, free)
		}
		st := f.srv.Stats()
		if st.Envelopes != 5 || st.ItemsByType["attachment"] != 5 || st.BatchedForwards.Checked != 5 || st.BatchedForwards.LargestCheck != 5 || st.BatchedForwards.HoldFull != 0 || st.InFlight != 0 {
			t.Errorf("after reading: envelopes %d, attachments %d, batched %+v, in flight %d", st.Envelopes, st.ItemsByType["attachment"], st.BatchedForwards, st.InFlight)
		}
		if total, used, free := slabs(); total != holdSlab || used != 0 || free != 1 || cap(f.srv.batch.queue) < 100 {
			t.Errorf("after the check %d bytes of slabs, %d used, %d free, room for %d forwards: want the slab and the room back",
				total, used, free, cap(f.srv.batch.queue))
		}

		size := len(body) + holdForwardOverhead
		setBatch(f.srv, func(b *forwardBatch) { b.maxBytes = 3 * size }) // half full at the second
		post()
		post()
		deadline := time.Now().Add(5 * time.Second)
		for counted() != 7 {
			if time.Now().After(deadline) {
				t.Fatalf("%d counted: a hold half full was not checked", counted())
			}
			time.Sleep(time.Millisecond)
		}
		if st := f.srv.Stats(); st.BatchedForwards.HoldFull != 1 || st.BatchedForwards.Checked != 7 {
			t.Errorf("batched %+v, want the hold full once and 7 checked", st.BatchedForwards)
		}

		setBatch(f.srv, func(b *forwardBatch) { b.maxBytes = size - 1 })
		if resp := post(); resp.status != 200 || string(resp.body) != `{"id":"`+eventID+`"}` {
			t.Errorf("a forward finding the hold full answered %d %s, want its id", resp.status, resp.body)
		}
		if n := counted(); n != 8 {
			t.Errorf("%d counted, want the forward that found the hold full", n)
		}
		hdr := f.forwardHeaders(r, p)
		hdr["Content-Encoding"], hdr["X-Sentry-Relay-Signature"] = "zstd", newRelay(t).sk.Sign(nil, f.clock.Now())
		if resp := f.do("POST", p.EnvelopePath(), body, hdr); resp.status != 401 {
			t.Errorf("a forward with a bad signature finding the hold full answered %d %s, want 401", resp.status, resp.body)
		}
	})
	t.Run("no hold, nothing reserved", func(t *testing.T) {
		f, _ := newBatchFixture(t, time.Hour)
		f.srv.ReserveHold(100, 3<<20)
		if b := f.srv.batch; b.slabs.total != 0 || cap(b.queue) != 0 {
			t.Errorf("a batch without a hold reserved %d bytes, room for %d forwards", b.slabs.total, cap(b.queue))
		}
	})
}

// newBatchFixture serves a fake upstream on fasthttp that batches forwards
// with the given period, with a relay registered to send them.
func newBatchFixture(t *testing.T, period time.Duration) (*fixture, *testRelay) {
	t.Helper()
	f := newFixture(t, func(c *Config) { c.BatchForwards = period })
	r := newRelay(t)
	f.register(r)
	return f, r
}

// forwardHeaders are a forward's from relay r for project p: Relay's
// headers and the project key it passes on.
func (f *fixture) forwardHeaders(r *testRelay, p projects.Project) map[string]string {
	h := f.relayHeaders(r)
	h["X-Sentry-Auth"] = p.AuthHeader("relay/1.0")
	return h
}

// TestNoteLargest: each generation's LargestCheck counts its forwards in a
// check wherever they sit in the queue (a reset can interleave two), and
// never goes down.
func TestNoteLargest(t *testing.T) {
	a, b := &counters{}, &counters{}
	for _, tc := range []struct {
		gens         []*counters
		wantA, wantB int64
	}{
		{[]*counters{a, b, a, b, b}, 2, 3},
		{[]*counters{a}, 2, 3},
		{[]*counters{b, a, a, a}, 3, 3},
		{nil, 3, 3},
	} {
		q := make([]queuedForward, len(tc.gens))
		for i, c := range tc.gens {
			q[i].c = c
		}
		noteLargest(q)
		if ga, gb := a.batchLargest.Load(), b.batchLargest.Load(); ga != tc.wantA || gb != tc.wantB {
			t.Errorf("after %d forwards: largest %d and %d, want %d and %d", len(q), ga, gb, tc.wantA, tc.wantB)
		}
	}
}
