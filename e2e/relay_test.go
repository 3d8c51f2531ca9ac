// Package e2e checks relayload against a real Relay. Every test needs
// RELAY_BIN, the path of a Relay binary built from getsentry/relay, and
// skips without it (CI has none):
//
//	RELAY_BIN=~/relay/target/release/relay go test ./e2e/ -v -timeout 20m
//
// The tests drive the same packages orchestrate does (the fake upstream,
// Relay's config dir and process, blast), and orchestrate itself for the
// verdicts, so a change that breaks relayload against Relay shows here
// even when the stand-in relay of the unit tests keeps passing.
package e2e

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/relayload/relayload/internal/blast"
	"github.com/relayload/relayload/internal/cli/upstreamflag"
	"github.com/relayload/relayload/internal/orchestrate"
	"github.com/relayload/relayload/internal/orchestrate/relayconfig"
	"github.com/relayload/relayload/internal/orchestrate/relayproc"
	"github.com/relayload/relayload/internal/pool"
	"github.com/relayload/relayload/internal/testutil"
	"github.com/relayload/relayload/projects"
	"github.com/relayload/relayload/relayauth"
	"github.com/relayload/relayload/upstream"
)

// relayBin is $RELAY_BIN, or skips the test.
func relayBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("RELAY_BIN")
	if bin == "" {
		t.Skip("RELAY_BIN is not set: these tests need a real Relay binary (cargo build --release -p relay in a getsentry/relay checkout)")
	}
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("RELAY_BIN=%s is not an executable file: %v", bin, err)
	}
	return bin
}

// relay is a real Relay in managed mode against a fresh fake upstream.
type relay struct {
	up     *upstream.Server
	target string
	proc   *relayproc.Process
	ps     []projects.Project
}

