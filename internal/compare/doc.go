// Package compare says whether one build of Relay costs more or less than
// another, from measurements taken in pairs on processes started afresh in
// blocks, and holds a CI gate to what it measured. The method:
//
//   - Pairs. A pair measures the two builds back to back, in alternating
//     order; its log ratio log(build/baseline) cancels what the machine did
//     to both.
//   - Blocks. Two processes of one binary differ for their whole life, so
//     the pairs of one block (one process per build) share an offset that
//     more pairs in that block cannot shrink; each block is a fresh draw.
//   - Interval. The change is the mean log ratio. Its variance is the
//     within-block noise over the pairs plus the spread between blocks'
//     processes shared out over the blocks by their pairs (Σ share²). That
//     spread is the run's own estimate from its blocks (k − 1 degrees of
//     freedom), shrunk toward a recorded Prior that carries degrees of
//     freedom of its own, and Student's t takes the degrees of freedom the
//     variance rests on (Satterthwaite). Estimate computes it.
//   - Verdicts. CPU per envelope is the primary metric, judged at 5%; the
//     others are judged, Holm-corrected at 5% together, only when the
//     primary changed, and are otherwise descriptive (Judge), so an A/A
//     run calls at most 5% of runs changed on any metric.
//   - Gate. A threshold is crossed only when a change's whole interval is
//     beyond it, passed only when it is within it; anything not measured
//     (too few pairs, no data, an unknown spread) is never a pass (Check).
package compare
