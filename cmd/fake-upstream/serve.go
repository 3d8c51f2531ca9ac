package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/upstream"
)

// serve listens on addr, prints the address as the first stdout line and
// serves srv (with the HTTP server named kind) until SIGINT or SIGTERM; then requests
// in flight get up to grace to finish, and the final stats go to stderr. A
// timed fault (--fault) begins at its start after listening and ends after
// its duration, on top of the faults in effect.
func serve(srv *upstream.Server, kind, addr string, grace time.Duration, timed *upstream.FaultSpec, stdout, stderr io.Writer) error {
	// Signals are caught before the address is announced: whoever reads the
	// first line may stop the server at once and still get a clean exit.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &cli.UsageError{Err: fmt.Errorf("--listen %q: %w", addr, err)}
	}
	fmt.Fprintln(stdout, ln.Addr().String())
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	if w := srv.ListenWarning(ln.Addr().String()); w != "" {
		fmt.Fprintln(stderr, "fake-upstream: warning: "+w)
	}
	if timed != nil {
		defer scheduleFault(srv, timed, stderr)()
	}
	errc := make(chan error, 1)
	hs, err := srv.ServeWith(kind, ln, errc)
	if err != nil {
		ln.Close()
		return &cli.UsageError{Err: err}
	}
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

// scheduleFault adds f's faults to those in effect at f's start (0 when
// not given) and takes them away after its duration. stop cancels what has
// not happened yet.
func scheduleFault(srv *upstream.Server, f *upstream.FaultSpec, stderr io.Writer) (stop func()) {
	start := max(f.Start, 0)
	var mu sync.Mutex
	var base upstream.Faults
	begin := time.AfterFunc(start, func() {
		mu.Lock()
		defer mu.Unlock()
		base = srv.Faults()
		if err := srv.SetFaults(base.With(f.Faults())); err != nil {
			fmt.Fprintf(stderr, "fake-upstream: --fault %s: %v\n", f.Spec, err)
			return
		}
		fmt.Fprintf(stderr, "fake-upstream: fault %s begins (%s)\n", f.Spec, f.Duration)
	})
	end := time.AfterFunc(start+f.Duration, func() {
		mu.Lock()
		defer mu.Unlock()
		_ = srv.SetFaults(base)
		fmt.Fprintf(stderr, "fake-upstream: fault %s ends\n", f.Spec)
	})
	return func() { begin.Stop(); end.Stop() }
}
