// Package storytest compares an example's output with its golden file.
package storytest

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/golden"
)

// Golden compares got with testdata/name, rewriting the file under -update
// (internal/golden).
func Golden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

// Output runs an example's run, which prints the story to w, and compares
// what it printed with testdata/output.golden.
func Output(t *testing.T, run func(w io.Writer) error) {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, run(&b))
	Golden(t, "output.golden", b.Bytes())
}

// Updating reports whether the test run rewrites golden files (-update).
func Updating() bool { return golden.Updating() }
