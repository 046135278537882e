package kubeproxy

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeListMatchesGoObjects(t *testing.T) {
	data, err := os.ReadFile("testdata/overall.yaml")
	require.NoError(t, err)
	objs, err := Decode(data)
	require.NoError(t, err)
	assert.Len(t, objs.Services, 8)
	assert.Len(t, objs.EndpointSlices, 5)
	require.Len(t, objs.Nodes, 1)
	assert.Empty(t, objs.Ignored)

	// The node's InternalIP stands in for Config.NodeIPs.
	cfg := upstreamTestConfig()
	cfg.NodeIPs = nil
	fromYAML, err := GenerateFromYAML(cfg, data)
	require.NoError(t, err)
	svcs, slices := overallObjects()
	fromGo, err := Generate(upstreamTestConfig(), svcs, slices, nil)
	require.NoError(t, err)
	assert.Equal(t, string(fromGo), string(fromYAML))
}

func TestDecodeMultiDocumentAndJSON(t *testing.T) {
	multi := `---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {clusterIP: 10.96.0.5, ports: [{name: http, port: 80, protocol: TCP}]}
--- # second
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.244.1.5]}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default}
`
	objs, err := Decode([]byte(multi))
	require.NoError(t, err)
	assert.Len(t, objs.Services, 1)
	assert.Len(t, objs.EndpointSlices, 1)
	assert.Equal(t, []string{"Pod default/web-0"}, objs.Ignored)

	js := `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},"spec":{"clusterIP":"10.96.0.5","ports":[{"port":80}]}}]}`
	objs, err = Decode([]byte(js))
	require.NoError(t, err)
	require.Len(t, objs.Services, 1)
	assert.Equal(t, int32(80), objs.Services[0].Spec.Ports[0].Port)
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name, in, msg string
	}{
		{"bad yaml", "kind: [", "decode document 0: "},
		{"no kind", "apiVersion: v1\n", "decode document 0: no kind"},
		{"old slice", "---\n---\napiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: a, namespace: b}\n", `decode document 2: EndpointSlice b/a has apiVersion "discovery.k8s.io/v1beta1"`},
		{"bad field type", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a, namespace: b}\n  spec: {ports: 80}\n", "decode document 0, item 0: Service b/a: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.in))
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrDecode))
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}

func FuzzDecode(f *testing.F) {
	data, err := os.ReadFile("testdata/overall.yaml")
	require.NoError(f, err)
	f.Add(data)
	f.Add([]byte("---\n---\nkind: List\nitems: [1]\n"))
	f.Add([]byte(`{"kind":"Service","apiVersion":"v1","spec":{"clusterIP":"::1","ports":[{"port":1,"protocol":"SCTP"}]}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		objs, err := Decode(in)
		if err != nil {
			assert.ErrorIs(t, err, ErrDecode)
			return
		}
		cfg := DefaultConfig("n")
		_, err = Generate(cfg, objs.Services, objs.EndpointSlices, objs.Nodes)
		if err != nil && !errors.Is(err, ErrInvalidObject) && !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrNotModelled) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}
