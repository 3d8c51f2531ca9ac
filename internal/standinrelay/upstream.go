package standinrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/relayload/relayload/compression"
	"github.com/relayload/relayload/relayauth"
)

// maxAPIResponse bounds JSON responses read from the upstream
// (limits.max_api_payload_size, 20 MiB).
const maxAPIResponse = 20 << 20

// upstreamError is a failed upstream call, classified the way Relay reacts
// to it (docs/faults.md).
type upstreamError struct {
	Status  int    // 0 for network errors
	Network bool   // connect error, timeout, 502, 503, 504: retry
	Stop    bool   // 403 with {"relay":"stop"}: permanent auth denial
	Detail  string // error text
}

func (e *upstreamError) Error() string {
	if e.Status == 0 {
		return "upstream network error: " + e.Detail
	}
	return fmt.Sprintf("upstream answered %d: %s", e.Status, e.Detail)
}

// errAuthDenied is returned for every upstream call after a relay stop.
var errAuthDenied = errors.New("upstream denied authentication (relay stop)")

// upstreamClient makes Relay's upstream requests: signed JSON queries and
// signed, compressed envelope posts.
type upstreamClient struct {
	base    *url.URL
	client  *http.Client
	relayID string
	sk      relayauth.SecretKey
	enc     *compression.Encoder
	encode  compression.Encoding
	ua      string
}

func newUpstreamClient(cfg Config, creds relayauth.Credentials) (*upstreamClient, error) {
	sk, _, err := creds.Keys()
	if err != nil {
		return nil, fmt.Errorf("standinrelay: credentials: %w", err)
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: cfg.HTTPTimeout,
		MaxIdleConns:          cfg.MaxConcurrentRequests + cfg.MaxConcurrentQueries + 4,
		MaxIdleConnsPerHost:   cfg.MaxConcurrentRequests + cfg.MaxConcurrentQueries + 4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &upstreamClient{
		base:    cfg.Upstream,
		client:  &http.Client{Transport: tr},
		relayID: creds.ID,
		sk:      sk,
		enc:     compression.NewEncoder(),
		encode:  cfg.Encoding,
		ua:      "standin-relay/" + Version,
	}, nil
}

func (u *upstreamClient) url(path string) string {
	return u.base.Scheme + "://" + u.base.Host + path
}

// query posts a signed JSON body and decodes a 2xx JSON answer into out.
func (u *upstreamClient) query(ctx context.Context, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url(path), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("standinrelay: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", u.ua)
	req.Header.Set("X-Sentry-Relay-Id", u.relayID)
	req.Header.Set("X-Sentry-Relay-Signature", u.sk.Sign(body, time.Now()))
	resp, err := u.client.Do(req)
	if err != nil {
		return &upstreamError{Network: true, Detail: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponse+1))
	if err != nil {
		return &upstreamError{Network: true, Detail: "reading response: " + err.Error()}
	}
	if uerr := classify(resp.StatusCode, b); uerr != nil {
		return uerr
	}
	if len(b) > maxAPIResponse {
		return &upstreamError{Status: resp.StatusCode, Detail: "response larger than 20 MiB"}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return &upstreamError{Status: resp.StatusCode, Detail: "bad JSON response: " + err.Error()}
		}
	}
	return nil
}

// classify turns a non-2xx status into an upstreamError.
func classify(status int, body []byte) *upstreamError {
	if status >= 200 && status < 300 {
		return nil
	}
	e := &upstreamError{Status: status, Detail: http.StatusText(status)}
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		e.Network = true
	}
	var apiErr struct {
		Detail string `json:"detail"`
		Relay  string `json:"relay"`
	}
	if json.Unmarshal(body, &apiErr) == nil {
		if apiErr.Detail != "" {
			e.Detail = apiErr.Detail
		}
		e.Stop = status == http.StatusForbidden && apiErr.Relay == "stop"
	}
	return e
}

// envelopeRequest is one envelope to post upstream.
type envelopeRequest struct {
	projectID    int64
	publicKey    string
	client       string // sentry_client of the SDK ("" = Relay-made)
	version      string // sentry_version
	userAgent    string
	forwardedFor string
	origin       string
	body         []byte // uncompressed envelope
}

// envelopeResult is what the upstream said about one envelope post.
type envelopeResult struct {
	status     int
	rateLimits string // X-Sentry-Rate-Limits
	retryAfter string // Retry-After
}

// sendEnvelope compresses and posts an envelope, signed over empty data.
func (u *upstreamClient) sendEnvelope(ctx context.Context, er *envelopeRequest, compressed []byte) (envelopeResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.url("/api/"+strconv.FormatInt(er.projectID, 10)+"/envelope/"), bytes.NewReader(compressed))
	if err != nil {
		return envelopeResult{}, fmt.Errorf("standinrelay: %w", err)
	}
	req.ContentLength = int64(len(compressed))
	h := req.Header
	h.Set("Content-Type", "application/x-sentry-envelope")
	if u.encode != compression.Identity {
		h.Set("Content-Encoding", string(u.encode))
	}
	version := er.version
	if version == "" {
		version = "7"
	}
	auth := "Sentry sentry_key=" + er.publicKey + ", sentry_version=" + version
	if er.client != "" {
		auth += ", sentry_client=" + er.client
	} else {
		auth += ", sentry_client=" + u.ua
	}
	h.Set("X-Sentry-Auth", auth)
	h.Set("X-Sentry-Relay-Id", u.relayID)
	h.Set("X-Sentry-Relay-Signature", u.sk.Sign(nil, time.Now()))
	h.Set("X-Forwarded-For", er.forwardedFor)
	if er.origin != "" {
		h.Set("Origin", er.origin)
	}
	if er.userAgent != "" {
		h.Set("User-Agent", er.userAgent)
	} else {
		h.Set("User-Agent", u.ua)
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return envelopeResult{}, &upstreamError{Network: true, Detail: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return envelopeResult{status: resp.StatusCode}, &upstreamError{Network: true, Detail: "reading response: " + err.Error()}
	}
	res := envelopeResult{status: resp.StatusCode, rateLimits: resp.Header.Get("X-Sentry-Rate-Limits"), retryAfter: resp.Header.Get("Retry-After")}
	if uerr := classify(resp.StatusCode, b); uerr != nil {
		return res, uerr
	}
	return res, nil
}
