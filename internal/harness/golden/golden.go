// Package golden compares a test's output with a golden file, and rewrites
// the file instead when the test binary runs with -update (go test ./PKG/
// -update; review the diff). It is for the outputs of packetwalk itself;
// the goldens recorded from the real tools are rewritten by their scripts
// (docs/testing.md, "Re-recording goldens").
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output (review the diff)")

// Updating reports whether the run rewrites golden files (-update).
func Updating() bool { return *update }

// Check compares got with the file at path, relative to the package's
// directory, as the test's assertion; under -update it first writes got
// there, creating the directory. A missing file fails, naming -update.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test with -update to create %s", path)
	assert.Equal(t, string(want), string(got), "%s differs (go test -update rewrites it)", path)
}
