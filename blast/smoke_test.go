package blast

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/relayload/relayload/compression"
)

func TestSmoke(t *testing.T) {
	srv := newCountingServer(t)
	p := testPool(t, 100, compression.Identity)
	res, err := Run(context.Background(), Config{Target: srv.URL, Pool: p, Rate: 1000, Count: 1000, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res.WriteSummary(os.Stdout)
	t.Log(srv.n.Load())
}
