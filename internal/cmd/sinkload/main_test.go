package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSinkloadSmoke runs the measurement the upstream README quotes, briefly:
// sinkload spawns a real fake-upstream, posts zstd envelopes at a low rate
// and must find the server's count exact and its CPU time measured. It checks
// that the harness works, not the figures (those are for a quiet machine).
func TestSinkloadSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two binaries")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "../../../cmd/fake-upstream", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, sign := range []string{"none", "fresh"} {
		out, err := exec.Command(filepath.Join(dir, "sinkload"), "--spawn", filepath.Join(dir, "fake-upstream"),
			"--rate", "300", "--duration", "1s", "--warmup", "0s", "--bodies", "synthetic", "--n", "40",
			"--projects", "10", "--connections", "8", "--sign", sign).Output()
		if err != nil {
			t.Fatalf("sign=%s: sinkload: %v\n%s", sign, err, out)
		}
		var r Result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("sign=%s: output is not a Result: %v\n%s", sign, err, out)
		}
		if r.OK < 200 || r.Failed != 0 || !r.ExactCount || r.ServerCounted != r.OK || r.ServerCPUSeconds <= 0 || r.CPUMicrosPerEnv <= 0 {
			t.Errorf("sign=%s: %+v", sign, r)
		}
		if r.MeanDecodedBytes < 9000 || r.MeanWireBytes <= 0 || r.MeanWireBytes >= r.MeanDecodedBytes {
			t.Errorf("sign=%s: bodies %v wire, %v decoded; want ~10 KB zstd-compressed events", sign, r.MeanWireBytes, r.MeanDecodedBytes)
		}
	}
}
