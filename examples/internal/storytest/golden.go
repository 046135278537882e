// Package storytest compares an example's output with its golden file.
package storytest

import (
	"path/filepath"
	"testing"

	"github.com/packetwalk/packetwalk/internal/golden"
)

// Golden compares got with testdata/name, rewriting the file under -update
// (internal/golden).
func Golden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

// Updating reports whether the test run rewrites golden files (-update).
func Updating() bool { return golden.Updating() }
