package ipset

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

func newTestRegistry() (*Registry, *fakeClock) {
	c := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return NewRegistry(c, nil), c
}

func loadScenario(t *testing.T) *Registry {
	t.Helper()
	data, err := os.ReadFile("testdata/scenario.restore")
	require.NoError(t, err)
	r, _ := newTestRegistry()
	require.NoError(t, r.Restore(data, RestoreOptions{}))
	return r
}

func TestGoldenSave(t *testing.T) {
	r := loadScenario(t)
	want, err := os.ReadFile("testdata/save.golden")
	require.NoError(t, err)
	got, err := r.AppendSave(nil)
	require.NoError(t, err)
	// Known initvals: member (bucket) order is the kernel's.
	assert.Equal(t, string(want), string(got))
}

func TestGoldenList(t *testing.T) {
	r := loadScenario(t)
	want, err := os.ReadFile("testdata/list.golden")
	require.NoError(t, err)
	var got bytes.Buffer
	require.NoError(t, r.List(&got))
	assert.Equal(t, string(want), got.String())
}

func TestGoldenProbes(t *testing.T) {
	r := loadScenario(t)
	f, err := os.Open("testdata/probes.golden")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		require.Len(t, fs, 3)
		in, err := r.Test(fs[0], fs[1])
		require.NoError(t, err, sc.Text())
		assert.Equal(t, fs[2] == "0", in, "ipset test %s %s", fs[0], fs[1])
		n++
	}
	require.NoError(t, sc.Err())
	assert.Greater(t, n, 60)
}

// The saved text restores to an identical save.
func TestSaveRestoreRoundTrip(t *testing.T) {
	r := loadScenario(t)
	a, err := r.AppendSave(nil)
	require.NoError(t, err)
	r2, _ := newTestRegistry()
	require.NoError(t, r2.Restore(a, RestoreOptions{}))
	b, err := r2.AppendSave(nil)
	require.NoError(t, err)
	assert.Equal(t, string(a), string(b))
}
