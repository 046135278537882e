package ipset

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// AppendSave appends `ipset save` text for the named sets (all when none).
func (r *Registry) AppendSave(b []byte, names ...string) ([]byte, error) {
	sets, err := r.pick(names)
	if err != nil {
		return b, err
	}
	now := r.clock.Now()
	for _, s := range sets {
		b = append(b, "create "...)
		b = append(b, s.name...)
		b = append(b, ' ')
		b = append(b, s.typ.name...)
		b = append(b, ' ')
		b = s.appendHeader(b)
		b = append(b, '\n')
		s.eachMember(now, func(e *entry) {
			b = append(b, "add "...)
			b = append(b, s.name...)
			b = append(b, ' ')
			b = s.appendMember(b, e, now)
			b = append(b, '\n')
		})
	}
	return b, nil
}

// Save writes `ipset save` text for the named sets (all when none).
func (r *Registry) Save(w io.Writer, names ...string) error {
	b, err := r.AppendSave(nil, names...)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// List writes `ipset list` text for the named sets (all when none). Sets
// are separated by a blank line, as the tool prints them.
func (r *Registry) List(w io.Writer, names ...string) error {
	sets, err := r.pick(names)
	if err != nil {
		return err
	}
	now := r.clock.Now()
	var b []byte
	for i, s := range sets {
		if i > 0 {
			b = append(b, '\n')
		}
		n := 0
		s.eachMember(now, func(*entry) { n++ })
		b = fmt.Appendf(b, "Name: %s\nType: %s\nRevision: %d\nHeader: ", s.name, s.typ.name, s.typ.revision)
		b = s.appendHeader(b)
		b = fmt.Appendf(b, "\nSize in memory: %d\nReferences: %d\nNumber of entries: %d\nMembers:\n",
			s.memSize(now), s.refs, n)
		s.eachMember(now, func(e *entry) {
			b = s.appendMember(b, e, now)
			b = append(b, '\n')
		})
	}
	_, err = w.Write(b)
	return err
}

func (r *Registry) pick(names []string) ([]*Set, error) {
	if len(names) == 0 {
		// The kernel dumps list:set sets in a second pass, after the sets
		// they may contain.
		all := r.sets()
		var out []*Set
		for pass := range 2 {
			for _, s := range all {
				if (s.typ.kind == kindList) == (pass == 1) {
					out = append(out, s)
				}
			}
		}
		return out, nil
	}
	var out []*Set
	for _, n := range names {
		s, err := r.must(n)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// RestoreOptions tunes Restore.
type RestoreOptions struct {
	// Exist ignores "already exists/added" and "not added" errors, like
	// `ipset -exist restore` (`-!`).
	Exist bool
}

// Restore runs `ipset restore` text: create, add, del, test, flush,
// destroy, swap and rename lines. A `-exist`/`-!` on a line is accepted
// and, as in ipset 7.17, has no effect; opt.Exist is the tool's option. Blank lines and '#' comments are skipped. Like the tool it is not
// atomic: lines before a failing one stay applied. The error is a
// *ParseError naming the line and token.
func (r *Registry) Restore(data []byte, opt RestoreOptions) error {
	// Large sets build their lookup filter once, at the end.
	r.bulk = true
	defer r.endBulk()
	var toks []string
	for n := 1; ; n++ {
		end := bytes.IndexByte(data, '\n')
		raw := data
		if end >= 0 {
			raw = data[:end]
		}
		line := string(raw)
		var err error
		toks, err = splitLine(toks[:0], line)
		if err != nil {
			return &ParseError{Line: n, Text: line, Err: err}
		}
		if len(toks) > 0 && !strings.HasPrefix(toks[0], "#") {
			// ipset 7.17 accepts -exist/-! anywhere on a restore line but
			// ignores it: only `ipset -exist restore` (opt.Exist) applies.
			toks = slices.DeleteFunc(toks, func(t string) bool { return t == "-exist" || t == "-!" })
			if len(toks) > 0 {
				if err := r.Exec(toks, opt.Exist); err != nil {
					return &ParseError{Line: n, Token: errToken(toks), Text: line, Err: err}
				}
			}
		}
		if end < 0 {
			return nil
		}
		data = data[end+1:]
	}
}

func errToken(toks []string) string {
	if len(toks) > 2 {
		return toks[2]
	}
	return strings.Join(toks, " ")
}

// Exec runs one ipset command given as arguments, such as
// []string{"add", "S", "10.0.0.0/8", "nomatch"}. A failing `test` returns
// ErrNotInSet.
func (r *Registry) Exec(args []string, exist bool) error {
	for len(args) > 0 && (args[0] == "-exist" || args[0] == "-!") {
		exist, args = true, args[1:]
	}
	if len(args) == 0 {
		return nil
	}
	cmd, rest := args[0], args[1:]
	need := func(n int) error {
		if len(rest) < n {
			return syntaxError("Missing mandatory argument to command %s", cmd)
		}
		return nil
	}
	switch cmd {
	case "create", "-N", "n", "c":
		if err := need(2); err != nil {
			return err
		}
		return r.Create(rest[0], rest[1], exist, rest[2:]...)
	case "add", "-A", "a":
		if err := need(2); err != nil {
			return err
		}
		return r.Add(rest[0], rest[1], exist, rest[2:]...)
	case "del", "-D", "d":
		if err := need(2); err != nil {
			return err
		}
		return r.Del(rest[0], rest[1], exist)
	case "test", "-T", "t":
		if err := need(2); err != nil {
			return err
		}
		in, err := r.Test(rest[0], rest[1])
		if err == nil && !in {
			err = ErrNotInSet
		}
		return err
	case "flush", "-F", "f", "destroy", "-X", "x":
		name := ""
		if len(rest) > 0 {
			name = rest[0]
		}
		if cmd == "flush" || cmd == "-F" || cmd == "f" {
			return r.Flush(name)
		}
		return r.Destroy(name)
	case "swap", "-W", "w", "rename", "-E", "e":
		if err := need(2); err != nil {
			return err
		}
		if cmd == "swap" || cmd == "-W" || cmd == "w" {
			return r.Swap(rest[0], rest[1])
		}
		return r.Rename(rest[0], rest[1])
	}
	return &textError{msg: "No command specified: unknown argument " + cmd, base: ErrSyntax}
}

// ErrNotInSet is returned by Exec for a `test` whose element is not in the set.
var ErrNotInSet = fmt.Errorf("element is NOT in set")

// splitLine appends the words of a restore line to toks; double quotes
// group a word (comment "a b") and are removed. Words are substrings of
// line.
func splitLine(toks []string, line string) ([]string, error) {
	if strings.IndexByte(line, '"') < 0 {
		start := -1
		for i := 0; i < len(line); i++ {
			switch line[i] {
			case ' ', '\t', '\r':
				if start >= 0 {
					toks = append(toks, line[start:i])
					start = -1
				}
			default:
				if start < 0 {
					start = i
				}
			}
		}
		if start >= 0 {
			toks = append(toks, line[start:])
		}
		return toks, nil
	}
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			quoted = !quoted
			in = true
		case !quoted && (c == ' ' || c == '\t' || c == '\r'):
			if in {
				toks = append(toks, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quoted {
		return nil, syntaxError("unterminated quote in %s", strconv.Quote(line))
	}
	if in {
		toks = append(toks, cur.String())
	}
	return toks, nil
}
