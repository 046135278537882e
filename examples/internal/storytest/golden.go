// Package storytest compares an example's output and pictures with their
// golden files, and replays its walks in the kernel (kernel.go).
package storytest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/internal/harness/golden"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
	"github.com/packetwalk/packetwalk/render"
)

// Golden compares got with testdata/name, rewriting the file under -update
// (internal/harness/golden).
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

// WalkPicture keeps the DOT of a walk's whole path (render.WalkDOT) in
// testdata/name.dot and, under -update with Graphviz installed, draws
// name.svg beside the example.
func WalkPicture(t *testing.T, name string, w cluster.Walk, title string) {
	t.Helper()
	dot := render.WalkDOT(w, render.WalkOptions{Title: title})
	Golden(t, name+".dot", dot)
	if !Updating() {
		return
	}
	svg, err := render.SVG(context.Background(), dot)
	if errors.Is(err, render.ErrNoDot) {
		t.Logf("Graphviz dot not installed: %s.svg not redrawn", name)
		return
	}
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(name+".svg", svg, 0o644))
}

// Addrs lists each hop of w: its device and the packet's addresses as it
// arrived.
func Addrs(w cluster.Walk) []string {
	var out []string
	for _, h := range w.Hops {
		out = append(out, h.Device+" "+netfiltertest.Addrs(h.Packet))
	}
	return out
}
