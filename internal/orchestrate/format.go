package orchestrate

import (
	"strconv"
)

// rateName is a rate in file names: "300", "max".
func rateName(r float64) string {
	if r == RateMax {
		return "max"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// rateLabel is a rate in sentences: "300/s", "max".
func rateLabel(r float64) string {
	if r == RateMax {
		return "max rate"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}

// mib formats bytes as MiB (or GiB from 1 GiB on).
func mib(b uint64) string {
	if b >= 1<<30 {
		return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB"
}
