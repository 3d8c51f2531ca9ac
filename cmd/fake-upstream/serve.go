package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/relayload/relayload/upstream"
)

// serve listens on addr, prints the address as the first stdout line and
// serves srv (through srv.HTTPServer) until SIGINT or SIGTERM; then requests
// in flight get up to grace to finish, and the final stats go to stderr.
func serve(srv *upstream.Server, addr string, grace time.Duration, stdout, stderr io.Writer) error {
	// Signals are caught before the address is announced: whoever reads the
	// first line may stop the server at once and still get a clean exit.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Fprintln(stdout, ln.Addr().String())
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	hs := srv.HTTPServer()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	final, _ := json.Marshal(srv.Stats())
	fmt.Fprintf(stderr, "fake-upstream: shut down; final stats: %s\n", final)
	return nil
}
