package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/relayload/relayload/internal/cli"
	"github.com/relayload/relayload/internal/cli/upstreamflag"
	"github.com/relayload/relayload/upstream"
)

// serve starts the fake upstream on cfg.Addr, prints the address as the
// first stdout line and serves until SIGINT or SIGTERM; then requests in
// flight get up to grace to finish, the final stats go to stderr, and a
// capture (cfg.Capture) is closed and summed up in one line. A
// timed fault (--fault) begins at its start after listening and ends after
// its duration, on top of the faults in effect.
func serve(cfg upstream.Config, grace time.Duration, timed *upstreamflag.FaultSpec, stdout, stderr io.Writer) error {
	// Signals are caught before the address is announced: whoever reads the
	// first line may stop the server at once and still get a clean exit.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := upstream.Start(cfg)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	addr := strings.TrimPrefix(srv.URL, "http://")
	fmt.Fprintln(stdout, addr)
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	if w := upstreamflag.ListenWarning(addr, cfg.ControlFrom); w != "" {
		fmt.Fprintln(stderr, "fake-upstream: warning: "+w)
	}
	if timed != nil {
		defer scheduleFault(srv, timed, stderr)()
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = srv.Shutdown(sctx)
	final, _ := json.Marshal(srv.Stats())
	fmt.Fprintf(stderr, "fake-upstream: shut down; final stats: %s\n", final)
	if w := cfg.Capture; w != nil {
		if err := w.Close(); err != nil {
			fmt.Fprintf(stderr, "fake-upstream: %v\n", err)
		}
		fmt.Fprintln(stderr, "fake-upstream: "+w.Summary())
	}
	return nil
}

// scheduleFault adds f's faults at f's start (0 when not given) as a layer
// of their own, and takes that layer away after its duration: the faults
// set otherwise (--faults and the fault flags, POST /control) stay as they
// are, and an outage among them keeps its own end. stop cancels what has
// not happened yet.
func scheduleFault(srv *upstream.Server, f *upstreamflag.FaultSpec, stderr io.Writer) (stop func()) {
	start := max(f.Start, 0)
	var mu sync.Mutex
	var remove func()
	begin := time.AfterFunc(start, func() {
		mu.Lock()
		defer mu.Unlock()
		var err error
		if remove, err = srv.AddFaults("fault "+f.Spec, f.Faults()); err != nil {
			fmt.Fprintf(stderr, "fake-upstream: --fault %s: %v\n", f.Spec, err)
			return
		}
		fmt.Fprintf(stderr, "fake-upstream: fault %s begins (%s)\n", f.Spec, f.Duration)
	})
	end := time.AfterFunc(start+f.Duration, func() {
		mu.Lock()
		defer mu.Unlock()
		if remove == nil {
			return
		}
		remove()
		fmt.Fprintf(stderr, "fake-upstream: fault %s ends\n", f.Spec)
	})
	return func() { begin.Stop(); end.Stop() }
}
