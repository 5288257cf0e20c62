package protocol

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"testing"
)

// TestProblemTypes checks every problem type constant: a slug of lower-case words
// joined by hyphens after ProblemBase, a doc comment, and a title no other type has
// (ProblemInternal's is the one of an unknown type).
func TestProblemTypes(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "problem.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	slug := regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)
	titles := map[string]string{ProblemTitle("unknown"): "ProblemInternal"}
	n := 0
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
			n++
			name := vs.Names[0].Name
			s, err := strconv.Unquote(bin.Y.(*ast.BasicLit).Value)
			if err != nil || !slug.MatchString(s) {
				t.Errorf("%s: %q is not a slug", name, s)
			}
			if vs.Doc == nil {
				t.Errorf("%s has no doc comment", name)
			}
			if ProblemSlug(ProblemBase+s) != s {
				t.Errorf("ProblemSlug of %s = %q", name, ProblemSlug(ProblemBase+s))
			}
			title := ProblemTitle(ProblemBase + s)
			if other, ok := titles[title]; ok && !(name == "ProblemInternal" && other == name) {
				t.Errorf("%s has the title of %s: %q", name, other, title)
			}
			titles[title] = name
		}
	}
	if n < 25 {
		t.Fatalf("found %d problem types: the source walk is out of date", n)
	}
}

// TestProblemJSON pins the members of a problem document: RFC 9457's four, always
// sent, then oncebox's extensions, sent only when set.
func TestProblemJSON(t *testing.T) {
	t.Parallel()
	p := NewProblem(409, ProblemWrongState, "Only an op that awaits approval can be approved.")
	p.OpStatus = "pending"
	got, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"https://oncebox.dev/problems/wrong-state","title":"Op is not in the state this action needs","status":409,` +
		`"detail":"Only an op that awaits approval can be approved.","op_status":"pending"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	all := Problem{Field: "f", Rule: "r", KnownTools: []string{"t"}, StoredFingerprint: "s", GivenFingerprint: "g", OpStatus: "o", Budget: "b"}
	got, err = json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"type":"","title":"","status":0,"detail":"","field":"f","rule":"r","known_tools":["t"],` +
		`"stored_fingerprint":"s","given_fingerprint":"g","op_status":"o","budget":"b"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
