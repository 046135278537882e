package kubeproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"
)

// Objects are the Kubernetes objects kube-proxy watches, as decoded by
// [Decode].
type Objects struct {
	Services       []corev1.Service
	EndpointSlices []discoveryv1.EndpointSlice
	Nodes          []corev1.Node
	// Ignored names the objects of other kinds that were present, as
	// "Kind namespace/name" (kube-proxy does not read them).
	Ignored []string
}

type typeMeta struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Metadata   struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
}

// Decode reads Services, EndpointSlices and Nodes as
// `kubectl get svc,endpointslices,nodes -A -o yaml` (or -o json) prints them:
// a "v1 List" whose items are the objects, several YAML documents separated
// by "---" lines, single objects, or any mix of those. EndpointSlices must be
// discovery.k8s.io/v1. Errors are *DecodeError naming the document and item.
func Decode(data []byte) (Objects, error) {
	var objs Objects
	for i, doc := range splitYAMLDocuments(data) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return objs, &DecodeError{Document: i, Item: -1, Msg: err.Error()}
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue // a document holding only comments
		}
		if err := objs.add(js, i, -1); err != nil {
			return objs, err
		}
	}
	return objs, nil
}

func (o *Objects) add(js []byte, doc, item int) error {
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return &DecodeError{Document: doc, Item: item, Msg: "not a Kubernetes object: " + err.Error()}
	}
	bad := func(format string, args ...any) error {
		return &DecodeError{Document: doc, Item: item, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case tm.Kind == "":
		return bad("no kind: want List, Service, EndpointSlice or Node")
	case strings.HasSuffix(tm.Kind, "List"):
		if item >= 0 {
			return bad("nested %s inside a List", tm.Kind)
		}
		for j, raw := range tm.Items {
			if err := o.add(raw, doc, j); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch {
	case tm.Kind == "Service" && tm.APIVersion == "v1":
		var s corev1.Service
		if err = json.Unmarshal(js, &s); err == nil {
			o.Services = append(o.Services, s)
		}
	case tm.Kind == "EndpointSlice" && tm.APIVersion == "discovery.k8s.io/v1":
		var s discoveryv1.EndpointSlice
		if err = json.Unmarshal(js, &s); err == nil {
			o.EndpointSlices = append(o.EndpointSlices, s)
		}
	case tm.Kind == "EndpointSlice":
		return bad("EndpointSlice %s/%s has apiVersion %q: want discovery.k8s.io/v1", tm.Metadata.Namespace, tm.Metadata.Name, tm.APIVersion)
	case tm.Kind == "Node" && tm.APIVersion == "v1":
		var n corev1.Node
		if err = json.Unmarshal(js, &n); err == nil {
			o.Nodes = append(o.Nodes, n)
		}
	default:
		name := tm.Metadata.Name
		if tm.Metadata.Namespace != "" {
			name = tm.Metadata.Namespace + "/" + name
		}
		o.Ignored = append(o.Ignored, tm.Kind+" "+name)
	}
	if err != nil {
		return bad("%s %s/%s: %v", tm.Kind, tm.Metadata.Namespace, tm.Metadata.Name, err)
	}
	return nil
}

// splitYAMLDocuments splits on lines that are exactly "---" (optionally
// followed by spaces or a comment), as YAML document markers are.
func splitYAMLDocuments(data []byte) [][]byte {
	var docs [][]byte
	start := 0
	for i := 0; i <= len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += i
		}
		line := bytes.TrimRight(data[i:end], " \t\r")
		if bytes.HasPrefix(line, []byte("---")) && (len(line) == 3 || line[3] == ' ' || line[3] == '#') {
			docs = append(docs, data[start:i])
			start = end + 1
			if start > len(data) {
				start = len(data)
			}
		}
		i = end + 1
	}
	return append(docs, data[start:])
}

// GenerateFromYAML decodes objects with [Decode] and generates the ruleset
// with [Generate].
func GenerateFromYAML(cfg Config, data []byte) ([]byte, error) {
	objs, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return Generate(cfg, objs.Services, objs.EndpointSlices, objs.Nodes)
}
