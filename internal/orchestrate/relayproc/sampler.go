package relayproc

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// Sample is one reading of a process's counters.
type Sample struct {
	// At is the time since the sampler started.
	At time.Duration `json:"at_ns"`
	// CPU is utime+stime of all threads so far, in seconds.
	CPU float64 `json:"cpu_s"`
	// RSS is the resident set size in bytes.
	RSS uint64 `json:"rss_bytes"`
}

// Sampler reads a process's CPU time and RSS from procfs, or those of a
// process tree (NewTreeSampler). Run collects a series at a fixed
// interval; Read takes one reading on demand.
type Sampler struct {
	proc     procfs.Proc
	pageSize uint64
	start    time.Time
	tree     *tree // nil: the one process

	mu      sync.Mutex
	samples []Sample
	err     error
}

// NewSampler prepares to sample pid alone.
func NewSampler(pid int) (*Sampler, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil, fmt.Errorf("relayproc: sampling pid %d: %w", pid, err)
	}
	return &Sampler{proc: p, pageSize: uint64(os.Getpagesize()), start: time.Now()}, nil
}

// NewTreeSampler prepares to sample the tree a started process became (see
// Process): the figures of a wrapper script that runs Relay as its child
// are the script's and Relay's together, not the script's alone. A reading
// is the sum over the members (CPU: their own and what they reaped; RSS:
// their resident sets); Read fails once the root has exited.
func NewTreeSampler(pid int) (*Sampler, error) {
	s, err := NewSampler(pid)
	if err != nil {
		return nil, err
	}
	fs, err := procfs.NewFS(procfs.DefaultMountPoint)
	if err != nil {
		return nil, fmt.Errorf("relayproc: %w", err)
	}
	s.tree = &tree{fs: fs, root: pid, last: map[int]treeStat{}}
	return s, nil
}

// PID is the sampled process (the root of a tree).
func (s *Sampler) PID() int { return s.proc.PID }

// PIDs are the sampled processes: the one, or the tree's members when last
// looked (the root first), for tools such as perf that attach to each.
func (s *Sampler) PIDs() []int {
	if s.tree == nil {
		return []int{s.proc.PID}
	}
	return s.tree.pids()
}

// Members is the most processes the tree had at once so far (1 for a lone
// process).
func (s *Sampler) Members() int {
	if s.tree == nil {
		return 1
	}
	return s.tree.maxMembers()
}

// Start is when the sampler was made; Sample.At counts from it.
func (s *Sampler) Start() time.Time { return s.start }

// Read takes one reading now.
func (s *Sampler) Read() (Sample, error) {
	at := time.Since(s.start) // monotonic
	if s.tree != nil {
		cpu, rss, err := s.tree.read()
		if err != nil {
			return Sample{}, err
		}
		return Sample{At: at, CPU: cpu, RSS: rss * s.pageSize}, nil
	}
	st, err := readStat(s.proc)
	if err != nil {
		return Sample{}, fmt.Errorf("relayproc: reading /proc/%d/stat: %w", s.proc.PID, err)
	}
	return Sample{At: at, CPU: st.CPUTime(), RSS: uint64(st.RSS) * s.pageSize}, nil
}

// PeakRSS returns the kernel's high-water mark of the resident set (VmHWM);
// for a tree, the sum of its members' (an upper bound of the tree's peak:
// the members' peaks need not coincide).
func (s *Sampler) PeakRSS() (uint64, error) {
	if s.tree != nil {
		return s.tree.peakRSS()
	}
	st, err := guard(s.proc.NewStatus)
	if err != nil {
		return 0, fmt.Errorf("relayproc: reading /proc/%d/status: %w", s.proc.PID, err)
	}
	return st.VmHWM, nil
}

// ResetPeakRSS resets the kernel's high-water mark (VmHWM) to the current
// RSS, so that PeakRSS covers only what follows (writes 5 to clear_refs);
// for a tree, each member's.
func (s *Sampler) ResetPeakRSS() error {
	for _, pid := range s.PIDs() {
		if err := ResetPeakRSS(pid); err != nil {
			return err
		}
	}
	return nil
}

// Run samples every interval until ctx ends or the process disappears,
// appending to the series returned by Samples. each, if not nil, sees
// every sample as it is taken (on Run's goroutine).
func (s *Sampler) Run(ctx context.Context, interval time.Duration, each func(Sample)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		smp, err := s.Read()
		s.mu.Lock()
		if err != nil {
			s.err = err
			s.mu.Unlock()
			return
		}
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
		if each != nil {
			each(smp)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Samples returns a copy of the series collected so far and the error that
// stopped sampling, if any.
func (s *Sampler) Samples() ([]Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...), s.err
}

// Cores is the mean number of cores used between two readings.
func Cores(a, b Sample) float64 {
	dt := (b.At - a.At).Seconds()
	if dt <= 0 {
		return 0
	}
	return (b.CPU - a.CPU) / dt
}
