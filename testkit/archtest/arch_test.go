package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The limit on long functions, and the ones allowed to stay long, each a table or a
// flat list (TestFunctionLengths).
const (
	// maxLines is the most lines a function may have (its signature to its closing
	// brace) unless allowLong names it.
	maxLines = 80
	// maxLong is how many functions over maxLines may stay, each in allowLong.
	maxLong = 5
)

// allowLong are the functions over maxLines that may stay so, by "path:Func" (a method
// as "path:Type.Method"), each a table or a flat list.
var allowLong = map[string]string{
	"cmd/oncebox/settings.go:settings": "a table: one entry per serve setting (flag, variable, default, doc)",
	"testkit/mutants/list.go:List":     "a table: one entry per mutant (file, old, new, tests that kill it)",
	"cmd/oncebox/main.go:usage":        "a flat list: one entry per command, in the text oncebox help prints",
}

// longExempt are the trees whose functions are not counted: the fakes, the chaos
// harness and the benchmarks.
var longExempt = []string{"devkit/fakestripe/...", "devkit/fakesendgrid/...", "devkit/fakewebhook/...", "devkit/fakemcp/...",
	"examples/custom-vendor/fakesms/...", "cmd/oncebox-chaos/...", "devkit/bench/..."}

// layers are the top-level folders that are one layer each, and the title of the
// package map's table their packages are in (TestLayersByFolder).
var layers = map[string]string{
	"testkit/":  "Test kit",
	"devkit/":   "Dev kit",
	"doors/":    "Doors",
	"internal/": "The core's private leaves",
}

const module = "github.com/oncebox/oncebox"

// row is one row of the package map: the packages it is for, what they may import,
// and what their tests may import besides.
type row struct {
	// index is the row's place in the map, from the top (0) down.
	index    int
	table    string
	patterns []string
	may      []string
	testsToo []string
}

// pkg is one package of the module as go list sees it, its path relative to the
// module ("." for the root).
type pkg struct {
	path    string
	imports []string
	tests   []string
}

// root is the module's root.
func root(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	return dir
}

// match reports whether the package path p matches pattern: "x/..." is x and every
// package under it, "x*" every path starting with x, anything else the path itself.
func match(pattern, p string) bool {
	switch {
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		return p == base || strings.HasPrefix(p, base+"/")
	case strings.HasSuffix(pattern, "*"):
		return strings.HasPrefix(p, strings.TrimSuffix(pattern, "*"))
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// backquoted returns the `...` spans of a table cell.
func backquoted(cell string) []string {
	var out []string
	for {
		a := strings.Index(cell, "`")
		if a < 0 {
			return out
		}
		b := strings.Index(cell[a+1:], "`")
		if b < 0 {
			return out
		}
		out = append(out, cell[a+1:a+1+b])
		cell = cell[a+2+b:]
	}
}

// readMap parses the tables of docs/architecture.md's "## Packages" section. Each
// table's title is the paragraph before it ("Binaries", "Test kit", "Dev kit", "Doors", …).
func readMap(t testing.TB) []row {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "architecture.md"))
	require.NoError(t, err)
	var rows []row
	in, title, paragraphStarts := false, "", true
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Packages"
			continue
		case !in:
			continue
		case strings.TrimSpace(line) == "":
			paragraphStarts = true
			continue
		case !strings.HasPrefix(line, "|"):
			if paragraphStarts {
				title = line // a table's title is the first line of the paragraph before it
			}
			paragraphStarts = false
			continue
		}
		paragraphStarts = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") || strings.TrimSpace(cells[0]) == "package" {
			continue
		}
		rows = append(rows, row{index: len(rows), table: title, patterns: backquoted(cells[0]),
			may: backquoted(cells[2]), testsToo: backquoted(cells[3])})
	}
	require.NotEmpty(t, rows, "docs/architecture.md has no package map under ## Packages")
	return rows
}

// inKit reports whether r is in the test kit's or the dev kit's table, whose
// packages any test may import.
func (r row) inKit() bool {
	return strings.HasPrefix(r.table, "Test kit") || strings.HasPrefix(r.table, "Dev kit")
}

// rowOf returns the row that lists p, or false.
func rowOf(rows []row, p string) (row, bool) {
	for _, r := range rows {
		if matchAny(r.patterns, p) {
			return r, true
		}
	}
	return row{}, false
}

