//go:build race

package orchestrate

// raceEnabled: the race detector's own memory is in the process's RSS.
const raceEnabled = true
