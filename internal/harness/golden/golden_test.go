package golden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that records failures instead of ending the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) FailNow()              { r.failed = true; panic(r) }
func (r *recorder) Helper()               {}

// check runs Check against r, catching the FailNow of a fatal failure.
func check(r *recorder, path string, got []byte) {
	defer func() {
		if v := recover(); v != nil && v != any(r) {
			panic(v)
		}
	}()
	Check(r, path, got)
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.golden")
	require.NoError(t, os.WriteFile(path, []byte("a\n"), 0o644))

	r := &recorder{TB: t}
	check(r, path, []byte("a\n"))
	assert.False(t, r.failed, "equal output")

	r = &recorder{TB: t}
	check(r, path, []byte("b\n"))
	assert.True(t, r.failed, "different output")

	r = &recorder{TB: t}
	check(r, filepath.Join(dir, "missing.golden"), []byte("a\n"))
	assert.True(t, r.failed, "missing file")
}

func TestCheckUpdate(t *testing.T) {
	old := *update
	*update = true
	defer func() { *update = old }()
	path := filepath.Join(t.TempDir(), "sub", "out.golden")
	Check(t, path, []byte("new\n"))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(b))
	assert.True(t, Updating())
}
