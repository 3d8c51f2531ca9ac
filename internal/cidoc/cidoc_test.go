package cidoc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"

	"github.com/relayload/relayload/internal/testutil"
)

// The recipe and the page that shows it, from the module root.
const (
	recipeFile = "docs/ci/relay-compare.yml"
	ciDoc      = "docs/ci.md"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// moduleRoot walks up from the test's directory to the one with go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// lint runs actionlint over content as the workflow file path. Its
// shellcheck rule runs where shellcheck is installed; pyflakes is off (the
// recipe has no Python). The project is root, so no .github directory
// above the checkout changes the rules.
func lint(t *testing.T, root, path string, content []byte) []*actionlint.Error {
	t.Helper()
	opts := &actionlint.LinterOptions{Color: actionlint.ColorOptionKindNever, WorkingDir: root}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		opts.Shellcheck = sc
	}
	l, err := actionlint.NewLinter(io.Discard, opts)
	if err != nil {
		t.Fatal(err)
	}
	project, err := actionlint.NewProject(root)
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.Lint(path, content, project)
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

// TestRecipeLints: actionlint finds nothing in the recipe.
func TestRecipeLints(t *testing.T) {
	root := moduleRoot(t)
	content, err := os.ReadFile(filepath.Join(root, recipeFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Log("shellcheck is not installed: the run scripts are linted without it")
	}
	for _, e := range lint(t, root, recipeFile, content) {
		t.Error(e)
	}
}

// TestLintCatches: actionlint, set up as TestRecipeLints sets it up,
// reports each broken workflow in testdata, so a clean recipe means
// something.
func TestLintCatches(t *testing.T) {
	root := moduleRoot(t)
	for _, tc := range []struct {
		file, kind, message string
	}{
		{"unknown-key.yml", "syntax-check", `unexpected key "run-on" for "job" section`},
		{"bad-expression.yml", "expression", "parser"},
		{"unknown-function.yml", "expression", `undefined function "basesha"`},
		{"unknown-input.yml", "action", `input "submodule" is not defined`},
		{"bad-if.yml", "if-cond", "always evaluated to true"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("internal/cidoc/testdata", tc.file)
			content, err := os.ReadFile(filepath.Join(root, path))
			if err != nil {
				t.Fatal(err)
			}
			errs := lint(t, root, path, content)
			if !slices.ContainsFunc(errs, func(e *actionlint.Error) bool {
				return e.Kind == tc.kind && strings.Contains(e.Message, tc.message)
			}) {
				t.Errorf("actionlint did not report [%s] %q; it reported: %v", tc.kind, tc.message, errs)
			}
		})
	}
}

// TestRecipe: the recipe does what docs/ci.md says: checks out base and
// head, builds both, runs orchestrate with flags it has, writes the
// summary, uploads out/ always, and turns exit 0, 1 and 3 into pass, fail
// and a warning.
func TestRecipe(t *testing.T) {
	root := moduleRoot(t)
	content, err := os.ReadFile(filepath.Join(root, recipeFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems(t, content, orchestrateBin(t)) {
		t.Error(p)
	}
}

// TestRecipeChecksCatch: each break of the recipe in one place is one the
// checks of TestRecipe report.
func TestRecipeChecksCatch(t *testing.T) {
	root := moduleRoot(t)
	content, err := os.ReadFile(filepath.Join(root, recipeFile))
	if err != nil {
		t.Fatal(err)
	}
	bin := orchestrateBin(t)
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"upload only on success", "        if: always()\n", "", "always()"},
		{"no summary", `>> "$GITHUB_STEP_SUMMARY"`, `>> summary.md`, "summary"},
		{"inconclusive fails the check", `3) echo "::warning title=relayload::${verdict}" ;;`, `3) echo "::error title=relayload::${verdict}"; exit 1 ;;`, "exit 3"},
		{"a failure passes", `1) echo "::error title=relayload::${verdict}"; exit 1 ;;`, `1) echo "::warning title=relayload::${verdict}" ;;`, "exit 1"},
		{"set -e ends the step first", "          set +e\n", "", "exit 3"},
		{"no budget", " --budget 10m", "", "--budget"},
		{"no threshold", " --fail-on 'cpu_ms_per_envelope>+5%'", "", "--fail-on"},
		{"a flag orchestrate lacks", "--rates 300", "--rate 300", "--rate"},
		{"an unknown metric", "cpu_ms_per_envelope>+5%", "cpu_per_envelope>+5%", "cpu_per_envelope"},
		{"head compared with itself", "--relay-bin base/target/release/relay", "--relay-bin head/target/release/relay", "--relay-bin"},
		{"base at the head's commit", "github.event.pull_request.base.sha", "github.event.pull_request.head.sha", "base.sha"},
		{"no submodules", "          submodules: recursive\n", "", "submodules"},
		{"the report written elsewhere", "--out out", "--out report", "--out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(content, []byte(tc.old)) {
				t.Fatalf("%s no longer holds %q: update this case", recipeFile, tc.old)
			}
			broken := bytes.Replace(content, []byte(tc.old), []byte(tc.new), 1)
			ps := problems(t, broken, bin)
			t.Logf("reported: %q", ps)
			if !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("no problem mentioning %q reported; got %q", tc.want, ps)
			}
		})
	}
}

