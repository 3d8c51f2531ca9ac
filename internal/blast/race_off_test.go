//go:build !race

package blast

const raceEnabled = false
