package orchestrate

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

func TestGodebugValue(t *testing.T) {
	for _, tc := range []struct {
		in, val string
		named   bool
	}{
		{"", "", false},
		{"schedtrace=5", "5", true},
		{"http2client=0,schedtrace=0", "0", true},
		{"schedtrace=1,schedtrace=7", "7", true}, // the runtime: last one wins
		{"xschedtrace=1", "", false},
		{"schedtrace", "", false},
	} {
		val, named := godebugValue(tc.in, schedtraceKey)
		if val != tc.val || named != tc.named {
			t.Errorf("godebugValue(%q) = %q, %v; want %q, %v", tc.in, val, named, tc.val, tc.named)
		}
	}
}

// sysmonHelperEnv makes the test binary act as a program whose main calls
// QuietSysmon and then reports what it sees.
const sysmonHelperEnv = "RELAYLOAD_TEST_SYSMON_HELPER"

func TestQuietSysmonHelper(t *testing.T) {
	if os.Getenv(sysmonHelperEnv) == "" {
		t.Skip("helper process only")
	}
	pid := os.Getpid()
	QuietSysmon()
	_, was := os.LookupEnv(godebugWasEnv)
	godebug, had := os.LookupEnv("GODEBUG")
	// One line the parent parses: state, GODEBUG as children get it, pid
	// unchanged by the re-exec, marker gone.
	os.Stdout.WriteString("RESULT " + sysmonState() + "|" + map[bool]string{true: "set:" + godebug, false: "unset"}[had] +
		"|" + map[bool]string{true: "same-pid", false: "new-pid"}[pid == os.Getpid()] +
		"|" + map[bool]string{true: "marker-left", false: "marker-gone"}[was] + "\n")
}

// QuietSysmon re-executes the program with schedtrace set, restores the
// caller's GODEBUG for children, and leaves a GODEBUG that names
// schedtrace alone (the opt-out).
func TestQuietSysmon(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	if up, ok := uptimeSeconds(); !ok || up > quietSysmonUptimeLimit {
		t.Skip("machine up too long: QuietSysmon does nothing here")
	}
	for _, tc := range []struct {
		name    string
		godebug *string
		want    string
	}{
		{"unset", nil, "quiet|unset|same-pid|marker-gone"},
		{"empty", ptr(""), "quiet|set:|same-pid|marker-gone"},
		{"other settings kept", ptr("http2client=0"), "quiet|set:http2client=0|same-pid|marker-gone"},
		{"opt-out", ptr("schedtrace=0"), "default|set:schedtrace=0|same-pid|marker-gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestQuietSysmonHelper$", "-test.count=1")
			env := setEnv(os.Environ(), sysmonHelperEnv, "1")
			var kept []string
			for _, kv := range env {
				if !strings.HasPrefix(kv, "GODEBUG=") && !strings.HasPrefix(kv, godebugWasEnv+"=") {
					kept = append(kept, kv)
				}
			}
			if tc.godebug != nil {
				kept = append(kept, "GODEBUG="+*tc.godebug)
			}
			cmd.Env = kept
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			_, line, ok := strings.Cut(string(out), "RESULT ")
			if !ok {
				t.Fatalf("helper printed no result:\n%s", out)
			}
			line, _, _ = strings.Cut(line, "\n")
			if line != tc.want {
				t.Errorf("got %q, want %q", line, tc.want)
			}
			if strings.Contains(string(out), "SCHED ") {
				t.Errorf("a scheduler trace was printed:\n%s", out)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
