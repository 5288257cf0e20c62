package mutants

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tinyModule writes a module with one function and a test of it.
func tinyModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":      "module example.com/tiny\n\ngo 1.22\n",
		"add.go":      "package tiny\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
		"add_test.go": "package tiny\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal(\"2+2\")\n\t}\n}\n\nfunc TestNothing(t *testing.T) {}\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

func TestRunVerdicts(t *testing.T) {
	t.Parallel()
	root := tinyModule(t)
	var out bytes.Buffer
	results, err := Run(context.Background(), Config{Root: root, Timeout: 2 * time.Minute, Out: &out, Mutants: []Mutant{
		{Name: "killed", File: "add.go", Old: "a + b", New: "a - b", Packages: []string{"./"}, Tests: []string{"TestAdd"}},
		{Name: "survives", File: "add.go", Old: "a + b", New: "b + a", Packages: []string{"./"}, Tests: []string{"TestAdd"}},
		{Name: "untested", File: "add.go", Old: "a + b", New: "a - b", Packages: []string{"./"}, Tests: []string{"TestNothing"}},
		{Name: "drifted", File: "add.go", Old: "a * b", New: "a", Packages: []string{"./"}, Tests: []string{"TestAdd"}},
		{Name: "broken", File: "add.go", Old: "a + b", New: "a +", Packages: []string{"./"}, Tests: []string{"TestAdd"}},
	}})
	require.NoError(t, err, out.String())
	got := map[string]Verdict{}
	for _, r := range results {
		got[r.Mutant.Name] = r.Verdict
	}
	require.Equal(t, map[string]Verdict{"killed": Killed, "survives": Survived, "untested": Survived, "drifted": NoApply,
		"broken": NoBuild}, got, out.String())

	// The original is untouched, and the scratch copy restored between mutants.
	b, err := os.ReadFile(filepath.Join(root, "add.go"))
	require.NoError(t, err)
	require.Contains(t, string(b), "a + b")
}

func TestRunRefusesAFailingBaseline(t *testing.T) {
	t.Parallel()
	root := tinyModule(t)
	require.NoError(t, os.WriteFile(filepath.Join(root, "add.go"), []byte("package tiny\n\n// Add adds.\nfunc Add(a, b int) int { return a * b + 1 }\n"), 0o644))
	_, err := Run(context.Background(), Config{Root: root, Timeout: 2 * time.Minute, Mutants: []Mutant{
		{Name: "m", File: "add.go", Old: "a * b", New: "a", Packages: []string{"./"}, Tests: []string{"TestAdd"}},
	}})
	require.ErrorContains(t, err, "fail without any mutant")
}

// TestListAppliesToThisModule: every named mutant's patch applies to the code as it
// is, so a change that moves a patched line fails here, in the ordinary tests, and
// not only in `make mutants`. Every mutant names its invariant, packages and tests.
func TestListAppliesToThisModule(t *testing.T) {
	t.Parallel()
	ms := List()
	require.NotEmpty(t, ms)
	names := map[string]bool{}
	for _, m := range ms {
		require.False(t, names[m.Name], "two mutants named %s", m.Name)
		names[m.Name] = true
		require.NotEmpty(t, m.Breaks, m.Name)
		require.NotEmpty(t, m.Packages, m.Name)
		require.NotEmpty(t, m.Tests, m.Name)
		require.NotEqual(t, m.Old, m.New, m.Name)
	}
	require.Empty(t, CheckApply(filepath.Join("..", ".."), ms))
}

// TestDriftSaysHowToReanchor: a mutant whose text is gone fails the check, and the
// message says where the text went, when it moved whole, and how to re-anchor it.
func TestDriftSaysHowToReanchor(t *testing.T) {
	t.Parallel()
	root := tinyModule(t)
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub.go"), []byte("package tiny\n\n// Sub subtracts.\nfunc Sub(a, b int) int { return a - b }\n"), 0o644))
	errs := CheckApply(root, []Mutant{
		{Name: "moved", File: "add.go", Old: "a - b", New: "a + b"},
		{Name: "gone", File: "add.go", Old: "a * b", New: "a"},
	})
	require.Len(t, errs, 2)
	require.ErrorContains(t, errs[0], "The text is now in sub.go: set the mutant's File to it")
	require.ErrorContains(t, errs[0], "-apply-only -only moved")
	require.ErrorContains(t, errs[1], `git log -S "a * b" --oneline -- add.go`)
	require.ErrorContains(t, errs[1], "never drop it")
}

// TestListNamesTestsThatExist: every test a mutant names is a test function of one of
// its packages, so moving a test to another package cannot leave a mutant that no test
// runs against (go test -run of a missing name passes, and the mutant would survive).
func TestListNamesTestsThatExist(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	for _, m := range List() {
		for _, name := range m.Tests {
			decl := []byte("func " + name + "(")
			found := false
			for _, pkg := range m.Packages {
				files, err := filepath.Glob(filepath.Join(root, pkg, "*_test.go"))
				require.NoError(t, err)
				for _, f := range files {
					b, err := os.ReadFile(f)
					require.NoError(t, err)
					found = found || bytes.Contains(b, decl)
				}
			}
			if !found {
				t.Errorf("mutant %s names test %s, which none of %v declares: point it at the package the test lives in now", m.Name, name, m.Packages)
			}
		}
	}
}
