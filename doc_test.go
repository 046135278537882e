package packetwalk_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsNamePackages: README.md's package table and the module's
// package documentation (doc.go) name every package outside internal/, so
// that a package added or moved is documented where readers look first.
func TestDocsNamePackages(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "internal", "testdata", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		dir := filepath.Dir(path)
		if dir != "." && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if len(pkgs) == 0 || pkgs[len(pkgs)-1] != dir {
				pkgs = append(pkgs, filepath.ToSlash(dir))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 8 {
		t.Fatalf("found only %d packages: %v", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		if !strings.Contains(string(readme), "`"+p+"`") {
			t.Errorf("README.md's package table does not name `%s`", p)
		}
		// doc.go wraps its list, and names a package as "name:" or
		// "examples/name,".
		if !strings.Contains(string(doc), p+":") && !strings.Contains(string(doc), p+",") {
			t.Errorf("doc.go does not name %s", p)
		}
	}
}