// startRelay starts a fake upstream and Relay against it, ready to ingest.
func startRelay(t *testing.T, bin string, ucfg upstream.Config, overrides relayconfig.Config) *relay {
	t.Helper()
	ps, err := projects.Generate(1, 10)
	if err != nil {
		t.Fatal(err)
	}
	ucfg.Projects, ucfg.VerifySignatures = ps, true
	up, err := upstream.Start(ucfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	hs := up
	creds, err := relayauth.GenerateCredentials(nil)
	if err != nil {
		t.Fatal(err)
	}
	port := testutil.FreePort(t)
	conf := relayconfig.Merge(relayconfig.Default(relayconfig.Options{Upstream: hs.URL + "/", Host: "127.0.0.1", Port: port}), overrides)
	dir := t.TempDir()
	if err := relayconfig.Write(dir, conf, creds); err != nil {
		t.Fatal(err)
	}
	proc, err := relayproc.Start(relayproc.Spec{Bin: bin, Args: []string{"-c", dir, "run"}, LogPath: filepath.Join(dir, "relay.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		res := proc.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("relay log tail:\n%s", proc.LogTail(30))
		}
		t.Logf("relay shutdown: %s in %v (killed: %v)", res.Exit, res.Took.Round(time.Millisecond), res.Killed)
	})
	target := "http://127.0.0.1:" + strconv.Itoa(port)
	if _, err := proc.WaitReady(t.Context(), target+"/api/relay/healthcheck/ready/", 50*time.Millisecond, 30*time.Second); err != nil {
		t.Fatalf("relay not ready: %v\n%s", err, proc.LogTail(30))
	}
	return &relay{up: up, target: target, proc: proc, ps: ps}
}

func TestMain(m *testing.M) { testutil.Main(m) }

// send blasts n envelopes of mix at rate and returns blast's result.
func (r *relay) send(t *testing.T, mix string, rate float64, n int64) *blast.Result {
	t.Helper()
	m, err := pool.ParseMix(mix)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.Build(t.Context(), pool.Options{Seed: 1, Size: 500, Mix: m, Projects: r.ps})
	if err != nil {
		t.Fatal(err)
	}
	res, err := blast.Run(t.Context(), blast.Config{Target: r.target, Pool: p, Rate: rate, Count: n})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// waitForwarded waits until the upstream's data envelopes stop moving
// (no change for settle) or reach want, at most timeout.
func (r *relay) waitForwarded(want int64, settle, timeout time.Duration) upstream.Stats {
	deadline := time.Now().Add(timeout)
	last, lastChange := int64(-1), time.Now()
	for {
		st := r.up.Stats()
		if st.DataEnvelopes != last {
			last, lastChange = st.DataEnvelopes, time.Now()
		}
		if st.DataEnvelopes >= want && time.Since(lastChange) >= settle || time.Now().After(deadline) {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRegistrationConfigsAndForwarding: Relay registers (signed), fetches
// the global config and its project configs, forwards every envelope of
// every kind with valid signatures, scrubs every PII canary and keeps the
// control, and the upstream sees no protocol error.
func TestRegistrationConfigsAndForwarding(t *testing.T) {
	r := startRelay(t, relayBin(t), upstream.Config{}, nil)
	res := r.send(t, "errors=3,transactions=2,sessions=2,checkins=1,logs=2", 100, 500)
	if res.OK != 500 {
		t.Fatalf("Relay accepted %d of 500 (statuses %v, errors %v)", res.OK, res.ByStatus, res.Errors)
	}
	st := r.waitForwarded(500, time.Second, 30*time.Second)
	if st.Registrations.Challenges < 1 || st.Registrations.Responses < 1 || len(st.Registrations.Failures) != 0 {
		t.Errorf("registrations %+v", st.Registrations)
	}
	if st.ConfigRequests.Global < 1 || st.ConfigRequests.KeysServed < 1 || st.ConfigRequests.Unknown != 0 {
		t.Errorf("config requests %+v", st.ConfigRequests)
	}
	if st.DataEnvelopes != 500 || st.EnvelopesBySender["relay"] != st.Envelopes {
		t.Errorf("forwarded %d data envelopes of 500 accepted (%d in all, by sender %v)", st.DataEnvelopes, st.Envelopes, st.EnvelopesBySender)
	}
	for _, typ := range []string{"event", "transaction", "check_in", "log"} {
		if st.ItemsByType[typ] == 0 {
			t.Errorf("no %s items forwarded: %v", typ, st.ItemsByType)
		}
	}
	if st.ItemsByType["session"]+st.ItemsByType["sessions"] == 0 {
		t.Errorf("no sessions forwarded: %v", st.ItemsByType)
	}
	if len(st.Errors) != 0 || st.Signatures.Verified == 0 {
		t.Errorf("protocol errors at the upstream %v; signatures %+v", st.Errors, st.Signatures)
	}
	if len(st.Canaries.Leaks) != 0 {
		t.Errorf("PII canaries leaked through Relay's scrubbing: %v", st.Canaries.Leaks)
	}
	if st.Canaries.KeptFound["public_note"] == 0 || st.Canaries.ScrubbedItems == 0 {
		t.Errorf("the control was not kept or nothing was scrubbed: %+v", st.Canaries)
	}
	t.Logf("forwarded %d data envelopes, items %v, signatures %+v, canaries found %v", st.DataEnvelopes, st.ItemsByType, st.Signatures, st.Canaries.Found)
}

// TestOutcomesUnderQuota: with a transaction:0 quota Relay answers 429 for
// transaction envelopes and reports rate_limited outcomes within seconds
// (relayconfig flushes outcomes every second).
func TestOutcomesUnderQuota(t *testing.T) {
	q, err := upstreamflag.ParseQuota("transaction:0", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := startRelay(t, relayBin(t), upstream.Config{Quotas: []json.RawMessage{q}}, nil)
	res := r.send(t, "transactions=1,errors=1", 50, 200)
	if res.ByStatus[http.StatusTooManyRequests] == 0 {
		t.Errorf("no 429 for transactions under a transaction:0 quota: %v", res.ByStatus)
	}
	deadline := time.Now().Add(15 * time.Second)
	var st upstream.Stats
	for time.Now().Before(deadline) {
		st = r.up.Stats()
		if st.Outcomes.ByOutcome["rate_limited"] > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	found := map[string]bool{}
	for _, o := range st.Outcomes.Rows {
		if o.Outcome == "rate_limited" && o.Reason == "relayload_quota" {
			found[o.Category] = true
		}
	}
	if !found["transaction"] {
		t.Errorf("no rate_limited transaction outcome with the quota's reason: %+v", st.Outcomes.Rows)
	}
	if st.ItemsByType["transaction"] != 0 || st.ItemsByType["event"] == 0 {
		t.Errorf("forwarded items %v: transactions must all be rate limited, errors not", st.ItemsByType)
	}
	t.Logf("outcomes %+v", st.Outcomes.Rows)
}

// TestVerdicts: orchestrate judges a low rate kept up, and a rate three
// times Relay's measured ceiling fell behind, with forwarded/s near that
// ceiling and the backlog's growth in the reasons.
func TestVerdicts(t *testing.T) {
	bin := relayBin(t)
	run := func(rate float64) *orchestrate.Step {
		t.Helper()
		rep, err := orchestrate.Run(t.Context(), orchestrate.Config{
			Builds: []orchestrate.Build{{Name: "relay", Bin: bin}}, Rates: []float64{rate},
			Duration: 8 * time.Second, Warmup: time.Second, Idle: time.Second, DrainTimeout: 10 * time.Second,
			Projects: 20, PoolSize: 1000, WorkDir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		st := rep.Steps[0]
		t.Logf("%g/s: %s %v; accepted %.0f/s, forwarded %.0f/s, backlog growth %+.0f/s, catch-up %v, %.2f ms/envelope, load %.1f",
			rate, st.Verdict, st.Reasons, st.Steady.AcceptedRate, st.Steady.ForwardedRate, st.Steady.BacklogGrowth, st.Steady.CatchUp, st.CPU.MsPerEnv, st.LoadAvg[0])
		if st.Failed {
			t.Fatalf("step failed: %s\n%s", st.Error, st.LogTail)
		}
		return st
	}
	low := run(50)
	if low.Verdict == orchestrate.VerdictHarnessLimited {
		low = run(50) // a busy machine delayed blast's timers: once more
	}
	if low.Verdict != orchestrate.VerdictKeptUp {
		t.Errorf("50/s: %s %v", low.Verdict, low.Reasons)
	}
	over := run(3000)
	ceiling := over.Steady.ForwardedRate
	if over.Verdict != orchestrate.VerdictFellBehind || ceiling <= 0 || ceiling > over.Steady.AcceptedRate/2 {
		t.Fatalf("3000/s: %s, forwarded %.0f/s of %.0f/s", over.Verdict, ceiling, over.Steady.AcceptedRate)
	}
	st := run(math.Round(3 * ceiling))
	if st.Verdict != orchestrate.VerdictFellBehind || !strings.Contains(strings.Join(st.Reasons, "|"), "backlog +") {
		t.Errorf("3× the ceiling (%.0f/s): %s %v", 3*ceiling, st.Verdict, st.Reasons)
	}
	// Deep overload costs Relay throughput (its backlog grows by tens of
	// MiB a second at 3,000/s): what it forwards at 3,000/s is a floor of
	// its capacity, not the capacity, so 3× that may forward more.
	if f := st.Steady.ForwardedRate; f < 0.5*ceiling {
		t.Errorf("forwarded %.0f/s at 3× a ceiling of %.0f/s", f, ceiling)
	}
	// The true cost does not fall above capacity the way a cost per
	// accepted envelope would (it halved there before).
	if st.CPU.MsPerEnv < 0.5*low.CPU.MsPerEnv {
		t.Errorf("CPU per envelope %.2f ms at 3× capacity, %.2f ms at 50/s", st.CPU.MsPerEnv, low.CPU.MsPerEnv)
	}
}

// TestSIGINTLeavesNoRelay: orchestrate interrupted mid-blast exits 130
// within 2 s and no Relay outlives it.
func TestSIGINTLeavesNoRelay(t *testing.T) {
	bin := relayBin(t)
	orch := testutil.Build(t, "github.com/relayload/relayload/cmd/orchestrate")
	work := t.TempDir()
	cmd := exec.Command(orch, "--relay-bin", bin, "--rates", "100", "--duration", "30s", "--idle", "1s", "--projects", "10", "--pool", "200")
	cmd.Env = append(os.Environ(), "TMPDIR="+work)
	var stderr testutil.Output
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !stderr.WaitFor("  blast ", 60*time.Second) {
		_ = cmd.Process.Kill()
		t.Fatalf("the blast never began:\n%s", stderr.String())
	}
	time.Sleep(2 * time.Second) // into the blast
	relays := processesOf(bin)
	if len(relays) == 0 {
		_ = cmd.Process.Kill()
		t.Fatal("no Relay during the blast")
	}
	stalls := testutil.StartStalls()
	sent := time.Now()
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	if took, lost := time.Since(sent), stalls.Stop(); took > 2*time.Second+lost {
		t.Errorf("orchestrate exited %v after SIGINT (%v lost to the machine)", took, lost)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("exit %v, want 130", err)
	}
	for _, pid := range relays {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("Relay %d outlived orchestrate", pid)
		}
	}
}

// processesOf lists the pids running bin.
func processesOf(bin string) []int {
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	return testutil.Pids(func(p procfs.Proc) bool {
		exe, err := p.Executable()
		return err == nil && exe == bin
	})
}
