package s3store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestOnlyPinnedReads checks the package's structure: the S3 GetObject and
// HeadObject calls stand only in getVersion and headVersion (which set
// VersionId) and in Bucket's getBlob, openBlob and headBlob (store blobs by key), and
// only Bucket methods call the latter two. A new read path that skips the
// version has to change this test.
func TestOnlyPinnedReads(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]string{ // S3 call's enclosing function -> receiver
		"getVersion": "Client", "headVersion": "Client",
		"getBlob": "Bucket", "headBlob": "Bucket", "openBlob": "Bucket",
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			recv := receiver(fn)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pos := fset.Position(call.Pos())
				switch m := sel.Sel.Name; m {
				case "GetObject", "HeadObject":
					if allowed[fn.Name.Name] != recv {
						t.Errorf("%s: %s called in %s.%s; member reads must go through getVersion/headVersion", pos, m, recv, fn.Name.Name)
					}
					seen[fn.Name.Name] = true
					if recv == "Client" && !setsField(call, "VersionId") {
						t.Errorf("%s: %s in %s does not set VersionId", pos, m, fn.Name.Name)
					}
				case "getBlob", "headBlob", "openBlob":
					if recv != "Bucket" {
						t.Errorf("%s: %s called from %s.%s; only Bucket reads its blobs by key", pos, m, recv, fn.Name.Name)
					}
				}
				return true
			})
		}
	}
	for fn := range allowed {
		if !seen[fn] {
			t.Errorf("no S3 read found in %s: the test no longer matches the code", fn)
		}
	}
}

func receiver(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return ""
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// setsField reports whether the call's input sets field: a composite
// literal in the arguments, or the literal a variable argument was assigned
// from (in = &s3.GetObjectInput{...}).
func setsField(call *ast.CallExpr, field string) bool {
	var nodes []ast.Node
	for _, arg := range call.Args {
		nodes = append(nodes, arg)
		if id, ok := arg.(*ast.Ident); ok && id.Obj != nil {
			if as, ok := id.Obj.Decl.(*ast.AssignStmt); ok {
				for _, rhs := range as.Rhs {
					nodes = append(nodes, rhs)
				}
			}
		}
	}
	found := false
	for _, n := range nodes {
		ast.Inspect(n, func(n ast.Node) bool {
			if kv, ok := n.(*ast.KeyValueExpr); ok {
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == field {
					found = true
				}
			}
			return true
		})
	}
	return found
}
