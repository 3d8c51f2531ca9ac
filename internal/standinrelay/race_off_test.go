//go:build !race

package standinrelay

// raceEnabled: the race detector slows the in-process stand-in several
// times over; load tests lower their rates.
const raceEnabled = false
