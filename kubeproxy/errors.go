package kubeproxy

import (
	"errors"
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
)

// Sentinel errors, usable with errors.Is on anything this package returns.
var (
	// ErrInvalidObject marks a Service, EndpointSlice or Node whose content
	// kube-proxy could not turn into rules (unknown protocol, bad port, bad
	// IP, missing cluster IP). The error is an *ObjectError.
	ErrInvalidObject = errors.New("invalid object")
	// ErrInvalidConfig marks a Config that kube-proxy would refuse at start.
	ErrInvalidConfig = errors.New("invalid kube-proxy config")
	// ErrDecode marks YAML or JSON input that is not a Kubernetes object list.
	ErrDecode = errors.New("cannot decode objects")
	// ErrNotModelled marks input this package does not model (it is refused
	// by name rather than approximated); errors.Is(err, inet.ErrNotModelled)
	// holds for it too.
	ErrNotModelled = inet.NotModelled("not modelled")
)

// ObjectError names the Kubernetes object (and, where it applies, its port)
// that caused an error, e.g.
// `service default/web: port "http": unknown protocol "FOO"`.
type ObjectError struct {
	Kind      string // "service", "endpointslice" or "node"
	Namespace string // empty for nodes
	Name      string
	Port      string // service or endpoint port name, when the error is about a port; "" otherwise
	HasPort   bool   // Port is meaningful (an unnamed port has Port "")
	Msg       string // what is wrong and what was expected
	Err       error  // ErrInvalidObject or ErrNotModelled
}

// Error formats the object, the port if any, and the message.
func (e *ObjectError) Error() string {
	obj := e.Name
	if e.Namespace != "" {
		obj = e.Namespace + "/" + e.Name
	}
	if e.HasPort {
		return fmt.Sprintf("%s %s: port %q: %s", e.Kind, obj, e.Port, e.Msg)
	}
	return fmt.Sprintf("%s %s: %s", e.Kind, obj, e.Msg)
}

// Unwrap returns the sentinel (ErrInvalidObject or ErrNotModelled).
func (e *ObjectError) Unwrap() error { return e.Err }

// DecodeError reports input that could not be decoded, naming the YAML
// document (0-based, split on "---" lines), the list item if any (-1 when
// not in a List) and the underlying problem.
type DecodeError struct {
	Document int
	Item     int
	Msg      string
}

// Error formats the position and message.
func (e *DecodeError) Error() string {
	if e.Item >= 0 {
		return fmt.Sprintf("decode document %d, item %d: %s", e.Document, e.Item, e.Msg)
	}
	return fmt.Sprintf("decode document %d: %s", e.Document, e.Msg)
}

// Unwrap returns ErrDecode.
func (e *DecodeError) Unwrap() error { return ErrDecode }
