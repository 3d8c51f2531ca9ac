package orchestrate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/internal/profile"
)

// perfPlan is how perf will record: the event and call-graph mode that
// work on this machine, decided once by probing.
type perfPlan struct {
	bin       string
	event     string
	callGraph string
	freq      int
	notes     []string
}

// FoldHint says how to turn a perf recording into a flame graph.
const FoldHint = "perf script -i FILE | inferno-collapse-perf | inferno-flamegraph > flame.svg   (or stackcollapse-perf.pl | flamegraph.pl from brendangregg/FlameGraph)"

// preparePerf checks that perf exists and finds an event and call-graph
// mode it accepts: hardware cycles if the machine has a PMU, else
// cpu-clock; the asked mode, else dwarf when LBR is missing.
func preparePerf(ctx context.Context, mode string) (*perfPlan, error) {
	bin, err := exec.LookPath("perf")
	if err != nil {
		return nil, configerr.New("Perf", "needs the perf tool, which is not installed (Debian: apt-get install linux-perf; Ubuntu: linux-tools-$(uname -r))")
	}
	dir, err := os.MkdirTemp("", "relayload-perfprobe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	probe := func(event, cg string) (string, error) {
		out := filepath.Join(dir, "probe.data")
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(pctx, bin, "record", "-q", "-o", out, "-e", event, "--call-graph", cg, "--", "true")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%v: %s", err, firstLine(stderr.String()))
		}
		// perf silently replaces cycles with cpu-clock when there is no PMU.
		ev, err := exec.CommandContext(pctx, bin, "evlist", "-i", out).Output()
		if err != nil {
			return event, nil
		}
		return strings.TrimSpace(firstLine(string(ev))), nil
	}
	p := &perfPlan{bin: bin, callGraph: mode}
	got, err := probe("cycles", mode)
	if err != nil && mode == "lbr" {
		p.notes = append(p.notes, fmt.Sprintf("perf: --call-graph lbr is not available here (%v); using dwarf stacks instead", err))
		p.callGraph = "dwarf"
		got, err = probe("cycles", p.callGraph)
	}
	if err != nil {
		got, err = probe("cpu-clock", p.callGraph)
		if err != nil {
			return nil, fmt.Errorf("perf cannot record here (kernel.perf_event_paranoid is %s): %v", paranoid(), err)
		}
	}
	p.event = got
	if got != "cycles" && !strings.HasPrefix(got, "cycles") {
		p.notes = append(p.notes, fmt.Sprintf("perf: no hardware cycle counter on this machine; recording the software event %s instead", got))
	}
	p.freq = 499
	if p.callGraph == "dwarf" {
		p.freq = 199 // DWARF stacks copy 8 KiB per sample
	}
	return p, nil
}

func paranoid() string {
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "[") && l != "Error:" {
			return l
		}
	}
	return s
}

// perfRun is a running `perf record -p PID,…`.
type perfRun struct {
	cmd  *exec.Cmd
	rec  PerfRecord
	done chan struct{}
}

// start records pids (Relay's process tree) into file at the plan's
// sampling frequency and call-graph mode (chosen for Relay).
func (p *perfPlan) start(pids []int, file string) (*perfRun, error) {
	return p.record(pids, file, p.callGraph, "-F", strconv.Itoa(p.freq))
}

// startHarness records orchestrate itself: with frame pointers (Go keeps
// them; perf's DWARF unwinding left Go stacks at their leaf frame) and a
// fixed period of about 1 ms of CPU per sample. In frequency mode perf's
// per-thread period adapts badly to the harness's many lightly used
// threads: recordings of windows with the same CPU held severalfold
// different numbers of samples.
func (p *perfPlan) startHarness(pids []int, file string) (*perfRun, error) {
	period := "3000000" // cycles: about 1 ms at 3 GHz
	if p.event == "cpu-clock" {
		period = "1000000" // ns
	}
	return p.record(pids, file, "fp", "-c", period)
}

