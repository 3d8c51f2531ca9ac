// fakerelay is a test-only program invoked like Relay (`fakerelay -c DIR run`)
// that misbehaves on request, to exercise orchestrate's process handling.
// FAKERELAY_MODE selects the behaviour:
//
//	ready        serve /api/relay/healthcheck/ready/ on relay.port from DIR/config.yml
//	exit         print an error and exit 3 at once
//	crash=DUR    become ready, then exit 4 after DUR
//	ignore-term  become ready and ignore SIGTERM
//	never-ready  answer 503 forever
//	burn         become ready and keep one core busy
//
// On SIGTERM it shuts down for FAKERELAY_TERM_DELAY (default 50ms), then
// says it exited cleanly.
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"
)

func main() {
	if len(os.Args) != 4 || os.Args[1] != "-c" || os.Args[3] != "run" {
		fmt.Fprintln(os.Stderr, "usage: fakerelay -c DIR run")
		os.Exit(2)
	}
	mode := os.Getenv("FAKERELAY_MODE")
	fmt.Fprintln(os.Stderr, "fakerelay starting, mode", mode)
	if mode == "exit" {
		fmt.Fprintln(os.Stderr, "error: config is bad on purpose")
		os.Exit(3)
	}
	b, err := os.ReadFile(filepath.Join(os.Args[2], "config.yml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	var cfg struct {
		Relay struct {
			Host string `yaml:"host"`
			Port int    `yaml:"port"`
		} `yaml:"relay"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	http.HandleFunc("/api/relay/healthcheck/ready/", func(w http.ResponseWriter, r *http.Request) {
		if mode == "never-ready" {
			w.WriteHeader(503)
			fmt.Fprint(w, `{"is_healthy":false}`)
			return
		}
		fmt.Fprint(w, `{"is_healthy":true}`)
	})
	go func() {
		err := http.ListenAndServe(fmt.Sprintf("%s:%d", cfg.Relay.Host, cfg.Relay.Port), nil)
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}()
	if strings.HasPrefix(mode, "crash=") {
		d, _ := time.ParseDuration(strings.TrimPrefix(mode, "crash="))
		time.AfterFunc(d, func() {
			fmt.Fprintln(os.Stderr, "panic: crashing on purpose")
			os.Exit(4)
		})
	}
	if mode == "burn" {
		go func() {
			x := 0
			for {
				x++
			}
		}()
	}
	<-term
	fmt.Fprintln(os.Stderr, "fakerelay shutting down")
	delay := 50 * time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("FAKERELAY_TERM_DELAY")); err == nil {
		delay = d
	}
	time.Sleep(delay)
	fmt.Fprintln(os.Stderr, "fakerelay exited cleanly")
}
