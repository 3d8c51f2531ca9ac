package relayproc

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// userHZ is the clock tick of the times in /proc/PID/stat (procfs assumes
// the same).
const userHZ = 100

// A process tree is what a started command became: Relay itself, or a
// wrapper script (`cargo run`, a shell setting the environment) and the
// Relay it runs as a child. Its members are the processes in the root's
// process group (Start makes the root a group leader, and the group keeps
// a child whose parent died) and the root's descendants by parent pid (a
// child that left the group, e.g. with setsid).

// treeStat is one member's reading.
type treeStat struct {
	pid, ppid, pgrp int
	zombie          bool
	// cpu is user+system time of the process and of the children it has
	// reaped, in clock ticks.
	cpu uint64
	rss uint64 // pages
}

func newTreeStat(st procfs.ProcStat) treeStat {
	cpu := uint64(st.UTime) + uint64(st.STime) + uint64(max(st.CUTime, 0)) + uint64(max(st.CSTime, 0))
	return treeStat{pid: st.PID, ppid: st.PPID, pgrp: st.PGRP, zombie: st.State == "Z" || st.State == "X",
		cpu: cpu, rss: uint64(max(st.RSS, 0))}
}

// scanTree reads every process and returns the members of root's tree,
// root itself first when it still exists: the processes in root's process
// group, and their descendants and root's. A process that exits while it
// is read is left out.
func scanTree(fs procfs.FS, root int) ([]treeStat, error) {
	procs, err := fs.AllProcs()
	if err != nil {
		return nil, err
	}
	all := make(map[int]treeStat, len(procs))
	for _, p := range procs {
		st, err := readStat(p)
		if err != nil {
			continue
		}
		all[p.PID] = newTreeStat(st)
	}
	var out []treeStat
	if r, ok := all[root]; ok {
		out = append(out, r)
	}
	for pid, st := range all {
		if pid != root && inTree(all, st, root) {
			out = append(out, st)
		}
	}
	return out, nil
}

// inTree is whether st or one of its ancestors is root or in root's
// process group.
func inTree(all map[int]treeStat, st treeStat, root int) bool {
	// The depth bound guards against a cycle read across pid reuse.
	for range 64 {
		if st.pid == root || st.pgrp == root {
			return true
		}
		if st.ppid <= 1 {
			return false
		}
		parent, ok := all[st.ppid]
		if !ok {
			return st.ppid == root
		}
		st = parent
	}
	return false
}

// liveMembers are the members of root's tree that have not exited
// (zombies, which hold neither CPU nor memory, left out).
func liveMembers(fs procfs.FS, root int) []treeStat {
	members, err := scanTree(fs, root)
	if err != nil {
		return nil
	}
	var out []treeStat
	for _, m := range members {
		if !m.zombie {
			out = append(out, m)
		}
	}
	return out
}

// treeRescan is how often a tree's sampler looks through every process
// for new members (BenchmarkScanTree: the cost grows with the processes on
// the machine); between looks it reads the members it knows
// (BenchmarkTreeSamplerRead). A child that starts and ends between two
// looks is still counted, in its parent's reaped-children times; one that
// starts and keeps running is counted from the next look.
const treeRescan = 2 * time.Second

// tree is the state of a tree's sampler.
type tree struct {
	fs   procfs.FS
	root int

	mu      sync.Mutex
	scanned time.Time
	last    map[int]treeStat // the members at the last reading
	// departed is the CPU ticks of members that were reaped by a process
	// outside the tree (an orphan's new parent): no member's
	// reaped-children times hold them.
	departed uint64
	most     int
}

// read sums the members' CPU (seconds) and resident pages.
func (t *tree) read() (cpu float64, rss uint64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var members []treeStat
	if time.Since(t.scanned) >= treeRescan || len(t.last) == 0 {
		if members, err = scanTree(t.fs, t.root); err != nil {
			return 0, 0, fmt.Errorf("relayproc: reading the process tree of %d: %w", t.root, err)
		}
		t.scanned = time.Now()
	} else {
		for pid := range t.last {
			p, err := t.fs.Proc(pid)
			if err != nil {
				continue
			}
			if st, err := readStat(p); err == nil {
				members = append(members, newTreeStat(st))
			}
		}
	}
	if !slices.ContainsFunc(members, func(m treeStat) bool { return m.pid == t.root }) {
		return 0, 0, fmt.Errorf("relayproc: reading /proc/%d/stat: %w", t.root, os.ErrNotExist)
	}
	now := make(map[int]treeStat, len(members))
	for _, m := range members {
		now[m.pid] = m
	}
	for pid, old := range t.last {
		if _, ok := now[pid]; !ok {
			if _, ok := now[old.ppid]; !ok {
				t.departed += old.cpu
			}
		}
	}
	t.last = now
	ticks, live := t.departed, 0
	for _, m := range members {
		ticks += m.cpu
		if !m.zombie {
			rss += m.rss
			live++
		}
	}
	t.most = max(t.most, live)
	return float64(ticks) / userHZ, rss, nil
}

// pids are the live members at the last reading, the root first.
func (t *tree) pids() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []int{}
	if len(t.last) == 0 {
		for _, m := range liveMembers(t.fs, t.root) {
			out = append(out, m.pid)
		}
		return out
	}
	for pid, m := range t.last {
		if !m.zombie && pid != t.root {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	if m, ok := t.last[t.root]; ok && !m.zombie {
		out = append([]int{t.root}, out...)
	}
	return out
}

// maxMembers is the most live members seen at once.
func (t *tree) maxMembers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(t.most, 1)
}

// peakRSS sums the members' VmHWM.
func (t *tree) peakRSS() (uint64, error) {
	var sum uint64
	for _, pid := range t.pids() {
		p, err := t.fs.Proc(pid)
		if err != nil {
			continue
		}
		st, err := guard(p.NewStatus)
		if err != nil {
			if pid == t.root {
				return 0, fmt.Errorf("relayproc: reading /proc/%d/status: %w", pid, err)
			}
			continue
		}
		sum += st.VmHWM
	}
	return sum, nil
}
