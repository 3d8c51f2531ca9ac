//go:build race

package blast

// raceEnabled: the race detector allocates on its own; allocation tests skip.
const raceEnabled = true
