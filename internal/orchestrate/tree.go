package orchestrate

import (
	"fmt"

	"github.com/relayload/relayload/internal/orchestrate/relayproc"
)

// stopTotals sets the step's getrusage figures (peak RSS, CPU totals) from
// how Relay's process ended; members is the most processes Relay's tree
// had at once. getrusage covers the process orchestrate started and the
// children it reaped: for a tree (a wrapper script running Relay, which
// dies on SIGTERM before Relay does) it may leave Relay out, so the
// figures are not reported, and the step says so.
func stopTotals(st *Step, res relayproc.StopResult, members int) {
	if members > 1 || res.Outlived > 0 {
		st.Notes = append(st.Notes, fmt.Sprintf("Relay ran as a tree of %d processes (a wrapper script and what it runs): the sampled CPU and RSS cover the whole tree; "+
			"getrusage's totals at exit cover only the process orchestrate started and what it reaped, so they are not reported", max(members, res.Outlived+1)))
		return
	}
	st.Memory.RusageMaxRSS = res.MaxRSS
	st.CPU.UserSecs, st.CPU.SystemSecs = res.UserTime.Seconds(), res.SystemTime.Seconds()
}

// treeMembers is the most processes Relay's tree had at once while it was
// sampled (1 before sampling began).
func (s *step) treeMembers() int {
	if s.sampler == nil {
		return 1
	}
	return s.sampler.Members()
}
