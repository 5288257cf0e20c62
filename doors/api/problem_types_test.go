package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
)

// requireProblemTypesDocumented checks the problem types the API answers, read from
// the source of its handlers (this package and vendorevents, whose endpoints the
// document also describes): each is a constant of package protocol, named as such
// (no string slug), with its own title, and the document names it.
func requireProblemTypesDocumented(t *testing.T, doc []byte) {
	t.Helper()
	declared := protocolProblemTypes(t)
	used := map[string]string{}
	for _, dir := range []string{".", "../vendorevents"} {
		for name, at := range problemTypesUsed(t, dir, declared) {
			used[name] = at
		}
	}
	require.Greater(t, len(used), 20, "found too few problem types in the handlers: the source walk is out of date")
	for name, at := range used {
		slug := protocol.ProblemSlug(declared[name])
		if declared[name] != protocol.ProblemInternal { // Its title is that of every type protocol does not know.
			require.NotEqual(t, protocol.ProblemTitle(""), protocol.ProblemTitle(declared[name]),
				"%s: protocol.%s has no title of its own", at, name)
		}
		mentioned := regexp.MustCompile(`(^|[^a-z-])` + regexp.QuoteMeta(slug) + `([^a-z-]|$)`)
		require.True(t, mentioned.Match(doc), "%s answers protocol.%s, which the OpenAPI document does not name (%q)", at, name, slug)
	}
}

// protocolProblemTypes returns protocol's problem type constants by name, read from
// its source.
func protocolProblemTypes(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../protocol/problem.go", nil, 0)
	require.NoError(t, err)
	types := map[string]string{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			bin, ok := vs.Values[0].(*ast.BinaryExpr)
			if !ok {
				continue
			}
			lit := bin.Y.(*ast.BasicLit)
			slug, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			types[vs.Names[0].Name] = protocol.ProblemBase + slug
		}
	}
	require.NotEmpty(t, types)
	return types
}

// problemTypesUsed returns the protocol problem types the non-test files of dir name,
// each with where it is first named, and fails on a string literal that spells a
// problem type or its slug.
func problemTypesUsed(t *testing.T, dir string, declared map[string]string) map[string]string {
	t.Helper()
	slugs := map[string]bool{}
	for _, v := range declared {
		slugs[protocol.ProblemSlug(v)] = true
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	used := map[string]string{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "protocol" && declared[n.Sel.Name] != "" {
					if _, seen := used[n.Sel.Name]; !seen {
						used[n.Sel.Name] = fset.Position(n.Pos()).String()
					}
				}
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING {
					require.False(t, slugs[s] || strings.Contains(s, protocol.ProblemBase),
						"%s spells the problem type %q; name its protocol constant", fset.Position(n.Pos()), s)
				}
			}
			return true
		})
	}
	return used
}
