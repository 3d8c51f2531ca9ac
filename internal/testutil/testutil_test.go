package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestBuildOnce(t *testing.T) {
	const pkg = "github.com/relayload/relayload/internal/testutil/testdata/hello"
	a := Build(t, pkg)
	st, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	b := Build(t, pkg)
	st2, _ := os.Stat(b)
	if a != b || !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("built twice: %s %v, %s %v", a, st.ModTime(), b, st2.ModTime())
	}
	out, err := exec.Command(a).Output()
	if err != nil || string(out) != "hello\n" {
		t.Errorf("run: %q %v", out, err)
	}
}

func TestFreePort(t *testing.T) {
	p := FreePort(t)
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("port %d not free: %v", p, err)
	}
	l.Close()
}

// Eventually returns as soon as the condition holds, long before its
// timeout however loaded the machine: the bound on its length adds what
// the machine took.
func TestEventually(t *testing.T) {
	stalls := StartStalls()
	start := time.Now()
	n := 0
	held := Eventually(time.Minute, func() bool { n++; return n == 3 })
	took, lost := time.Since(start), stalls.Stop()
	if !held || n != 3 || took > 500*time.Millisecond+lost {
		t.Errorf("n=%d after %v (%v lost to the machine)", n, took, lost)
	}
	if Eventually(30*time.Millisecond, func() bool { return false }) {
		t.Error("a condition that never holds held")
	}
}

func TestOutputWaitFor(t *testing.T) {
	var o Output
	go func() {
		for i := 0; i < 3; i++ {
			fmt.Fprintf(&o, "line %d\n", i)
			time.Sleep(time.Millisecond)
		}
	}()
	if !o.WaitFor("line 2\n", time.Minute) {
		t.Fatalf("never saw line 2: %q", o.String())
	}
	if o.WaitFor("line 3", 50*time.Millisecond) {
		t.Errorf("saw a line never written: %q", o.String())
	}
}

func TestGone(t *testing.T) {
	calls := 0
	left := Gone(5*time.Second, func() []int {
		calls++
		if calls < 3 {
			return []int{42}
		}
		return nil
	})
	if len(left) != 0 || calls != 3 {
		t.Errorf("left %v after %d calls, want nothing after 3", left, calls)
	}
	if left := Gone(30*time.Millisecond, func() []int { return []int{7} }); len(left) != 1 || left[0] != 7 {
		t.Errorf("a process that stays: left %v", left)
	}
}
