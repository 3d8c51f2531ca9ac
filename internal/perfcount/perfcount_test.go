package perfcount

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/relayload/relayload/internal/testutil"
)

// TestScaledRecorded: the scaling of multiplexed counters, on recorded
// readings with what perf stat reports for them.
func TestScaledRecorded(t *testing.T) {
	raw, err := os.ReadFile("testdata/counters.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct {
			Value, Enabled, Running, Scaled uint64
		}
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Cases {
		if got := Scaled(Reading{c.Value, c.Enabled, c.Running}); got != c.Scaled {
			t.Errorf("%+v: scaled %d, want %d", c, got, c.Scaled)
		}
	}
}

func TestPerEnvelope(t *testing.T) {
	for _, tc := range []struct {
		a, b uint64
		n    int64
		want float64
	}{
		{1e9, 4e9, 1000, 3e6}, {5, 5, 10, 0}, {1, 2, 0, 0}, {9, 2, 3, 0},
	} {
		if got := PerEnvelope(tc.a, tc.b, tc.n); got != tc.want {
			t.Errorf("PerEnvelope(%d, %d, %d) = %g, want %g", tc.a, tc.b, tc.n, got, tc.want)
		}
	}
}

// TestLive counts a busy child process where the machine has a PMU, and
// says clearly why it cannot where it has none. The child spins until it
// is killed, and the count is read until it grows: on a loaded machine
// the child may not run within any fixed interval.
func TestLive(t *testing.T) {
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	c, err := Open([]int{cmd.Process.Pid})
	if errors.Is(err, ErrNoPMU) {
		t.Skipf("this machine cannot count instructions: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, _ := c.Read()
	var b uint64
	testutil.Eventually(30*time.Second, func() bool {
		b, err = c.Read()
		return err != nil || b > a
	})
	if err != nil || b <= a {
		t.Errorf("instructions %d then %d, %v: a busy shell retired none", a, b, err)
	}
}
