package ipset

import (
	"errors"
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
)

// Sentinel errors, usable with errors.Is. Their texts are those ipset 7.17
// prints after "ipset v7.17: ".
var (
	// ErrNotFound reports a set name that does not exist.
	ErrNotFound = toolError("The set with the given name does not exist")
	// ErrSetExists reports a create of a name already in use.
	ErrSetExists = toolError("Set cannot be created: set with the same name already exists")
	// ErrExists reports an add of an element already in the set.
	ErrExists = toolError("Element cannot be added to the set: it's already added")
	// ErrNotAdded reports a delete of an element not in the set.
	ErrNotAdded = toolError("Element cannot be deleted from the set: it's not added")
	// ErrFull reports a hash set at maxelem.
	ErrFull = toolError("Hash is full, cannot add more elements")
	// ErrListFull reports a list:set at its size.
	ErrListFull = toolError("The set is full, more elements cannot be added")
	// ErrInUse reports a destroy of a referenced set.
	ErrInUse = toolError("Set cannot be destroyed: it is in use by a kernel component")
	// ErrRenameInUse reports a rename of a referenced set.
	ErrRenameInUse = toolError("Set cannot be renamed: it is in use by another system")
	// ErrRenameExists reports a rename onto an existing name.
	ErrRenameExists = toolError("Set cannot be renamed: a set with the new name already exists")
	// ErrTypeMismatch reports a swap of sets of different type or family.
	ErrTypeMismatch = toolError("The sets cannot be swapped: their type does not match")
	// ErrOutOfRange reports a bitmap element outside the set's range.
	ErrOutOfRange = toolError("Element is out of the range of the set")
	// ErrNotModelled reports a set type the modelled kernel does not
	// support, with the message ipset prints for one the kernel lacks;
	// errors.Is(err, inet.ErrNotModelled) holds for it too.
	ErrNotModelled = inet.NotModelled("Kernel error received: set type not supported")
	// ErrSyntax wraps element and option parse errors ("Syntax error: ...").
	ErrSyntax = toolError("Syntax error")
	// ErrNoTimeout reports a timeout on a set created without timeout support.
	ErrNoTimeout = toolError("Timeout cannot be used: set was created without timeout support")
	// ErrNoComment reports a comment on a set created without comment support.
	ErrNoComment = toolError("Comment cannot be used: set was created without comment support")
	// ErrNoCounters reports counters on a set created without counter support.
	ErrNoCounters = toolError("Packet/byte counters cannot be used: set was created without counter support")
	// ErrNoSkbinfo reports skbinfo on a set created without skbinfo support.
	ErrNoSkbinfo = toolError("Skbinfo mapping cannot be used: set was created without skbinfo support")
	// ErrCIDR reports a zero prefix length where the kernel refuses it.
	ErrCIDR = toolError("The value of the CIDR parameter of the IP address is invalid")
	// ErrRangeTooBig reports a bitmap range above the kernel's size limit.
	ErrRangeTooBig = toolError("The range you specified exceeds the size limit of the set type")
	// ErrMemberMissing reports a list:set member (or before/after name) that does not exist.
	ErrMemberMissing = toolError("Set to be added/deleted/tested as element does not exist.")
	// ErrListInList reports an attempt to put a list:set into a list:set.
	ErrListInList = toolError("Sets with list:set type cannot be added to the set.")
)

// syntaxError builds an ErrSyntax-wrapping error with ipset's text.
func syntaxError(format string, a ...any) error {
	return &textError{msg: "Syntax error: " + fmt.Sprintf(format, a...), base: ErrSyntax}
}

type textError struct {
	msg  string
	base error
}

func (e *textError) Error() string { return e.msg }
func (e *textError) Unwrap() error { return e.base }

// unknownArg is ipset's error for an option the type does not take.
func unknownArg(tok string) error {
	return &textError{msg: fmt.Sprintf("Unknown argument: `%s'", tok), base: ErrSyntax}
}

// ParseError reports a restore line that failed, with the shape of
// netfilter's and conntrack's: Line is 1-based, Token the offending token
// when one is at fault, Text the whole line.
type ParseError struct {
	Line  int
	Token string
	Text  string
	Err   error
}

// Error formats like ipset restore: "Error in line N: <reason>".
func (e *ParseError) Error() string {
	return fmt.Sprintf("Error in line %d: %v", e.Line, e.Err)
}

// Unwrap returns the underlying cause.
func (e *ParseError) Unwrap() error { return e.Err }

// toolError makes a sentinel whose text is ipset's own message, kept
// verbatim (capitals and final periods included) for byte-exact output.
func toolError(text string) error { return errors.New(text) }
