//go:build race

package pool

// raceEnabled shrinks CPU-heavy, single-goroutine checks under -race,
// where they would only be slower, not more thorough.
const raceEnabled = true

// checkStride is the step of the per-entry content checks over a built
// pool: under -race they read every 4th entry. Build's own concurrency is
// raced in full either way, and CI runs this package again without -race,
// where every entry is read.
const checkStride = 4
