package upstream

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// apiError is Relay's error body (relay-server ApiErrorResponse): Relay reads
// "detail" and "causes" for logging and honours "relay":"stop" on a 403.
type apiError struct {
	Detail string   `json:"detail"`
	Causes []string `json:"causes"`
	Relay  string   `json:"relay,omitempty"`
}

// httpError is an error answer: status, counted reason, and body.
type httpError struct {
	status int
	reason string // key in Stats.Errors
	body   apiError
}

func newError(status int, reason, detail string, causes ...string) *httpError {
	if causes == nil {
		causes = []string{}
	}
	return &httpError{status: status, reason: reason, body: apiError{Detail: detail, Causes: causes}}
}

func (e *httpError) Error() string { return e.reason + ": " + e.body.Detail }

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"detail":"internal error encoding the response","causes":[]}`)
	}
	writeRawJSON(w, status, b)
}

func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = contentLength(len(b))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

var jsonContentType = []string{"application/json"}

// smallLengths are shared Content-Length values, so that small answers
// allocate no header slice.
var smallLengths = func() (t [256][]string) {
	for i := range t {
		t[i] = []string{strconv.Itoa(i)}
	}
	return t
}()

func contentLength(n int) []string {
	if n < len(smallLengths) {
		return smallLengths[n]
	}
	return []string{strconv.Itoa(n)}
}

// writeError answers with e and counts it in c. An error of status 0 (the
// client is gone) is counted only: there is nobody to answer.
func (s *Server) writeError(w http.ResponseWriter, c *counters, e *httpError) {
	c.errors.add(e.reason)
	if e.status == 0 {
		return
	}
	writeJSON(w, e.status, e.body)
}
