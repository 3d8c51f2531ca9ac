//go:build race

package pool

// raceEnabled shrinks CPU-heavy, single-goroutine checks under -race,
// where they would only be slower, not more thorough.
const raceEnabled = true
