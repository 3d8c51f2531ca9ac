package blast

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/internal/pool"
	"golang.org/x/sys/unix"
)

// manifestEntryBytes is what one entry of a dump's manifest takes while
// it is written: the ManifestEntry and its indented JSON.
const manifestEntryBytes = 768

// Use is what a pool is built for, which decides how much of it is held
// at once.
type Use int

const (
	// Send builds the pool whole and keeps a copy of its bodies to send
	// (ForSending).
	Send Use = iota
	// Dump builds the pool whole and writes it (a replayed pool).
	Dump
	// StreamedDump writes a generated pool pool.DumpBatch envelopes at a
	// time (pool.DumpStream): only a batch is held, whatever the size.
	StreamedDump
)

// Limits are the memory limits a process runs under, as bytes it may
// still use; 0 is a limit that is not set or could not be read.
type Limits struct {
	// MemAvailable is what the kernel says can be used without swapping.
	MemAvailable int64
	// Cgroup is memory.max less memory.current of the process's cgroup
	// (v2), what a container's limit leaves.
	Cgroup int64
	// AddressSpace is RLIMIT_AS (ulimit -v) less the address space the
	// process already has: a Go process past it dies in the runtime.
	AddressSpace int64
	// GoMemLimit is GOMEMLIMIT (debug.SetMemoryLimit) when set.
	GoMemLimit int64
}

// The names of the limits, as errors and PoolMemory.Limit give them.
const (
	LimitMemAvailable = "MemAvailable"
	LimitCgroup       = "cgroup memory.max"
	LimitAddressSpace = "RLIMIT_AS"
	LimitGoMemLimit   = "GOMEMLIMIT"
)

// Smallest is the smallest limit set and its name (math.MaxInt64 and ""
// when none is).
func (l Limits) Smallest() (int64, string) {
	best, name := int64(math.MaxInt64), ""
	for _, c := range []struct {
		v    int64
		name string
	}{{l.MemAvailable, LimitMemAvailable}, {l.Cgroup, LimitCgroup}, {l.AddressSpace, LimitAddressSpace}, {l.GoMemLimit, LimitGoMemLimit}} {
		if c.v > 0 && c.v < best {
			best, name = c.v, c.name
		}
	}
	return best, name
}

// ReadLimits reads the limits this process runs under: MemAvailable and
// the process's cgroup and address space from procMount
// (procfs.DefaultMountPoint), memory.max under cgroupMount
// (/sys/fs/cgroup), RLIMIT_AS from the kernel and GOMEMLIMIT from the
// runtime. A limit that cannot be read is left 0 (another OS, cgroup v1).
func ReadLimits(procMount, cgroupMount string) Limits {
	var l Limits
	if fs, err := procfs.NewFS(procMount); err == nil {
		if mi, err := fs.Meminfo(); err == nil && mi.MemAvailable != nil {
			l.MemAvailable = int64(min(*mi.MemAvailable, math.MaxInt64/1024) * 1024)
		}
	}
	l.Cgroup = cgroupLeft(procMount, cgroupMount)
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &r); err == nil && r.Cur != unix.RLIM_INFINITY && r.Cur < math.MaxInt64 {
		l.AddressSpace = max(int64(r.Cur)-vmSize(procMount), 1)
	}
	if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
		l.GoMemLimit = lim
	}
	return l
}

// cgroupLeft is memory.max less memory.current of the cgroup v2 the
// process is in (its "0::" line of /proc/self/cgroup); 0 without one or
// with no limit ("max").
func cgroupLeft(procMount, cgroupMount string) int64 {
	b, err := os.ReadFile(filepath.Join(procMount, "self", "cgroup"))
	if err != nil {
		return 0
	}
	var dir string
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			dir = filepath.Join(cgroupMount, filepath.Clean("/"+p))
		}
	}
	if dir == "" {
		return 0
	}
	read := func(name string) (int64, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		return v, err == nil
	}
	limit, ok := read("memory.max") // "max" does not parse: no limit
	if !ok || limit <= 0 {
		return 0
	}
	used, _ := read("memory.current")
	return max(limit-used, 1)
}

// vmSize is the address space the process has (VmSize of
// /proc/self/status), 0 if unknown.
func vmSize(procMount string) int64 {
	f, err := os.Open(filepath.Join(procMount, "self", "status"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmSize:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// PoolMemory is what a pool is expected to need, and what there is.
type PoolMemory struct {
	// Need is what is held at once: the pool's bytes (pool.EstimateSize)
	// plus the copy of its bodies that sending keeps (ForSending); for a
	// dump the pool's bytes, or for a streamed dump one batch's.
	Need int64
	// PerEntry is Need per envelope held.
	PerEntry int64
	// Available is the smallest of the Limits; Limit names it ("" when
	// none is known: not checked).
	Available int64
	Limit     string
}

// CheckPoolMemory estimates the memory a pool of opts needs to be built and
// used as use says, and refuses one that needs more than the smallest of
// lim, before it is built: Build allocates the whole pool, so an oversized
// one would otherwise push the machine into swapping, the OOM killer or a
// runtime crash at the address-space limit with nothing said. A pool too
// large is a ConfigError naming Pool and the limit; an error estimating it
// is pool.Build's.
func CheckPoolMemory(ctx context.Context, opts pool.Options, use Use, lim Limits) (PoolMemory, error) {
	est, err := pool.EstimateSize(ctx, opts)
	if err != nil {
		return PoolMemory{}, err
	}
	return CheckMemory(est, use, lim)
}

// CheckMemory is CheckPoolMemory for a pool already estimated, such as
// one replayed from recorded envelopes (replay.Estimate).
func CheckMemory(est pool.Estimate, use Use, lim Limits) (PoolMemory, error) {
	held := est.Entries
	var m PoolMemory
	switch use {
	case Send:
		m.Need = est.Total() + est.EncodedBytes + est.EntryBytes
	case Dump:
		m.Need = est.Total()
	case StreamedDump:
		m.Need, held = est.DumpHeld(), min(est.Entries, pool.DumpBatch)
	}
	m.PerEntry = m.Need / int64(max(held, 1))
	m.Available, m.Limit = lim.Smallest()
	if m.Limit == "" || m.Need <= m.Available {
		return m, nil
	}
	if use == StreamedDump {
		return m, configerr.Errorf("Pool", "a dump of %d envelopes holds about %s at once (%d envelopes at a time and the build's buffers), more than the %s available (%s)",
			est.Entries, gib(m.Need), held, gib(m.Available), m.Limit)
	}
	return m, configerr.Errorf("Pool", "%d envelopes need about %s (%s each with these envelopes and this encoding), more than the %s available (%s): use a smaller pool",
		est.Entries, gib(m.Need), kib(m.PerEntry), gib(m.Available), m.Limit)
}

func gib(b int64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func kib(b int64) string { return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10)) }
