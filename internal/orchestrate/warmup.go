package orchestrate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/upstream"
)

// warmupClient is the sentry_client of warm-up envelopes.
const warmupClient = "relayload-orchestrate/1.0"

// warmupEnvelope is a small error event for project p: enough for Relay to
// fetch the project's config and forward something.
func warmupEnvelope(now time.Time) []byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	eid := hex.EncodeToString(id[:])
	payload := fmt.Sprintf(`{"event_id":%q,"level":"info","platform":"other","message":"relayload warm-up","timestamp":%d}`,
		eid, now.Unix())
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"event_id":%q,"sent_at":%q}`+"\n", eid, now.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(&b, `{"type":"event","length":%d}`+"\n", len(payload))
	b.WriteString(payload)
	b.WriteByte('\n')
	return b.Bytes()
}

// sendWarmup posts one envelope per project to target and returns how many
// were answered 2xx and a description of the other answers.
func sendWarmup(ctx context.Context, target string, ps []projects.Project) (int, string) {
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	var (
		mu     sync.Mutex
		ok     int
		others = map[string]int{}
		wg     sync.WaitGroup
		sem    = make(chan struct{}, 8)
	)
	for _, p := range ps {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, target+p.EnvelopePath(), bytes.NewReader(warmupEnvelope(time.Now())))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/x-sentry-envelope")
			req.Header.Set("X-Sentry-Auth", p.AuthHeader(warmupClient))
			resp, err := client.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				others["error: "+err.Error()]++
				return
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				ok++
			} else {
				others[strconv.Itoa(resp.StatusCode)]++
			}
		}()
	}
	wg.Wait()
	desc := ""
	for k, n := range others {
		if desc != "" {
			desc += ", "
		}
		desc += fmt.Sprintf("%s ×%d", k, n)
	}
	return ok, desc
}

// warmUp sends the warm-up envelopes and waits (bounded) until the fake
// upstream has served every project's config and the global config and has
// received forwarded envelopes. For the harness (no Relay) only the
// envelopes count.
func (r *runner) warmUp(ctx context.Context, up *upstream.Server, target string, harness bool, alive func() error) WarmUp {
	start := time.Now()
	var w WarmUp
	n := int64(len(r.projects))
	ok, others := sendWarmup(ctx, target, r.projects)
	if others != "" {
		w.Note = fmt.Sprintf("warm-up envelopes: %d of %d accepted, others: %s", ok, n, others)
	}
	deadline := time.NewTimer(r.cfg.WarmupTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st := up.Stats()
		w.ConfigsAsked, w.KeysServed, w.Global = st.ConfigRequests.Project, st.ConfigRequests.KeysServed, st.ConfigRequests.Global
		w.Forwarded = st.Envelopes
		if harness {
			w.Complete = w.Forwarded >= int64(ok) && ok > 0
		} else {
			w.Complete = w.KeysServed >= n && w.Global >= 1 && w.Forwarded >= int64(ok) && ok > 0
		}
		w.Took = time.Since(start)
		if w.Complete {
			return w
		}
		if err := alive(); err != nil {
			w.Note = join(w.Note, err.Error())
			return w
		}
		select {
		case <-ctx.Done():
			return w
		case <-deadline.C:
			w.Note = join(w.Note, fmt.Sprintf("warm-up incomplete after %s: upstream served %d of %d project keys, %d global config requests, received %d of %d forwarded envelopes",
				r.cfg.WarmupTimeout, w.KeysServed, n, w.Global, w.Forwarded, ok))
			return w
		case <-tick.C:
		}
	}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + "; " + b
}
