package orchestrate

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"
)

// Why orchestrate runs with GODEBUG=schedtrace set.
//
// The Go runtime's monitor thread (sysmon) goes into a deep sleep whenever
// every P is idle, and the first system call after that wakes it and
// resets it to polling every 20 µs. The harness at a few hundred requests
// a second is idle between almost every request, so sysmon went through
// that cycle thousands of times a second, and it was a large share of the
// harness's CPU and context switches beside Relay. While schedtrace is set
// the runtime never lets sysmon deep-sleep (it must be awake to print the
// trace), so sysmon backs off to its 10 ms period and stays there. A
// step's cpu.harness_cores shows the difference at the same rate
// (setup.harness_sysmon says which way a run went). The trace period is
// the largest the runtime takes, 2^31-1 ms (24.8 days): the runtime prints
// a trace when its monotonic clock (time since boot) passes a multiple of
// it, which on a machine up less than that never happens during a run.
// The runtime reads GODEBUG once, at start, so orchestrate re-executes
// itself with it (same process ID); the children it starts (Relay, perf)
// get the environment it was started with.
const (
	schedtraceKey   = "schedtrace"
	quietSchedtrace = "2147483647"
	// quietSysmonUptimeLimit is how long the machine may have been up for
	// no trace to be printed within a run of up to ~20 hours.
	quietSysmonUptimeLimit = 24 * 24 * 3600 // seconds
	// godebugWasEnv carries the GODEBUG orchestrate was started with across
	// the re-exec: "unset", or "=" followed by the value.
	godebugWasEnv = "RELAYLOAD_GODEBUG_WAS"
)

// Sysmon states recorded in Setup.HarnessSysmon.
const (
	SysmonQuiet   = "quiet"   // schedtrace set at start: sysmon polls every 10 ms
	SysmonDefault = "default" // the runtime's own behaviour
)

// QuietSysmon makes the running program run with sysmon kept out of deep
// sleep (see above). Called first thing in main: when the process was not
// started that way it re-executes itself with GODEBUG=…,schedtrace=…; in
// the re-executed process it restores the caller's GODEBUG for children.
// It returns (and the program goes on with the runtime's default) when it
// cannot or should not: not Linux, GODEBUG already names schedtrace (the
// user's choice, also the way to opt out: GODEBUG=schedtrace=0), the
// machine up too long for the trace to stay silent, or exec failed.
func QuietSysmon() {
	if was, ok := os.LookupEnv(godebugWasEnv); ok {
		// The re-executed process: the runtime has read schedtrace; put
		// the environment back as it was.
		os.Unsetenv(godebugWasEnv)
		if v, set := strings.CutPrefix(was, "="); set {
			os.Setenv("GODEBUG", v)
		} else {
			os.Unsetenv("GODEBUG")
		}
		return
	}
	if runtime.GOOS != "linux" {
		return
	}
	orig, had := os.LookupEnv("GODEBUG")
	if _, named := godebugValue(orig, schedtraceKey); named {
		return
	}
	if up, ok := uptimeSeconds(); !ok || up > quietSysmonUptimeLimit {
		return
	}
	env := os.Environ()
	godebug := schedtraceKey + "=" + quietSchedtrace
	was := "unset"
	if had {
		was = "=" + orig
		if orig != "" {
			godebug = orig + "," + godebug
		}
	}
	env = setEnv(env, "GODEBUG", godebug)
	env = setEnv(env, godebugWasEnv, was)
	// /proc/self/exe is this very binary, even if its path has changed.
	_ = syscall.Exec("/proc/self/exe", os.Args, env)
	// Exec failed: carry on with the default runtime.
}

// sysmonState says how this process's runtime was started: quiet when its
// initial environment (which the runtime read) set schedtrace above 0.
func sysmonState() string {
	self, err := procfs.Self()
	if err != nil {
		return SysmonDefault
	}
	environ, err := self.Environ()
	if err != nil {
		return SysmonDefault
	}
	for _, kv := range environ {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			continue
		}
		if s, named := godebugValue(v, schedtraceKey); named {
			if n, err := strconv.Atoi(s); err == nil && n > 0 {
				return SysmonQuiet
			}
		}
	}
	return SysmonDefault
}

// godebugValue is the value of key in a GODEBUG string (the last one wins,
// as in the runtime) and whether it is named at all.
func godebugValue(godebug, key string) (string, bool) {
	var val string
	var named bool
	for _, f := range strings.Split(godebug, ",") {
		if k, v, ok := strings.Cut(f, "="); ok && k == key {
			val, named = v, true
		}
	}
	return val, named
}

// setEnv returns env with key set to val.
func setEnv(env []string, key, val string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+val)
}

// uptimeSeconds is how long the machine has been up (/proc/uptime; it
// includes suspend, so it is at least the monotonic clock).
func uptimeSeconds() (float64, bool) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, false
	}
	f, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	up, err := strconv.ParseFloat(f, 64)
	return up, err == nil
}
