package compare

// DefaultPrior is the spread between two processes of one binary in CPU per
// envelope recorded on shared 2-vCPU VMs (Relay 26.4.0, the default mix at
// 300/s), with the degrees of freedom its estimate is worth: what the
// recorded A/A pairs of processes kept for the choice give
// (TestDefaultPrior; testdata/priors.json records it per kind of machine).
// A run's own blocks weigh against it by theirs (Estimate).
func DefaultPrior() Prior {
	return Prior{Spread: 0.0125, DF: 1.1, Source: "recorded on shared 2-vCPU VMs, Relay 26.4.0 at 300/s"}
}
