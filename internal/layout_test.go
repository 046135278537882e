package internal

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/packetwalk/packetwalk/"

// harness are the test-harness packages (doc.go).
var harness = []string{"internal/harness"}

// harnessUsers are the directories whose non-test code may import the
// harness: the harness itself and the test-support packages and commands
// built on it.
var harnessUsers = append([]string{"examples/internal/storytest"}, harness...)

func under(dir string, roots []string) bool {
	for _, r := range roots {
		if dir == r || strings.HasPrefix(dir, r+"/") {
			return true
		}
	}
	return false
}

// TestHarnessStaysOutOfProduction checks that no non-test Go file outside
// the harness imports a harness package.
func TestHarnessStaysOutOfProduction(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		require.NoError(t, err)
		rel = filepath.ToSlash(rel)
		if under(rel, harnessUsers) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		require.NoError(t, err)
		files++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if pkg, ok := strings.CutPrefix(p, module); ok {
				assert.False(t, under(pkg, harness), "%s imports the test harness package %s", filepath.Join(rel, filepath.Base(path)), p)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, files, 100, "the walk found too few production files")
}
