package packetwalk

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/packetwalk/packetwalk/"

// TestLayering pins the import rule doc.go states: inet imports nothing from
// the module; the leaf packages conntrack and ipset import only inet and
// internal helpers, never a sibling domain package.
func TestLayering(t *testing.T) {
	allowed := map[string][]string{
		"inet":      nil,
		"conntrack": {"inet", "internal/"},
		"ipset":     {"inet", "internal/"},
	}
	for dir, ok := range allowed {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				rest, inModule := strings.CutPrefix(p, module)
				if !inModule {
					continue
				}
				good := false
				for _, a := range ok {
					if rest == a || strings.HasSuffix(a, "/") && strings.HasPrefix(rest, a) {
						good = true
					}
				}
				if !good {
					t.Errorf("%s imports %s: %s may import only %v from the module", f, p, dir, ok)
				}
			}
		}
	}
}
