package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// packages walks the module's Go packages (folders with .go files),
// skipping testdata, third_party and hidden folders.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	pkgs := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "third_party" || name == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			pkgs[filepath.Dir(p)] = append(pkgs[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestPackageDocs: every package has a doc.go, and it is the only file that
// carries the package comment.
func TestPackageDocs(t *testing.T) {
	fset := token.NewFileSet()
	for dir, files := range packages(t) {
		var withDoc []string
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if af.Doc != nil && !strings.Contains(af.Doc.Text(), "Code generated") {
				withDoc = append(withDoc, filepath.Base(f))
			}
		}
		if len(withDoc) != 1 || withDoc[0] != "doc.go" {
			t.Errorf("%s: package comment in %v; want it in doc.go alone", dir, withDoc)
		}
	}
}

// TestNoCgoOutsideUmemAndTrt: cgo lives only in umem/ and trt/ (and build
// tools); sensors/ and runtime/ never import "C".
func TestNoCgoOutsideUmemAndTrt(t *testing.T) {
	fset := token.NewFileSet()
	for dir, files := range packages(t) {
		rel := filepath.ToSlash(strings.TrimPrefix(dir, filepath.Join("..", "..")+string(filepath.Separator)))
		if strings.HasPrefix(rel, "umem") || strings.HasPrefix(rel, "trt") {
			continue
		}
		for _, f := range files {
			af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if ignored(af.Comments) {
				continue // cgo -godefs input, not compiled
			}
			for _, imp := range af.Imports {
				if imp.Path.Value == `"C"` {
					t.Errorf("%s imports \"C\": cgo belongs in umem/ and trt/", f)
				}
			}
		}
	}
}

// ignored reports whether a file carries //go:build ignore.
func ignored(groups []*ast.CommentGroup) bool {
	for _, g := range groups {
		for _, c := range g.List {
			if strings.TrimSpace(c.Text) == "//go:build ignore" {
				return true
			}
		}
	}
	return false
}
