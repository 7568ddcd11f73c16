// Package funclen finds functions that are too long to read, for tests
// that keep a package's functions short.
package funclen

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strings"
)

// Over returns "file:line: name is N lines (at most max)" for every
// function and method declared in the non-test Go files of dir whose
// declaration, from the func keyword to the closing brace, spans more
// than max lines.
func Over(dir string, max int) ([]string, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		return nil, err
	}
	type long struct {
		pos token.Position
		msg string
	}
	var found []long
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
				if n := end.Line - start.Line + 1; n > max {
					found = append(found, long{start, fmt.Sprintf("%s:%d: %s is %d lines (at most %d)", start.Filename, start.Line, name(fd), n, max)})
				}
			}
		}
	}
	slices.SortFunc(found, func(a, b long) int {
		return cmp.Or(strings.Compare(a.pos.Filename, b.pos.Filename), cmp.Compare(a.pos.Line, b.pos.Line))
	})
	out := make([]string, len(found))
	for i, l := range found {
		out[i] = l.msg
	}
	return out, nil
}

// name is the function's name, with its receiver type for a method.
func name(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + id.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}