// record runs perf record -p pids with the rate arguments given.
func (p *perfPlan) record(pids []int, file, callGraph string, rate ...string) (*perfRun, error) {
	logf, err := os.Create(file + ".log")
	if err != nil {
		return nil, err
	}
	args := append([]string{"record", "-q", "-o", file, "-e", p.event}, rate...)
	list := make([]string, len(pids))
	for i, pid := range pids {
		list[i] = strconv.Itoa(pid)
	}
	args = append(args, "--call-graph", callGraph, "-p", strings.Join(list, ","))
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("perf: %w", err)
	}
	r := &perfRun{cmd: cmd, done: make(chan struct{}),
		rec: PerfRecord{File: file, Event: p.event, CallGraph: callGraph}}
	go func() { _ = cmd.Wait(); logf.Close(); close(r.done) }()
	return r, nil
}

// stop ends the recording with SIGINT (perf then writes its data), and
// SIGKILL after grace.
func (r *perfRun) stop(grace time.Duration) *PerfRecord {
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
		r.rec.Note = "perf did not stop on SIGINT within " + grace.String() + "; killed"
	}
	st := r.cmd.ProcessState
	switch {
	case st == nil:
		r.rec.Exit = "unknown"
	case st.ExitCode() == 0 || st.ExitCode() == 130 || st.ExitCode() == -1 && st.String() == "signal: interrupt":
		r.rec.Exit = "ok"
	default:
		r.rec.Exit = st.String()
		if r.rec.Note == "" {
			b, _ := os.ReadFile(r.rec.File + ".log")
			r.rec.Note = firstLine(string(b))
		}
	}
	return &r.rec
}

// perfScriptTimeout bounds reading one recording back with perf script.
const perfScriptTimeout = 3 * time.Minute

// topFunctions is how many functions a profile lists.
const topFunctions = 25

// analyze reads rec back with `perf script` and fills rec.Profile: the top
// functions, the shares of groups, and the folded stacks and a flame
// graph written next to the recording (FILE.folded, flame-NAME.svg).
func (p *perfPlan) analyze(ctx context.Context, rec *PerfRecord, title string, groups []profile.Group) {
	ctx, cancel := context.WithTimeout(ctx, perfScriptTimeout)
	defer cancel()
	prof, err := profile.Run(ctx, p.bin, rec.File)
	if err != nil {
		rec.Profile = &PerfProfile{Note: fmt.Sprintf("could not read the recording back: %v", err)}
		return
	}
	pp := &PerfProfile{Samples: prof.Samples}
	if prof.Weight > 0 {
		pp.Unwound = 100 * float64(prof.Weight-prof.UnknownWeight) / float64(prof.Weight)
	}
	for _, f := range prof.Top(topFunctions) {
		pp.Top = append(pp.Top, FunctionShare{Name: f.Name, Inclusive: f.Inclusive, Self: f.Self})
	}
	for _, g := range prof.Groups(groups) {
		pp.Groups = append(pp.Groups, GroupShare{Name: g.Name, Share: g.Inclusive})
	}
	base := strings.TrimSuffix(rec.File, filepath.Ext(rec.File))
	var notes []string
	if err := writeFile(base+".folded", prof.WriteFolded); err != nil {
		notes = append(notes, err.Error())
	} else {
		pp.Folded = base + ".folded"
	}
	flame := filepath.Join(filepath.Dir(rec.File), "flame-"+filepath.Base(base)+".svg")
	if err := writeFile(flame, func(w io.Writer) error {
		return prof.WriteFlameSVG(w, profile.FlameOptions{Title: title})
	}); err != nil {
		notes = append(notes, err.Error())
	} else {
		pp.Flame = flame
	}
	pp.Note = strings.Join(notes, "; ")
	rec.Profile = pp
}

// writeFile creates path and writes it with fn.
func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
