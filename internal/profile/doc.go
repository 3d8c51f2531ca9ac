// Package profile turns the text output of `perf script` for a recorded
// Relay process into numbers and pictures, with no external scripts (no
// FlameGraph, no inferno).
//
// It is for answering "where does Relay spend its CPU?" after a load test:
// orchestrate records Relay with `perf record --call-graph dwarf`, and this
// package reads the recording (Run, or Parse on saved `perf script` text)
// into a Profile, which gives
//
//   - folded stacks (WriteFolded), the format inferno, speedscope and
//     flamegraph.pl read;
//   - the hottest functions with inclusive and self shares (Top);
//   - the share of samples spent in known kinds of work, such as user-agent
//     parsing, PII scrubbing, JSON or compression (Groups, DefaultGroups);
//   - a static SVG flame graph drawn in Go (WriteFlameSVG).
//
// Every share is a percentage of all counted samples, weighted by each
// sample's period (nanoseconds for cpu-clock, cycles for cycles) when perf
// prints one. Samples whose stack is empty or made only of [unknown] frames
// are still counted (they are CPU time) and are reported apart in
// Profile.UnknownSamples: DWARF unwinding loses stacks on a large binary, and
// a report must say how much of the picture is missing.
//
// Memory is bounded by the number of distinct stacks, not the input size:
// frame names are interned, stacks are aggregated as they are read, stacks
// deeper than MaxDepth keep their MaxDepth innermost frames, and lines
// longer than MaxLine are cut.
package profile
