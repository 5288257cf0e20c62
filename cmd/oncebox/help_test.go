package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// helpFlags are the flag names a --help output lists.
var helpFlags = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)

// TestEverySubcommandHelpShowsItsOwnFlags: `--help` of every subcommand of main.go exits
// 0; only serve and dev list the settings of a running server (--addr, workers, HTTP
// timeouts); and no secret of the environment is shown as a default.
func TestEverySubcommandHelpShowsItsOwnFlags(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=postgres://oncebox:pw-sentinel-db@127.0.0.1:1/x?sslmode=disable",
		"STRIPE_API_KEY=sk_sentinel_stripe", "SENDGRID_API_KEY=SG.sentinel_sendgrid", "ONCEBOX_SEAL_KEY=sentinel-seal"}
	serveOnly := []string{"addr", "roles", "stripe-workers", "http-write-timeout", "shutdown-grace", "admin-token", "purge-interval"}
	for _, c := range []string{"serve", "dev", "migrate", "tenant", "tenant policy", "policy", "lookup", "approve", "reject", "review",
		"reconcile", "mcp", "bench", "healthcheck", "config", "tools check", "version"} {
		out, errOut, code := runCLI(t, c+" --help", env...)
		text := out + errOut
		require.Equal(t, 0, code, "oncebox %s --help: %s", c, text)
		for _, s := range []string{"pw-sentinel-db", "sk_sentinel_stripe", "SG.sentinel_sendgrid", "sentinel-seal"} {
			require.NotContains(t, text, s, "oncebox %s --help shows a secret", c)
		}
		var names []string
		for _, m := range helpFlags.FindAllStringSubmatch(text, -1) {
			names = append(names, m[1])
		}
		require.NotEmpty(t, names, "oncebox %s --help lists its flags: %s", c, text)
		if c == "serve" || c == "dev" {
			require.Contains(t, names, "addr")
			continue
		}
		for _, f := range serveOnly {
			require.NotContains(t, names, f, "oncebox %s --help lists the serve-only --%s", c, f)
		}
		if strings.HasPrefix(c, "tenant") || c == "lookup" || c == "migrate" || c == "config" {
			require.Less(t, len(names), 12, "oncebox %s --help lists only its own flags: %v", c, names)
		}
	}
	_, errOut, _ := runCLI(t, "lookup --help", env...)
	names := []string{}
	for _, m := range helpFlags.FindAllStringSubmatch(errOut, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	require.Equal(t, []string{"cells", "database-url", "json", "log-format", "log-level", "tenant"}, names)
	require.Contains(t, errOut, "(from DATABASE_URL)")
}

// TestHelpListsEveryCommand walks the command tree as the code dispatches it (the
// literal verbs each run function and Main switch on) and requires `oncebox --help` to
// list every command and subcommand.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, "--help")
	require.Zero(t, code)
	help := out + errOut
	paths := commandTree(t)
	require.Contains(t, paths, "tenant vendor own", "the walk finds the subcommands")
	for _, p := range paths {
		re := regexp.MustCompile(`(?m)^  (?:[a-z]+\|)*` + regexp.QuoteMeta(p) + `(?:\||\s|$)`)
		require.Regexp(t, re, help, "oncebox --help does not list %q", p)
	}
}

// commandTree returns the command paths the package dispatches: for Main, every run…
// function and tenantCommand, the string literals its switches and comparisons test
// the first positional argument against, prefixed by the command the function runs
// (runTenantVendor: "tenant vendor").
func commandTree(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			prefix, ok := commandPrefix(fn.Name.Name)
			if !ok {
				continue
			}
			for _, verb := range dispatchVerbs(fn.Body) {
				seen[strings.TrimSpace(prefix+" "+verb)] = true
			}
		}
	}
	paths := make([]string, 0, len(seen))
	for p := range seen {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

// commandPrefix is the command a dispatching function runs: "" for Main, "tenant" for
// tenantCommand, the words of the name after "run" otherwise.
func commandPrefix(fn string) (string, bool) {
	switch {
	case fn == "Main":
		return "", true
	case fn == "tenantCommand":
		return "tenant", true
	case !strings.HasPrefix(fn, "run") || len(fn) == 3:
		return "", false
	}
	words := regexp.MustCompile(`[A-Z][a-z]*`).FindAllString(strings.TrimSuffix(fn[3:], "To"), -1)
	return strings.ToLower(strings.Join(words, " ")), true
}

// dispatchVerbs returns the string literals a function compares a command word with:
// the cases of `switch cmd` or `switch x[0]`, and `x[0] == "…"`; flags ("-h") and help
// are left out.
func dispatchVerbs(body *ast.BlockStmt) []string {
	var verbs []string
	isWord := func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.Ident:
			return e.Name == "cmd"
		case *ast.IndexExpr:
			lit, ok := e.Index.(*ast.BasicLit)
			return ok && lit.Value == "0"
		}
		return false
	}
	add := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			v, _ := strconv.Unquote(lit.Value)
			if v != "" && !strings.HasPrefix(v, "-") && v != "help" {
				verbs = append(verbs, v)
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SwitchStmt:
			if n.Tag != nil && isWord(n.Tag) {
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						add(e)
					}
				}
			}
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && isWord(n.X) {
				add(n.Y)
			}
		}
		return true
	})
	return verbs
}
