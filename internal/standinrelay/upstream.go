package standinrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// maxAPIResponse bounds JSON answers read from the upstream
// (limits.max_api_payload_size, 20 MiB).
const maxAPIResponse = 20 << 20

// upstreamError is a failed upstream call.
type upstreamError struct {
	status  int  // 0: no HTTP answer
	network bool // no answer, 502, 503 or 504: Relay retries these
	detail  string
}

func (e *upstreamError) Error() string {
	if e.status == 0 {
		return "upstream network error: " + e.detail
	}
	return fmt.Sprintf("upstream answered %d: %s", e.status, e.detail)
}

// statusError is the upstreamError for a non-2xx status, nil for a 2xx.
// Relay counts 502, 503 and 504 as network errors
// (relay-server/src/services/upstream.rs, is_network_error).
func statusError(status int, body []byte) *upstreamError {
	if status >= 200 && status < 300 {
		return nil
	}
	e := &upstreamError{status: status, detail: string(bytes.TrimSpace(body))}
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		e.network = true
	}
	return e
}

func (r *Relay) upstreamURL(path string) string {
	return r.cfg.Upstream.Scheme + "://" + r.cfg.Upstream.Host + path
}

// query posts a JSON body signed over its bytes and decodes a 2xx answer
// into out.
func (r *Relay) query(ctx context.Context, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.upstreamURL(path), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Sentry-Relay-Id", r.creds.ID)
	req.Header.Set("X-Sentry-Relay-Signature", r.sk.Sign(body, time.Now()))
	resp, err := r.client.Do(req)
	if err != nil {
		return &upstreamError{network: true, detail: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponse))
	if err != nil {
		return &upstreamError{network: true, detail: err.Error()}
	}
	if e := statusError(resp.StatusCode, b); e != nil {
		return e
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &upstreamError{status: resp.StatusCode, detail: "bad JSON answer: " + err.Error()}
	}
	return nil
}

// register does the challenge and the response, retried with Relay's
// backoff until it succeeds or ctx ends.
func (r *Relay) register(ctx context.Context) bool {
	bo := newBackoff(r.cfg.MaxRetryInterval)
	for {
		err := r.registerOnce(ctx)
		if err == nil {
			r.log.Printf("registered with upstream %s as %s", r.cfg.Upstream, r.creds.ID)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		d := bo.next()
		r.log.Printf("registration: %v; retrying in %s", err, d)
		if !sleep(ctx, d) {
			return false
		}
	}
}

func (r *Relay) registerOnce(ctx context.Context) error {
	challenge, _ := json.Marshal(struct {
		RelayID   string `json:"relay_id"`
		PublicKey string `json:"public_key"`
		Version   string `json:"version"`
	}{r.creds.ID, r.creds.PublicKey, Version})
	var ch struct {
		Token string `json:"token"`
	}
	if err := r.query(ctx, "/api/0/relays/register/challenge/", challenge, &ch); err != nil {
		return err
	}
	response, _ := json.Marshal(struct {
		RelayID string `json:"relay_id"`
		Token   string `json:"token"`
		Version string `json:"version"`
	}{r.creds.ID, ch.Token, Version})
	var resp struct {
		RelayID string `json:"relay_id"`
	}
	return r.query(ctx, "/api/0/relays/register/response/", response, &resp)
}

// outgoing is one envelope to post upstream.
type outgoing struct {
	key       string
	projectID int64
	body      []byte // compressed with http.encoding
}

// postEnvelope posts an envelope signed over empty data, as Relay signs
// envelopes (relay-server/src/services/processor.rs, SendEnvelope::sign:
// SignatureType::RequestSign). On a 429 it returns the answer's
// X-Sentry-Rate-Limits and Retry-After.
func (r *Relay) postEnvelope(ctx context.Context, o *outgoing) (limits, retryAfter string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.upstreamURL("/api/"+strconv.FormatInt(o.projectID, 10)+"/envelope/"), bytes.NewReader(o.body))
	if err != nil {
		return "", "", err
	}
	h := req.Header
	h.Set("Content-Type", "application/x-sentry-envelope")
	if r.cfg.Encoding != "identity" {
		h.Set("Content-Encoding", string(r.cfg.Encoding))
	}
	h.Set("X-Sentry-Auth", "Sentry sentry_key="+o.key+", sentry_version=7, sentry_client=standin-relay/"+Version)
	h.Set("X-Sentry-Relay-Id", r.creds.ID)
	h.Set("X-Sentry-Relay-Signature", r.sk.Sign(nil, time.Now()))
	resp, err := r.client.Do(req)
	if err != nil {
		return "", "", &upstreamError{network: true, detail: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", "", &upstreamError{network: true, detail: err.Error()}
	}
	if e := statusError(resp.StatusCode, b); e != nil {
		return resp.Header.Get("X-Sentry-Rate-Limits"), resp.Header.Get("Retry-After"), e
	}
	return "", "", nil
}

// backoff is Relay's RetryBackoff (relay-server/src/utils/retry.rs): 1 s,
// then ×1.5 per attempt, capped at http.max_retry_interval.
type backoff struct{ cur, max time.Duration }

func newBackoff(max time.Duration) *backoff { return &backoff{max: max} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = time.Second
	} else {
		b.cur = min(time.Duration(float64(b.cur)*1.5), b.max)
	}
	return min(b.cur, b.max)
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
