package orchestrate

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/upstream"
)

// upPoint is the fake upstream's forwarded (data) envelopes at one moment.
type upPoint struct {
	at        time.Time
	envelopes int64
}

// window is what starts with the measured window (after blast's warm-up):
// the CPU readings of Relay and of orchestrate itself (the harness, whose
// CPU is CPU Relay could not use), the StatsD reset and perf; and the
// fault at its offset. close ends it and fills the step's window CPU.
type window struct {
	s      *step
	self   *relayproc.Sampler // orchestrate; nil for the harness (it is s.sampler)
	timers []*time.Timer

	mu              sync.Mutex
	relayA, selfA   relayproc.Sample
	relayOK, selfOK bool
	perf            *perfRun
	harnessPerf     *perfRun // orchestrate itself (Config.PerfHarness)
	closed          bool
}

func (s *step) openWindow() *window {
	w := &window{s: s}
	if !s.harness {
		w.self, _ = relayproc.NewSampler(os.Getpid())
	}
	w.timers = append(w.timers, time.AfterFunc(s.cfg.Warmup, w.begin))
	if f := s.cfg.Fault; f != nil {
		w.timers = append(w.timers,
			time.AfterFunc(s.cfg.Warmup+f.Start, func() { s.faults.begin(s.up, f) }),
			time.AfterFunc(s.cfg.Warmup+f.Start+f.Duration, func() { s.faults.end(s.up) }))
	}
	return w
}

// read takes a reading of Relay and of orchestrate.
func (w *window) read() (relay, self relayproc.Sample, relayOK, selfOK bool) {
	relay, err := w.s.sampler.Read()
	relayOK = err == nil
	if w.self != nil {
		self, err = w.self.Read()
		selfOK = err == nil
	}
	return relay, self, relayOK, selfOK
}

func (w *window) begin() {
	s := w.s
	relay, self, relayOK, selfOK := w.read()
	w.mu.Lock()
	w.relayA, w.selfA, w.relayOK, w.selfOK = relay, self, relayOK, selfOK
	w.mu.Unlock()
	if s.r.statsd != nil {
		s.r.statsd.Reset()
	}
	if s.r.perf == nil {
		return
	}
	file := s.r.perfFile(s.st)
	var wg sync.WaitGroup
	if s.cfg.PerfHarness {
		// perf takes a while to attach: both start at once.
		wg.Go(func() {
			w.startPerf(s.r.perf.startHarness, []int{os.Getpid()}, harnessPerfFile(file), &s.st.HarnessPerf, &w.harnessPerf)
		})
	}
	w.startPerf(s.r.perf.start, s.sampler.PIDs(), file, &s.st.Perf, &w.perf)
	wg.Wait()
}

// startPerf records pids into file: the running recording goes to *run, or
// the record of a failed (or too late) start to *rec.
func (w *window) startPerf(start func([]int, string) (*perfRun, error), pids []int, file string, rec **PerfRecord, run **perfRun) {
	p, err := start(pids, file)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		*rec = &PerfRecord{File: file, Note: err.Error()}
	case w.closed: // the step ended while perf started
		*rec = p.stop(500 * time.Millisecond)
	default:
		*run = p
	}
}

// close stops the timers, perf and the fault, and sets the window's CPU;
// it may be called more than once.
func (w *window) close() {
	for _, t := range w.timers {
		t.Stop()
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	relayB, selfB, relayOK, selfOK := w.read()
	w.mu.Lock()
	p, hp := w.perf, w.harnessPerf
	w.perf, w.harnessPerf = nil, nil
	cpu := &w.s.st.CPU
	if w.relayOK && relayOK {
		cpu.LoadCores = relayproc.Cores(w.relayA, relayB)
		cpu.NetCores = cpu.LoadCores - cpu.IdleCores
	}
	if w.selfOK && selfOK {
		cpu.HarnessCores = relayproc.Cores(w.selfA, selfB)
		if cpu.LoadCores > 0 {
			cpu.HarnessShare = 100 * cpu.HarnessCores / cpu.LoadCores
		}
	}
	w.mu.Unlock()
	grace := 3 * time.Second
	if w.s.parent.Err() != nil {
		grace = 500 * time.Millisecond
	}
	if p != nil {
		w.s.st.Perf = p.stop(grace)
	}
	if hp != nil {
		w.s.st.HarnessPerf = hp.stop(grace)
	}
	w.s.faults.end(w.s.up)
}

// watch samples Relay (CPU and RSS) and the upstream's forwarded count at
// the sampling interval from blast's start to the drain's end, and calls
// over once when Relay's RSS passes the limit (0: no limit). With up nil it
// reads no counts.
type watch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	fwd []upPoint
	// recent are the last samples, a second or a little more of them, for
	// the status line's cores now (cores).
	recent []relayproc.Sample
}

func (w *watch) start(smp *relayproc.Sampler, up *upstream.Server, interval time.Duration, limit uint64, over func(rss uint64, after time.Duration)) {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	start := time.Now()
	tripped := false
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		smp.Run(ctx, interval, func(s relayproc.Sample) {
			w.mu.Lock()
			if up != nil {
				w.fwd = append(w.fwd, upPoint{time.Now(), up.DataEnvelopes()})
			}
			w.recent = append(w.recent, s)
			// Keep one sample at least a second before the newest.
			for len(w.recent) > 2 && s.At-w.recent[1].At >= time.Second {
				w.recent = w.recent[1:]
			}
			w.mu.Unlock()
			if limit > 0 && s.RSS > limit && !tripped {
				tripped = true
				over(s.RSS, time.Since(start))
			}
		})
	}()
}

// stop ends sampling; it may be called more than once.
func (w *watch) stop() {
	if w.cancel != nil {
		w.cancel()
		w.wg.Wait()
	}
}

// cores is the CPU over the last second or so of samples (ok false with
// fewer than two).
func (w *watch) cores() (cores float64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.recent) < 2 {
		return 0, false
	}
	return relayproc.Cores(w.recent[0], w.recent[len(w.recent)-1]), true
}

// forwarded is the forwarded-envelopes series taken so far.
func (w *watch) forwarded() []upPoint {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]upPoint(nil), w.fwd...)
}

// series turns samples into chart points: seconds since blast started,
// RSS in MiB, and cores over each sampling interval. It also returns the
// highest 1 s average of cores.
func series(smp []relayproc.Sample, offset time.Duration) ([]SeriesPoint, float64) {
	out := make([]SeriesPoint, 0, len(smp))
	peak := 0.0
	j := 0
	for i, s := range smp {
		p := SeriesPoint{T: (s.At - offset).Seconds(), RSSMB: float64(s.RSS) / (1 << 20)}
		if i > 0 {
			p.Cores = relayproc.Cores(smp[i-1], s)
		}
		for j < i && s.At-smp[j].At > time.Second {
			j++
		}
		if s.At-smp[j].At >= 900*time.Millisecond {
			peak = max(peak, relayproc.Cores(smp[j], s))
		}
		out = append(out, p)
	}
	return out, peak
}
