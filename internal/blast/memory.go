package blast

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"

	"github.com/prometheus/procfs"
	"github.com/relayload/relayload/internal/configerr"
	"github.com/relayload/relayload/internal/pool"
)

// manifestEntryBytes is what one entry of a dump's manifest takes while
// it is written: the ManifestEntry and its indented JSON.
const manifestEntryBytes = 768

// PoolMemory is what a pool is expected to need, and what there is.
type PoolMemory struct {
	// Need is the pool's bytes (pool.EstimateSize), plus the copy of its
	// bodies that sending keeps (ForSending), or a dump's manifest.
	Need int64
	// PerEntry is Need per envelope.
	PerEntry int64
	// Available is the memory the kernel says can be used without
	// swapping (MemAvailable), or the Go memory limit (GOMEMLIMIT) when
	// lower; Limit says which ("" when neither is known: not checked).
	Available int64
	Limit     string
}

// CheckPoolMemory estimates the memory a pool of opts needs to be built and
// then sent (or, with dump, written out), and refuses one that needs more
// than is available, before it is built: Build allocates the whole pool, so
// an oversized one would otherwise push the machine into swapping or the
// OOM killer with nothing said. procMount is where proc is mounted
// (procfs.DefaultMountPoint); without it (another OS) only GOMEMLIMIT is
// checked. A pool too large is a ConfigError naming Pool; an error
// estimating it is pool.Build's.
func CheckPoolMemory(ctx context.Context, opts pool.Options, dump bool, procMount string) (PoolMemory, error) {
	est, err := pool.EstimateSize(ctx, opts)
	if err != nil {
		return PoolMemory{}, err
	}
	return CheckMemory(est, dump, procMount)
}

// CheckMemory is CheckPoolMemory for a pool already estimated, such as
// one replayed from recorded envelopes (replay.Estimate).
func CheckMemory(est pool.Estimate, dump bool, procMount string) (PoolMemory, error) {
	m := PoolMemory{Need: est.Total() + est.EncodedBytes + est.EntryBytes}
	if dump {
		m.Need = est.Total() + int64(est.Entries)*manifestEntryBytes
	}
	m.PerEntry = m.Need / int64(max(est.Entries, 1))
	m.Available = math.MaxInt64
	if fs, err := procfs.NewFS(procMount); err == nil {
		if mi, err := fs.Meminfo(); err == nil && mi.MemAvailable != nil {
			m.Available, m.Limit = int64(min(*mi.MemAvailable, math.MaxInt64/1024)*1024), "MemAvailable"
		}
	}
	if lim := debug.SetMemoryLimit(-1); lim < m.Available {
		m.Available, m.Limit = lim, "GOMEMLIMIT"
	}
	if m.Limit != "" && m.Need > m.Available {
		return m, configerr.Errorf("Pool", "%d envelopes need about %s (%s each with these envelopes and this encoding), more than the %s available (%s): use a smaller pool",
			est.Entries, gib(m.Need), kib(m.PerEntry), gib(m.Available), m.Limit)
	}
	return m, nil
}

func gib(b int64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func kib(b int64) string { return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10)) }