// TestDocShowsRecipe: docs/ci.md holds the recipe verbatim in a yaml
// block and links the file, so the page and the file cannot drift.
func TestDocShowsRecipe(t *testing.T) {
	root := moduleRoot(t)
	recipe, err := os.ReadFile(filepath.Join(root, recipeFile))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, ciDoc))
	if err != nil {
		t.Fatal(err)
	}
	link := "(" + strings.TrimPrefix(recipeFile, "docs/") + ")"
	if !bytes.Contains(doc, []byte(link)) {
		t.Errorf("%s does not link %s as %s", ciDoc, recipeFile, link)
	}
	blocks := yamlBlocks(doc)
	if len(blocks) != 1 {
		t.Fatalf("%s has %d ```yaml blocks; want one, the recipe", ciDoc, len(blocks))
	}
	if blocks[0] != string(recipe) {
		t.Errorf("%s's yaml block is not %s: %s", ciDoc, recipeFile, firstDifference(blocks[0], string(recipe)))
	}
}

// yamlBlocks are the contents of the ```yaml fenced blocks in a Markdown
// page, each ending in a newline.
func yamlBlocks(doc []byte) []string {
	var blocks []string
	var b strings.Builder
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && line == "```yaml":
			in = true
			b.Reset()
		case in && line == "```":
			in = false
			blocks = append(blocks, b.String())
		case in:
			b.WriteString(line + "\n")
		}
	}
	return blocks
}

// firstDifference says where two texts first differ, by line.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d of the block is %q, of the file %q", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("the block has %d lines, the file %d", len(g), len(w))
}

// orchestrateBin is orchestrate, built from this checkout.
func orchestrateBin(t *testing.T) string {
	t.Helper()
	return testutil.Build(t, "github.com/relayload/relayload/cmd/orchestrate")
}

