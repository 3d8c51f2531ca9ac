package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/relayload/relayload/envelope"
	"github.com/relayload/relayload/internal/canary"
	"github.com/relayload/relayload/internal/compression"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/projects"
)

// dumpPool builds a pool and writes it with pool.Dump; prints
// {"dir","entries","hash","projects":[...]} on stdout.
func dumpPool(args []string, stdout io.Writer) error {
	fs := newFlags("dump-pool")
	dir := fs.String("dir", "", "output directory (required)")
	seed := fs.Uint64("seed", 1, "pool and project seed")
	size := fs.Int("size", 300, "entries")
	nproj := fs.Int("projects", 10, "projects")
	mix := fs.String("mix", pool.DefaultMix, "kind weights")
	enc := fs.String("encoding", "identity", "content encoding")
	now := fs.String("now", "", "RFC 3339 anchor for timestamps (default: now)")
	unique := fs.Bool("unique-user-agents", false, "every entry gets its own agent")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	m, err := pool.ParseMix(*mix)
	if err != nil {
		return err
	}
	e, err := compression.ParseEncoding(*enc)
	if err != nil {
		return err
	}
	ps, err := projects.Generate(*seed, *nproj)
	if err != nil {
		return err
	}
	o := pool.Options{Seed: *seed, Size: *size, Mix: m, Projects: ps, Encoding: e, UniqueUserAgents: *unique}
	if *now != "" {
		t, err := time.Parse(time.RFC3339Nano, *now)
		if err != nil {
			return fmt.Errorf("--now: %w", err)
		}
		o.Now = t
	}
	p, err := pool.Build(context.Background(), o)
	if err != nil {
		return err
	}
	if err := p.Dump(*dir); err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]any{
		"dir": *dir, "entries": len(p.Entries), "hash": p.Hash(), "projects": ps, "canaries": canary.Kinds(),
	})
}

type parsedItem struct {
	Type        string          `json:"type"`
	ContentType string          `json:"content_type"`
	ItemCount   int             `json:"item_count"`
	Header      json.RawMessage `json:"header"`
	Payload     string          `json:"payload"` // base64
}

type parsedEnvelope struct {
	Header json.RawMessage `json:"header"`
	Items  []parsedItem    `json:"items"`
	// Scan is what envelope.Scan (the counting path) reports per item.
	Scan []string `json:"scan_types"`
}

// parseEnvelope parses each file argument with envelope.Parse and Scan and
// prints one JSON object {file: parsed} on stdout. A file that does not
// parse is rejected (exit 1, "malformed: file: detail").
func parseEnvelope(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: parse-envelope FILE...")
	}
	out := make(map[string]parsedEnvelope, len(args))
	var s envelope.Summary
	for _, f := range args {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		env, err := envelope.Parse(b)
		if err != nil {
			fmt.Fprintf(stdout, "malformed: %s: %v\n", f, err)
			return rejectedError{err}
		}
		if err := envelope.Scan(b, &s); err != nil {
			fmt.Fprintf(stdout, "malformed: %s: scan: %v\n", f, err)
			return rejectedError{err}
		}
		pe := parsedEnvelope{Header: json.RawMessage(env.Header)}
		for _, it := range env.Items {
			pe.Items = append(pe.Items, parsedItem{
				Type: it.Type, ContentType: it.ContentType, ItemCount: it.ItemCount,
				Header: json.RawMessage(it.Header), Payload: base64.StdEncoding.EncodeToString(it.Payload),
			})
		}
		for _, it := range s.Items {
			pe.Scan = append(pe.Scan, string(it.Type))
		}
		out[f] = pe
	}
	return json.NewEncoder(stdout).Encode(out)
}
