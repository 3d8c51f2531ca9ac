package archdoc

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// archDoc is the document whose API table is checked, from the module root.
const archDoc = "docs/architecture.md"

// tableHeading starts the section that holds the API table.
const tableHeading = "## Public packages"

// standardMethods are methods that satisfy a standard interface (error,
// fmt.Stringer, the encoding and json marshalers): exported by necessity,
// not API to list. The table may still name them.
var standardMethods = []string{
	"Error", "Unwrap", "String", "GoString", "Format",
	"MarshalJSON", "UnmarshalJSON", "MarshalText", "UnmarshalText", "MarshalBinary", "UnmarshalBinary",
}

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

// apiName is a name as the table writes it: an exported identifier, a
// method as Type.Method, either optionally ending in * (every exported name
// with that prefix).
var apiName = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*(\.[A-Z][A-Za-z0-9_]*)?\*?$`)

// backticked finds `…` spans in a table cell.
var backticked = regexp.MustCompile("`([^`]+)`")

// table reads the API table: package → the names its row gives. A row is
// "| `pkg` | text with `Name`, `Type.Method`, `Prefix*` … |"; backticked
// spans that are not exported Go names (file names, JSON) are prose.
func table(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.HasPrefix(line, tableHeading)
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 2 {
			continue
		}
		pkg := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if _, dup := rows[pkg]; dup {
			t.Errorf("%s: package %s has two rows", path, pkg)
		}
		rows[pkg] = []string{}
		for _, m := range backticked.FindAllStringSubmatch(strings.Join(cells[1:], "|"), -1) {
			if apiName.MatchString(m[1]) {
				rows[pkg] = append(rows[pkg], m[1])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no API table under %q", path, tableHeading)
	}
	return rows
}

// exported is what the package in dir exports, read from its non-test
// source with go/doc: functions, types, constants, variables, and methods
// as Type.Method. The table must name each of names; it may also name the
// standard interface methods in optional. Files for every platform count.
func exported(t *testing.T, dir string) (names, optional []string) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("%s: no Go files", dir)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/relayload/relayload/"+filepath.Base(dir))
	if err != nil {
		t.Fatal(err)
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			for _, n := range v.Names {
				if token.IsExported(n) {
					names = append(names, n)
				}
			}
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			names = append(names, f.Name)
		}
	}
	values(p.Consts)
	values(p.Vars)
	funcs(p.Funcs)
	for _, ty := range p.Types {
		names = append(names, ty.Name)
		values(ty.Consts)
		values(ty.Vars)
		funcs(ty.Funcs)
		for _, m := range ty.Methods {
			if slices.Contains(standardMethods, m.Name) {
				optional = append(optional, ty.Name+"."+m.Name)
			} else {
				names = append(names, ty.Name+"."+m.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), optional
}

// covers reports whether a table entry names name.
func covers(entry, name string) bool {
	if prefix, ok := strings.CutSuffix(entry, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return entry == name
}

// TestAPITableMatchesExports: the table in docs/architecture.md names
// every exported name of every public package (the module's packages
// outside internal/, cmd/ and the test-only e2e and interop), and nothing
// they do not export.
func TestAPITableMatchesExports(t *testing.T) {
	root := moduleRoot(t)
	rows := table(t, filepath.Join(root, archDoc))
	public := publicPackages(t, root)
	for _, pkg := range public {
		if _, ok := rows[pkg]; !ok {
			t.Errorf("%s has no row for public package %s", archDoc, pkg)
		}
	}
	for pkg, entries := range rows {
		if !slices.Contains(public, pkg) {
			t.Errorf("%s has a row for %s, which is not a public package of the module (public: %s)", archDoc, pkg, strings.Join(public, ", "))
			continue
		}
		names, optional := exported(t, filepath.Join(root, pkg))
		all := append(slices.Clone(names), optional...)
		var missing, stale []string
		for _, n := range names {
			if !slices.ContainsFunc(entries, func(e string) bool { return covers(e, n) }) {
				missing = append(missing, n)
			}
		}
		for _, e := range entries {
			if !slices.ContainsFunc(all, func(n string) bool { return covers(e, n) }) {
				stale = append(stale, e)
			}
		}
		if len(missing) > 0 || len(stale) > 0 {
			var b strings.Builder
			fmt.Fprintf(&b, "%s: the row for %s does not match the package's exported names", archDoc, pkg)
			if len(missing) > 0 {
				fmt.Fprintf(&b, "\n  exported but not in the table (+): %s", strings.Join(missing, ", "))
			}
			if len(stale) > 0 {
				fmt.Fprintf(&b, "\n  in the table but not exported (−): %s", strings.Join(stale, ", "))
			}
			t.Error(b.String())
		}
	}
}

// publicPackages are the module's top-level directories holding a non-test
// Go package, other than the commands, the internal tree and the suites
// that only test (e2e, interop).
func publicPackages(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || strings.HasPrefix(n, ".") || slices.Contains([]string{"cmd", "internal", "e2e", "interop", "docs", "scripts", "testdata"}, n) {
			continue
		}
		goFiles, _ := filepath.Glob(filepath.Join(root, n, "*.go"))
		if slices.ContainsFunc(goFiles, func(f string) bool { return !strings.HasSuffix(f, "_test.go") }) {
			pkgs = append(pkgs, n)
		}
	}
	return pkgs
}
