package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The harness runs end to end at a low rate: sink process, blast binary,
// CPU and RSS readings, the table.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries and runs blast")
	}
	dir := t.TempDir()
	blastBin := filepath.Join(dir, "blast")
	benchBin := filepath.Join(dir, "blastbench")
	for bin, pkg := range map[string]string{blastBin: "../../../cmd/blast", benchBin: "."} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	out, err := exec.Command(benchBin, "-blast", blastBin, "-rates", "300", "-duration", "1s", "-warmup", "200ms",
		"-pool", "200", "-clients", "fasthttp,net/http").Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	s := string(out)
	if strings.Count(s, "  blast ") < 2 || !strings.Contains(s, "CPU/req") || !strings.Contains(s, "targets:") {
		t.Fatalf("unexpected output:\n%s", s)
	}
}
