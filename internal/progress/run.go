package progress

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/relayload/relayload/internal/orchestrate"
)

// Describe turns where an orchestrate run stands into a Status; section,
// if not empty, names the part of a larger run (relay-report's sections).
//
// A sweep reads "step 3/8 main 500/s · 1m05s, ~3m20s left · measured
// window: blast 498/s, Relay 0.41 cores"; a comparison in slices reads
// "block 2 pair 14 pr vs main 500/s · 4m10s, ≤5m50s left · CPU per
// envelope +1.2% ±3.4%".
func Describe(section string, p orchestrate.Progress) Status {
	var head, detail []string
	if section != "" {
		head = append(head, section)
	}
	if p.Slices {
		head = append(head, fmt.Sprintf("block %d", p.Block))
		if p.Pair > 0 {
			head = append(head, fmt.Sprintf("pair %d", p.Pair))
		}
		head = append(head, p.Build+" vs "+p.Baseline, rate(p.Rate))
		switch {
		case p.Phase == orchestrate.PhaseStarting:
			detail = append(detail, p.Phase)
		case p.ChangePairs >= 2 && !math.IsInf(p.HalfWidth, 0) && !math.IsNaN(p.HalfWidth):
			detail = append(detail, fmt.Sprintf("CPU per envelope %+.1f%% ±%.1f%%", p.Change, p.HalfWidth))
		}
	} else if p.Steps > 0 {
		steps := strconv.Itoa(p.Steps)
		if p.AtMost {
			steps = "≤" + steps
		}
		head = append(head, fmt.Sprintf("step %d/%s", p.Step, steps), p.Build, rate(p.Rate))
		var live []string
		if p.SendingKnown {
			live = append(live, fmt.Sprintf("blast %.0f/s", p.Sending))
		}
		if p.CoresKnown {
			proc := "Relay"
			if p.Harness {
				proc = "harness"
			}
			live = append(live, fmt.Sprintf("%s %.2f cores", proc, p.Cores))
		}
		switch {
		case p.Phase != "" && len(live) > 0:
			detail = append(detail, p.Phase+": "+strings.Join(live, ", "))
		case p.Phase != "":
			detail = append(detail, p.Phase)
		default:
			detail = live
		}
	}
	return Status{Head: strings.Join(head, " "), Elapsed: p.Elapsed, Remaining: p.Remaining, AtMost: p.AtMost && p.Remaining >= 0,
		Detail: strings.Join(detail, ", ")}
}

// rate is a target rate: "500/s", or "max" for orchestrate.RateMax.
func rate(r float64) string {
	if r == orchestrate.RateMax {
		return "max"
	}
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}
