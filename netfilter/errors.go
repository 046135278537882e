package netfilter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
)

// Sentinel errors wrapped by parse, load and command errors; test them with
// errors.Is.
var (
	ErrUnknownTable     = errors.New("unknown table")
	ErrUnknownMatch     = errors.New("unsupported match")
	ErrUnknownTarget    = errors.New("unsupported target")
	ErrUnknownOption    = errors.New("unknown option")
	ErrBadValue         = errors.New("bad value")
	ErrNoSuchChain      = errors.New("no such chain")
	ErrChainExists      = errors.New("chain already exists")
	ErrChainInUse       = errors.New("chain is referenced")
	ErrChainNotEmpty    = errors.New("chain is not empty")
	ErrBuiltinChain     = errors.New("built-in chain")
	ErrLoop             = errors.New("loop of jumps")
	ErrTooDeep          = errors.New("chains nested too deep")
	ErrNoSuchSet        = errors.New("no such ipset")
	ErrNoSuchNFAcct     = errors.New("no such nfacct object")
	ErrNotAllowed       = errors.New("not allowed here")
	ErrNoSuchRule       = errors.New("no such rule")
	ErrSyntax           = errors.New("syntax error")
	ErrMissingArgument  = errors.New("missing argument")
	ErrNotModelled      = inet.ErrNotModelled // what packetwalk does not model, refused by name
	ErrMultipleFlags    = errors.New("option given more than once")
	ErrIncompatibleOpts = errors.New("incompatible options")
	// ErrAmbiguousTable: a line of a fragment (RestoreOptions.Fragment)
	// that fits more than one table, with no default table given.
	ErrAmbiguousTable = errors.New("table cannot be told")
	// ErrUnknownInterface: a packet given to the host on an interface
	// it does not have (see Host.AddInterface; lo always exists).
	ErrUnknownInterface = errors.New("unknown interface")
	// ErrBadPacket: a packet whose fields contradict each other, such
	// as an IPv6 Family with IPv4 addresses or ports on ICMP.
	ErrBadPacket = errors.New("bad packet")
)

// PacketError reports a packet the host refused before any hook: the
// Packet field at fault ("In" for the receiving interface) and why. It
// wraps ErrUnknownInterface or ErrBadPacket.
type PacketError struct {
	Field string
	Text  string
	Err   error
}

func (e *PacketError) Error() string {
	return "packet refused: " + e.Field + ": " + e.Text
}

// Unwrap returns the underlying error.
func (e *PacketError) Unwrap() error { return e.Err }

func badPacket(field, text string) error {
	return &PacketError{Field: field, Text: text, Err: ErrBadPacket}
}

// ParseError reports a problem in iptables-restore input or in an iptables
// command line. Line is 1-based and 0 for a single command; Token is the
// argument at fault, when there is one.
type ParseError struct {
	Line  int
	Token string
	Text  string // the whole input line
	Err   error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	if e.Token != "" && !strings.Contains(e.Err.Error(), strconv.Quote(e.Token)) {
		b.WriteString(" at ")
		b.WriteString(strconv.Quote(e.Token))
	}
	if e.Text != "" {
		b.WriteString(" in ")
		b.WriteString(strconv.Quote(e.Text))
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// optError builds the error for a bad option value, naming the module.
type optError struct {
	module string // "tcp", "MARK"
	option string // "--dport"
	value  string
	want   string
	err    error
}

func (e *optError) Error() string {
	s := e.module + ": "
	if e.value != "" || e.option != "" {
		s += "bad value " + strconv.Quote(e.value) + " for option \"" + e.option + "\""
	}
	if e.want != "" {
		s += ": expected " + e.want
	}
	return s
}

func (e *optError) Unwrap() error {
	if e.err != nil {
		return e.err
	}
	return ErrBadValue
}

func badValue(module, option, value, want string) error {
	return &optError{module: module, option: option, value: value, want: want}
}

// mustSpecify is the error for a module whose mandatory option is missing.
func mustSpecify(mod, opt string) error {
	return fmt.Errorf("%w: %s: option %q must be specified", ErrMissingArgument, mod, opt)
}
