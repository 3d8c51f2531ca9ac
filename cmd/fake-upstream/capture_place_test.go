package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCaptureDirReplaced (issue 33, row 5): a capture directory removed and
// made again while fake-upstream runs is summed up as lost, not as kept:
// the last stderr line used to claim 200 envelopes kept and no error while
// the directory held 100 files and no manifest.
func TestCaptureDirReplaced(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "captured")
	base, _, stderr, stop := startWithStderr(t, "--capture", dir)
	resp, err := http.Get(base + "/projects")
	if err != nil {
		t.Fatal(err)
	}
	var ps []struct {
		ID        int64  `json:"id"`
		PublicKey string `json:"public_key"`
	}
	json.NewDecoder(resp.Body).Decode(&ps)
	resp.Body.Close()
	if len(ps) != 1 {
		t.Fatalf("projects %+v", ps)
	}
	post := func(i int) {
		req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/%d/envelope/", base, ps[0].ID),
			strings.NewReader(fmt.Sprintf("{}\n{\"type\":\"event\"}\n{\"message\":\"%d\"}\n", i)))
		req.Header.Set("X-Sentry-Auth", "Sentry sentry_key="+ps[0].PublicKey+", sentry_version=7")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("envelope %d: %s", i, resp.Status)
		}
	}
	for i := range 100 {
		post(i)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 200; i++ {
		post(i)
	}
	stop() // stderr is complete once it exited
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	want := fmt.Sprintf("fake-upstream: kept 0 envelopes (0 B) in %s, skipped 0, 100 lost and 100 not written (capture: %s was removed or replaced during the capture)", dir, dir)
	if !strings.Contains(stderr.String(), want+"\n") || len(files) != 0 {
		t.Errorf("stderr %q\nwant the line %q; the directory holds %d files", stderr.String(), want, len(files))
	}
}
