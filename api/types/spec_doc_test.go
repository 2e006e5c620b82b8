package types

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// specField is one JSON field of the Spec tree: its path, and whether
// its declaration carries a doc comment of its own.
type specField struct {
	path       string
	documented bool
	// section is set for a field that holds a sub-spec (e.g. "dp").
	section bool
}

// specFields parses this package's source and walks Spec's fields by
// their JSON names, into every struct of the package they hold.
func specFields(t *testing.T) []specField {
	t.Helper()
	fset := token.NewFileSet()
	structs := map[string]*ast.StructType{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	var out []specField
	var walk func(typ, prefix string)
	walk = func(typ, prefix string) {
		st, ok := structs[typ]
		if !ok {
			t.Fatalf("no struct %s in package types", typ)
		}
		for _, f := range st.Fields.List {
			if f.Tag == nil || len(f.Names) != 1 {
				t.Fatalf("%s: every field of a Spec struct is named once and tagged", typ)
			}
			tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`"))
			name, _, _ := strings.Cut(tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			path := prefix + name
			id, ok := f.Type.(*ast.Ident)
			section := ok && structs[id.Name] != nil
			out = append(out, specField{path: path, documented: f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "", section: section})
			if section {
				walk(id.Name, path+".")
			}
		}
	}
	walk("Spec", "")
	return out
}

// The Spec's godoc is the reference of the job spec: every JSON field,
// at every depth, has a doc comment of its own.
func TestEverySpecFieldDocumented(t *testing.T) {
	fields := specFields(t)
	if len(fields) < 80 || !slices.ContainsFunc(fields, func(f specField) bool { return f.path == "dp.noise_multiplier" }) {
		t.Fatalf("walked %d fields, want the whole spec (dp.noise_multiplier among them)", len(fields))
	}
	for _, f := range fields {
		if !f.documented {
			t.Errorf("%s has no doc comment", f.path)
		}
	}
}

// docs/job-spec.md, the index of the spec, names every JSON path of a
// value (the sections, such as dp, are named by their fields).
func TestJobSpecPageNamesEveryField(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "job-spec.md"))
	if err != nil {
		t.Fatalf("docs/job-spec.md: %v", err)
	}
	page := string(b)
	for _, f := range specFields(t) {
		if !f.section && !strings.Contains(page, "`"+f.path+"`") {
			t.Errorf("docs/job-spec.md does not name `%s`", f.path)
		}
	}
}