// problems are what is wrong with the recipe in content: what its syntax
// tree says (steps, inputs, conditions), and what its compare step does
// when run with a stand-in orchestrate that exits with each status.
func problems(t *testing.T, content []byte, orchestrate string) []string {
	t.Helper()
	wf, errs := actionlint.Parse(content)
	if len(errs) > 0 || wf == nil {
		return []string{fmt.Sprintf("does not parse: %v", errs)}
	}
	if len(wf.Jobs) != 1 {
		// The summary and the artifact come from the compare step's job.
		return []string{fmt.Sprintf("has %d jobs; want one", len(wf.Jobs))}
	}
	var steps []*actionlint.Step
	for _, j := range wf.Jobs {
		steps = j.Steps
	}
	ps := staticProblems(wf, steps)
	compare := slices.IndexFunc(steps, func(s *actionlint.Step) bool { return orchestrateLine(runScript(s)) != "" })
	if compare < 0 {
		return append(ps, "no run step runs orchestrate")
	}
	upload := slices.IndexFunc(steps, func(s *actionlint.Step) bool { return strings.HasPrefix(uses(s), "actions/upload-artifact@") })
	if upload >= 0 && upload < compare {
		ps = append(ps, "the artifact is uploaded before orchestrate runs")
	}
	script := runScript(steps[compare])
	if strings.Contains(script, "${{") {
		// The test runs the script as it is; GitHub would substitute first.
		ps = append(ps, "the compare step's script holds a ${{ }} expression: pass values through env instead")
	}
	return append(ps, runProblems(t, script, orchestrate)...)
}

// staticProblems checks what the syntax tree shows: the trigger, the two
// checkouts, the two builds and the upload.
func staticProblems(wf *actionlint.Workflow, steps []*actionlint.Step) []string {
	var ps []string
	if !slices.ContainsFunc(wf.On, func(e actionlint.Event) bool {
		h, ok := e.(*actionlint.WebhookEvent)
		return ok && h.Hook.Value == "pull_request"
	}) {
		ps = append(ps, "does not run on pull_request")
	}
	checkouts := map[string]*actionlint.Step{}
	for _, s := range steps {
		if strings.HasPrefix(uses(s), "actions/checkout@") {
			checkouts[input(s, "path")] = s
		}
	}
	for _, dir := range []string{"base", "head"} {
		s, ok := checkouts[dir]
		if !ok {
			ps = append(ps, fmt.Sprintf("no actions/checkout with path: %s", dir))
			continue
		}
		if input(s, "submodules") != "recursive" {
			ps = append(ps, fmt.Sprintf("the %s checkout lacks submodules: recursive (Relay builds from its submodules)", dir))
		}
		atBase := strings.Contains(input(s, "ref"), "github.event.pull_request.base.sha")
		if dir == "base" && !atBase {
			ps = append(ps, "the base checkout's ref is not ${{ github.event.pull_request.base.sha }}")
		}
		if dir == "head" && atBase {
			ps = append(ps, "the head checkout is at the base.sha")
		}
	}
	built := map[string]bool{}
	for _, s := range steps {
		dir := ""
		if r, ok := s.Exec.(*actionlint.ExecRun); ok && r.WorkingDirectory != nil {
			dir = r.WorkingDirectory.Value
		}
		for line := range strings.SplitSeq(runScript(s), "\n") {
			line = strings.TrimSpace(line)
			if d, ok := strings.CutPrefix(line, "cd "); ok {
				dir = d
			}
			if strings.HasPrefix(line, "cargo build --release -p relay") {
				built[dir] = true
			}
		}
	}
	for _, dir := range []string{"base", "head"} {
		if !built[dir] {
			ps = append(ps, fmt.Sprintf("no step runs cargo build --release -p relay in %s/", dir))
		}
	}
	i := slices.IndexFunc(steps, func(s *actionlint.Step) bool { return strings.HasPrefix(uses(s), "actions/upload-artifact@") })
	if i < 0 {
		return append(ps, "no actions/upload-artifact step")
	}
	if s := steps[i]; s.If == nil || strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s.If.Value, "${{"), "}}")) != "always()" {
		ps = append(ps, "the artifact upload lacks if: always(): a failed or inconclusive run's report would be lost")
	}
	if p := strings.TrimSuffix(input(steps[i], "path"), "/"); p != "out" {
		ps = append(ps, fmt.Sprintf("the artifact's path is %q, not out/", p))
	}
	return ps
}