// listPackages lists the module's packages and their imports of the module's own
// packages: non-test files' apart from test files' (in-package and external).
func listPackages(t testing.TB) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = root(t)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	require.NoError(t, err)
	own := func(paths []string) []string {
		var o []string
		for _, p := range paths {
			if p == module || strings.HasPrefix(p, module+"/") {
				o = append(o, rel(p))
			}
		}
		return o
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var j struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		require.NoError(t, dec.Decode(&j))
		p := pkg{path: rel(j.ImportPath), imports: own(j.Imports)}
		for _, ti := range own(append(j.TestImports, j.XTestImports...)) {
			if ti != p.path && !slices.Contains(p.imports, ti) && !slices.Contains(p.tests, ti) {
				p.tests = append(p.tests, ti)
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

// TestPackageMap: every package of the module is in docs/architecture.md's package
// map, every row names a package that exists, and every import of the module's own
// packages is one the importer's row allows (a test file's: its row's, the test
// kit's, or its row's "its tests also").
func TestPackageMap(t *testing.T) {
	t.Parallel()
	rows := readMap(t)
	pkgs := listPackages(t)
	var kit []string
	for _, r := range rows {
		if r.inKit() {
			kit = append(kit, r.patterns...)
		}
	}
	for _, r := range rows {
		for _, pat := range r.patterns {
			if !slices.ContainsFunc(pkgs, func(p pkg) bool { return match(pat, p.path) }) {
				t.Errorf("docs/architecture.md's package map lists %s, which matches no package of the module: drop or fix its row", pat)
			}
		}
	}
	for _, p := range pkgs {
		r, ok := rowOf(rows, p.path)
		if !ok {
			t.Errorf("package %s is not in the package map of docs/architecture.md: add a row (its role and what it may import)", p.path)
			continue
		}
		for _, imp := range p.imports {
			if !matchAny(r.may, imp) {
				t.Errorf("package %s imports %s, which its row of the package map (docs/architecture.md) does not allow: change the import, or the map", p.path, imp)
			}
		}
		for _, imp := range p.tests {
			if !matchAny(r.may, imp) && !matchAny(kit, imp) && !matchAny(r.testsToo, imp) {
				t.Errorf("the tests of package %s import %s, which its row of the package map (docs/architecture.md) does not allow (not in may import, the test kit, or its tests also)", p.path, imp)
			}
		}
	}
}

// TestLayersByFolder: the tree shows the layers. Every package under testkit/,
// devkit/, doors/ and internal/ is in that layer's table of the package map, and
// that table lists no package of another folder (vendortest, the public conformance
// suite, is the test kit's one package outside testkit/).
func TestLayersByFolder(t *testing.T) {
	t.Parallel()
	rows, pkgs := readMap(t), listPackages(t)
	for _, p := range pkgs {
		r, ok := rowOf(rows, p.path)
		if !ok {
			continue // TestPackageMap says so
		}
		for folder, title := range layers {
			if strings.HasPrefix(p.path, folder) && !strings.HasPrefix(r.table, title) {
				t.Errorf("package %s is in the table %q of docs/architecture.md's package map; every package under %s belongs in the table %q", p.path, r.table, folder, title)
			}
			if !strings.HasPrefix(p.path, folder) && strings.HasPrefix(r.table, title) && p.path != "vendortest" {
				t.Errorf("package %s is in the table %q of docs/architecture.md's package map, which is for the packages under %s: move the package or its row", p.path, r.table, folder)
			}
		}
	}
}

// longFunc is a function over maxLines.
type longFunc struct {
	key   string
	lines int
}

// longFuncs lists the non-test functions over maxLines outside longExempt, longest
// first.
func longFuncs(t testing.TB) []longFunc {
	t.Helper()
	dir := root(t)
	fset := token.NewFileSet()
	var out []longFunc
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		r, _ := filepath.Rel(dir, path)
		r = filepath.ToSlash(r)
		if matchAny(longExempt, filepath.ToSlash(filepath.Dir(r))) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxLines {
				out = append(out, longFunc{key: r + ":" + funcName(fd), lines: n})
			}
		}
		return nil
	})
	require.NoError(t, err)
	sort.Slice(out, func(i, j int) bool { return out[i].lines > out[j].lines })
	return out
}

