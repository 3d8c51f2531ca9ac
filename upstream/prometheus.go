package upstream

import "github.com/relayload/relayload/internal/promtext"

// AppendPrometheus appends st in the Prometheus text exposition format
// (version 0.0.4), one series per number of the /stats JSON (the prom tags
// of its fields name them). Metric names start with relayload_upstream_.
func (st *Stats) AppendPrometheus(b []byte) []byte { return promtext.Append(b, promPrefix, st) }

const promPrefix = "relayload_upstream_"