// uses is a step's action, or "" for a run step.
func uses(s *actionlint.Step) string {
	if a, ok := s.Exec.(*actionlint.ExecAction); ok && a.Uses != nil {
		return a.Uses.Value
	}
	return ""
}

// input is the value of an action step's input, or "".
func input(s *actionlint.Step, name string) string {
	if a, ok := s.Exec.(*actionlint.ExecAction); ok {
		if in := a.Inputs[name]; in != nil && in.Value != nil {
			return in.Value.Value
		}
	}
	return ""
}

// runScript is a run step's script, or "".
func runScript(s *actionlint.Step) string {
	if r, ok := s.Exec.(*actionlint.ExecRun); ok && r.Run != nil {
		return r.Run.Value
	}
	return ""
}

// orchestrateLine is the script's line that runs orchestrate (continued
// lines joined), or "".
func orchestrateLine(script string) string {
	for line := range strings.SplitSeq(strings.ReplaceAll(script, "\\\n", " "), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "orchestrate ") {
			return line
		}
	}
	return ""
}

// fakeOrchestrate stands in for orchestrate in the compare step: it keeps
// its arguments, one a line, in $FAKE_ARGS, writes a report.md into --out
// (not on bad usage, as orchestrate does not), says a verdict line on
// stderr as orchestrate does, and exits with $FAKE_STATUS.
const fakeOrchestrate = `#!/bin/sh
out= prev=
for a in "$@"; do
	printf '%s\n' "$a" >> "$FAKE_ARGS"
	[ "$prev" = --out ] && out=$a
	case $a in --out=*) out=${a#--out=} ;; esac
	prev=$a
done
if [ "$FAKE_STATUS" != 2 ] && [ -n "$out" ]; then
	mkdir -p "$out" && printf '# Relay load test\n\nFAKE-REPORT\n' > "$out/report.md"
fi
echo "a progress line"
echo "orchestrate: FAKE-VERDICT $FAKE_STATUS" >&2
exit "$FAKE_STATUS"
`

// run is one run of the compare step's script with the fake orchestrate.
type run struct {
	code            int    // the script's exit status
	output, summary string // what it printed; what it wrote to $GITHUB_STEP_SUMMARY
	args            []string
	report          bool // the fake wrote a report.md where the artifact is taken from
}

// runCompare runs script as GitHub Actions runs a bash step (bash
// --noprofile --norc -eo pipefail), in a fresh directory, with the fake
// orchestrate exiting with status.
func runCompare(t *testing.T, script string, status int) run {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	work := filepath.Join(dir, "work")
	for _, d := range []string{bin, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "orchestrate"), []byte(fakeOrchestrate), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "step.sh")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	summary, args := filepath.Join(dir, "summary.md"), filepath.Join(dir, "args")
	cmd := exec.CommandContext(t.Context(), "bash", "--noprofile", "--norc", "-eo", "pipefail", file)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GITHUB_STEP_SUMMARY="+summary, "FAKE_ARGS="+args, fmt.Sprintf("FAKE_STATUS=%d", status))
	out, err := cmd.CombinedOutput()
	r := run{output: string(out)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running the compare step: %v", err)
	}
	if b, err := os.ReadFile(summary); err == nil {
		r.summary = string(b)
	}
	if b, err := os.ReadFile(args); err == nil {
		r.args = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	_, err = os.Stat(filepath.Join(work, "out", "report.md"))
	r.report = err == nil
	return r
}