// funcName is "Func", or "Type.Method" for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// TestFunctionLengths: at most maxLong non-test functions outside the fakes, the
// chaos harness and the benchmarks are over maxLines lines, and each is in allowLong
// (a table or a flat list).
func TestFunctionLengths(t *testing.T) {
	t.Parallel()
	long := longFuncs(t)
	for _, f := range long {
		if _, ok := allowLong[f.key]; !ok {
			t.Errorf("%s is %d lines (over %d): split it, or, if it is a table or a flat list, add it to allowLong with a comment saying so", f.key, f.lines, maxLines)
		}
	}
	require.LessOrEqual(t, len(long), maxLong, "functions over %d lines: %v", maxLines, long)
}

// TestAllowLongIsCurrent: every function allowLong names exists and is still over
// maxLines, so the list does not outlive the functions it excuses.
func TestAllowLongIsCurrent(t *testing.T) {
	t.Parallel()
	long := longFuncs(t)
	for key := range allowLong {
		if !slices.ContainsFunc(long, func(f longFunc) bool { return f.key == key }) {
			t.Errorf("allowLong names %s, which is not a function over %d lines (any more): drop it", key, maxLines)
		}
	}
}

// backUp returns the import arrows that run back up the map: from a package to one
// whose row is above its own. Test files' arrows to the test kit are not counted.
func backUp(rows []row, pkgs []pkg, tests bool) []string {
	var out []string
	for _, p := range pkgs {
		from, ok := rowOf(rows, p.path)
		if !ok {
			continue
		}
		imps := p.imports
		if tests {
			imps = p.tests
		}
		for _, imp := range imps {
			to, ok := rowOf(rows, imp)
			if !ok || to.index >= from.index || (tests && to.inKit()) {
				continue
			}
			out = append(out, p.path+" → "+imp)
		}
	}
	return out
}

// TestNoArrowBackUp: no non-test file imports a package above its own row, and no
// row's "may import" names one.
func TestNoArrowBackUp(t *testing.T) {
	t.Parallel()
	rows, pkgs := readMap(t), listPackages(t)
	for _, arrow := range backUp(rows, pkgs, false) {
		t.Errorf("%s runs back up docs/architecture.md's package map: the imported package's row is above the importer's", arrow)
	}
	for _, r := range rows {
		for _, p := range pkgs {
			if to, ok := rowOf(rows, p.path); ok && to.index < r.index && matchAny(r.may, p.path) {
				t.Errorf("the package map lets %v import %s, whose row is above theirs: move the row, or drop the import", r.patterns, p.path)
			}
		}
	}
}

// exported counts the exported identifiers of the non-test files of the package in
// dir: top-level types, functions, constants and variables; methods of any type; and
// fields of exported struct types.
func exported(t testing.TB, dir string) (topLevel, methods, fields int) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				switch {
				case !d.Name.IsExported():
				case d.Recv == nil:
					topLevel++
				default:
					methods++
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						topLevel++
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								for _, n := range fld.Names {
									if n.IsExported() {
										fields++
									}
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								topLevel++
							}
						}
					}
				}
			}
		}
	}
	return topLevel, methods, fields
}

// TestCounts logs what a refactor of the layout watches (go test -run TestCounts -v):
// package outbox's exported identifiers, the functions over maxLines (outside the
// fakes, chaos and bench), and the import arrows that run back up the map.
func TestCounts(t *testing.T) {
	t.Parallel()
	top, methods, fields := exported(t, filepath.Join(root(t), "outbox"))
	t.Logf("package outbox exports %d identifiers: %d top-level (types, funcs, consts, vars), %d methods, %d fields of exported structs",
		top+methods+fields, top, methods, fields)
	long := longFuncs(t)
	t.Logf("%d functions over %d lines (limit %d):", len(long), maxLines, maxLong)
	for _, f := range long {
		note := ""
		if why, ok := allowLong[f.key]; ok {
			note = "  [allowed: " + why + "]"
		}
		t.Logf("  %4d  %s%s", f.lines, f.key, note)
	}
	rows, pkgs := readMap(t), listPackages(t)
	up, upTests := backUp(rows, pkgs, false), backUp(rows, pkgs, true)
	t.Logf("%d import arrows back up the map in non-test files: %v", len(up), up)
	t.Logf("%d in test files (arrows to the test kit not counted): %v", len(upTests), upTests)
}
