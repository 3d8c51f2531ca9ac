package blast

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/relayload/relayload/internal/compression"
)

// TestRunIPv6Target sends to a server on ::1 with each client: every
// request is answered (the fasthttp client once dialled IPv4 only, so each
// one failed as "other" before reaching the server).
func TestRunIPv6Target(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	p := testPool(t, 20, compression.Identity)
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 200, Count: 40, Client: client, Timeout: exact})
			if err != nil {
				t.Fatal(err)
			}
			if res.Sent != 40 || res.OK != 40 {
				t.Fatalf("target %s: sent %d ok %d errors %v %q; want all 40 answered", srv.URL, res.Sent, res.OK, res.Errors, res.ErrorSamples)
			}
		})
	}
}
