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

// Sampler reads a process's CPU time and RSS from procfs. Run collects a
// series at a fixed interval; Read takes one reading on demand.
type Sampler struct {
	proc     procfs.Proc
	pageSize uint64
	start    time.Time

	mu      sync.Mutex
	samples []Sample
	err     error
}

// NewSampler prepares to sample pid.
func NewSampler(pid int) (*Sampler, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return nil, fmt.Errorf("relayproc: sampling pid %d: %w", pid, err)
	}
	return &Sampler{proc: p, pageSize: uint64(os.Getpagesize()), start: time.Now()}, nil
}

// PID is the sampled process.
func (s *Sampler) PID() int { return s.proc.PID }

// Start is when the sampler was made; Sample.At counts from it.
func (s *Sampler) Start() time.Time { return s.start }

// Read takes one reading now.
func (s *Sampler) Read() (Sample, error) {
	at := time.Since(s.start) // monotonic
	st, err := readStat(s.proc)
	if err != nil {
		return Sample{}, fmt.Errorf("relayproc: reading /proc/%d/stat: %w", s.proc.PID, err)
	}
	return Sample{At: at, CPU: st.CPUTime(), RSS: uint64(st.RSS) * s.pageSize}, nil
}

// PeakRSS returns the kernel's high-water mark of the resident set (VmHWM).
func (s *Sampler) PeakRSS() (uint64, error) {
	st, err := guard(s.proc.NewStatus)
	if err != nil {
		return 0, fmt.Errorf("relayproc: reading /proc/%d/status: %w", s.proc.PID, err)
	}
	return st.VmHWM, nil
}

// ResetPeakRSS resets the kernel's high-water mark (VmHWM) to the current
// RSS, so that PeakRSS covers only what follows (writes 5 to clear_refs).
func (s *Sampler) ResetPeakRSS() error { return ResetPeakRSS(s.proc.PID) }

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