// runProblems runs the compare step's script once per exit status of
// orchestrate and checks what the check's result, the annotations and the
// summary are, and the flags orchestrate was given.
func runProblems(t *testing.T, script, orchestrate string) []string {
	t.Helper()
	var ps []string
	for _, tc := range []struct {
		status   int
		passes   bool
		annotate string // the annotation the step must print, if any
	}{
		{0, true, ""},
		{1, false, "::error"},
		{2, false, ""},
		{3, true, "::warning"},
		{130, false, ""},
	} {
		r := runCompare(t, script, tc.status)
		if got := r.code == 0; got != tc.passes {
			ps = append(ps, fmt.Sprintf("orchestrate's exit %d: the step exits %d; want it to %s\n%s",
				tc.status, r.code, map[bool]string{true: "pass", false: "fail"}[tc.passes], r.output))
		}
		if tc.annotate != "" && !strings.Contains(r.output, tc.annotate) {
			ps = append(ps, fmt.Sprintf("orchestrate's exit %d: no %s annotation", tc.status, tc.annotate))
		}
		if tc.status == 0 && (strings.Contains(r.output, "::error") || strings.Contains(r.output, "::warning")) {
			ps = append(ps, "orchestrate's exit 0: the step annotates a pass")
		}
		if !strings.Contains(r.summary, fmt.Sprintf("exit %d", tc.status)) {
			ps = append(ps, fmt.Sprintf("orchestrate's exit %d: the step summary does not give it: %q", tc.status, r.summary))
		}
		if !strings.Contains(r.summary, fmt.Sprintf("orchestrate: FAKE-VERDICT %d", tc.status)) {
			ps = append(ps, fmt.Sprintf("orchestrate's exit %d: the step summary lacks orchestrate's verdict lines", tc.status))
		}
		if tc.status != 2 && !strings.Contains(r.summary, "FAKE-REPORT") {
			ps = append(ps, fmt.Sprintf("orchestrate's exit %d: the step summary lacks report.md", tc.status))
		}
		if tc.status == 0 {
			ps = append(ps, argProblems(t, r.args, orchestrate)...)
			if !r.report {
				ps = append(ps, "report.md is not in out/, where the artifact is taken from")
			}
		}
	}
	return ps
}

// argProblems checks orchestrate's arguments: the builds are the two
// checkouts' binaries, the comparison has a budget and a threshold, the
// report goes to out/, and orchestrate accepts them all.
func argProblems(t *testing.T, args []string, orchestrate string) []string {
	t.Helper()
	var ps []string
	flags := map[string]string{}
	for i, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, value, eq := strings.Cut(name, "=")
		if !eq && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			value = args[i+1]
		}
		flags[name] = value
	}
	for name, want := range map[string]string{
		"relay-bin": "base/target/release/relay",
		"compare":   "head=head/target/release/relay",
		"out":       "out",
	} {
		if got := flags[name]; got != want {
			ps = append(ps, fmt.Sprintf("orchestrate's --%s is %q; want %q", name, got, want))
		}
	}
	for _, name := range []string{"budget", "fail-on"} {
		if flags[name] == "" {
			ps = append(ps, fmt.Sprintf("orchestrate runs without --%s", name))
		}
	}
	if usage := badUsage(t, args, orchestrate); usage != "" {
		ps = append(ps, "orchestrate rejects the recipe's arguments: "+usage)
	}
	return ps
}

// stubRelay exits at once, as a Relay that cannot start does.
const stubRelay = "#!/bin/sh\nexit 1\n"

// badUsage runs the real orchestrate with args where both builds are a
// Relay that exits at once: orchestrate checks every flag and value before
// it starts anything (exit 2, its error on stderr), and otherwise the run
// ends when the first Relay does. It returns orchestrate's complaint, or ""
// when it took the arguments.
func badUsage(t *testing.T, args []string, orchestrate string) string {
	t.Helper()
	dir := t.TempDir()
	for _, build := range []string{"base", "head"} {
		rel := filepath.Join(dir, build, "target", "release")
		if err := os.MkdirAll(rel, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rel, "relay"), []byte(stubRelay), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), orchestrate, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return ""
	case !errors.As(err, &exit):
		t.Fatalf("running orchestrate: %v", err)
	case exit.ExitCode() != 2:
		return ""
	}
	var lines []string
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		if strings.HasPrefix(line, "orchestrate: ") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "; ")
}
