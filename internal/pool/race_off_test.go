//go:build !race

package pool

const raceEnabled = false

// checkStride is 1 without -race: every entry is checked.
const checkStride = 1
