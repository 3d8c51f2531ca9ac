package profile

import (
	"bufio"
	"cmp"
	"io"
	"slices"
	"strconv"
	"strings"
)

// FuncShare is one function's share of a profile.
type FuncShare struct {
	// Name is the frame name.
	Name string
	// Inclusive is the percentage of all samples (by weight) in which the
	// function is on the stack, counted once per sample however often it
	// recurses.
	Inclusive float64
	// Self is the percentage of all samples in which the function is the
	// leaf: where the CPU actually was.
	Self float64
	// InclusiveWeight and SelfWeight are the same as weights.
	InclusiveWeight, SelfWeight int64
}

// order returns the stack indices sorted by thread name, then frame by
// frame from the root by name, a shorter stack before its extensions.
func (p *Profile) order() []int {
	rank := p.nameRanks()
	crank := make([]int, len(p.comms))
	cidx := make([]int, len(p.comms))
	for i := range cidx {
		cidx[i] = i
	}
	slices.SortFunc(cidx, func(a, b int) int { return strings.Compare(p.comms[a], p.comms[b]) })
	for r, i := range cidx {
		crank[i] = r
	}
	idx := make([]int, len(p.stacks))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		sa, sb := &p.stacks[a], &p.stacks[b]
		if c := cmp.Compare(crank[sa.comm], crank[sb.comm]); c != 0 {
			return c
		}
		fa := p.arena[sa.off : sa.off+sa.n]
		fb := p.arena[sb.off : sb.off+sb.n]
		for i := 0; i < len(fa) && i < len(fb); i++ {
			if c := cmp.Compare(rank[fa[i]], rank[fb[i]]); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(fa), len(fb))
	})
	return idx
}

// nameRanks gives each frame id its position among the names sorted.
func (p *Profile) nameRanks() []int32 {
	idx := make([]int32, len(p.frames))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int { return strings.Compare(p.frames[a].Name, p.frames[b].Name) })
	rank := make([]int32, len(p.frames))
	for r, i := range idx {
		rank[i] = int32(r)
	}
	return rank
}

// foldedComm is a thread name as the root frame of a folded stack: spaces
// become underscores, as flamegraph.pl's stackcollapse-perf does.
func foldedComm(c string) string {
	c = strings.ReplaceAll(c, " ", "_")
	return strings.ReplaceAll(c, ";", ":")
}

// WriteFolded writes the profile as folded stacks: one line per distinct
// stack, the thread name (spaces as underscores) as the root frame, then
// the frames from the root to the leaf, joined by ';', then a space and
// the stack's total weight. This is the format inferno-flamegraph,
// flamegraph.pl and speedscope read. Lines are sorted frame by frame, so
// the output is the same for the same input.
func (p *Profile) WriteFolded(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var num []byte
	for _, i := range p.order() {
		s := &p.stacks[i]
		bw.WriteString(foldedComm(p.comms[s.comm]))
		for _, f := range p.arena[s.off : s.off+s.n] {
			bw.WriteByte(';')
			bw.WriteString(p.frames[f].Name)
		}
		bw.WriteByte(' ')
		num = strconv.AppendInt(num[:0], s.weight, 10)
		bw.Write(num)
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Top returns the n functions with the highest inclusive share (all of
// them if n <= 0), ties broken by self share, then name. The [unknown]
// frame (an address perf could not place in any binary, such as the end
// marker of a DWARF stack) is left out; "[relay]" and the like (an
// unsymbolized address in a known binary) are kept.
func (p *Profile) Top(n int) []FuncShare {
	incl := make([]int64, len(p.frames))
	self := make([]int64, len(p.frames))
	stamp := make([]int32, len(p.frames))
	for i := range stamp {
		stamp[i] = -1
	}
	for si := range p.stacks {
		s := &p.stacks[si]
		fs := p.arena[s.off : s.off+s.n]
		for _, f := range fs {
			if stamp[f] != int32(si) {
				stamp[f] = int32(si)
				incl[f] = satAdd(incl[f], s.weight)
			}
		}
		if len(fs) > 0 {
			leaf := fs[len(fs)-1]
			self[leaf] = satAdd(self[leaf], s.weight)
		}
	}
	var out []FuncShare
	for id, f := range p.frames {
		if f.Name == unknownSym || incl[id] == 0 {
			continue
		}
		out = append(out, FuncShare{
			Name:            f.Name,
			Inclusive:       pct(incl[id], p.Weight),
			Self:            pct(self[id], p.Weight),
			InclusiveWeight: incl[id],
			SelfWeight:      self[id],
		})
	}
	slices.SortFunc(out, func(a, b FuncShare) int {
		if c := cmp.Compare(b.InclusiveWeight, a.InclusiveWeight); c != 0 {
			return c
		}
		if c := cmp.Compare(b.SelfWeight, a.SelfWeight); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
