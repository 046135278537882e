// Package services is the services database the real tools read on the
// Debian machine packetwalk models: netbase 6.4's /etc/services, embedded
// (etc-services). iptables and ipset turn port names into numbers with
// getservbyname(3), and iptables -L turns numbers into names with
// getservbyport(3); glibc answers both from this file ("services: db
// files" in nsswitch.conf, with no db file installed).
//
// The file is parsed once, on first use, into a read-only index; lookups
// do not allocate.
package services

//go:generate sh update.sh

import (
	_ "embed"
	"strconv"
	"strings"
	"sync"
)

//go:embed etc-services
var raw string

// Entry is one line of the database: "name port/proto aliases...".
type Entry struct {
	Name    string
	Port    uint16
	Proto   string
	Aliases []string
}

type nameKey struct {
	name, proto string
}

type portKey struct {
	port  uint16
	proto string
}

type db struct {
	entries []Entry
	byName  map[nameKey]uint16
	byPort  map[portKey]string
}

// load parses the embedded file as glibc's files backend does: '#' starts
// a comment anywhere, fields are separated by blanks, a line whose second
// field is not PORT/PROTO is skipped. The first line naming a (name,
// proto) or (port, proto) pair wins, as a linear scan of the file does.
var load = sync.OnceValue(func() *db {
	d := &db{byName: map[nameKey]uint16{}, byPort: map[portKey]string{}}
	for line := range strings.Lines(raw) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		ps, proto, ok := strings.Cut(f[1], "/")
		if !ok || proto == "" {
			continue
		}
		port, err := strconv.ParseUint(ps, 10, 16)
		if err != nil {
			continue
		}
		e := Entry{Name: f[0], Port: uint16(port), Proto: proto, Aliases: f[2:]}
		d.entries = append(d.entries, e)
		d.addName(e.Name, e)
		for _, n := range e.Aliases {
			d.addName(n, e)
		}
		if _, dup := d.byPort[portKey{e.Port, proto}]; !dup {
			d.byPort[portKey{e.Port, proto}] = e.Name
		}
	}
	return d
})

func (d *db) addName(n string, e Entry) {
	k := nameKey{n, e.Proto}
	if _, dup := d.byName[k]; !dup {
		d.byName[k] = e.Port
	}
}

// ByName returns the port of service name (or alias) for proto ("tcp",
// "udp", "sctp", ...), as getservbyname(name, proto). Names are case
// sensitive.
func ByName(name, proto string) (uint16, bool) {
	p, ok := load().byName[nameKey{name, proto}]
	return p, ok
}

// ByNameAnyProto returns the port getaddrinfo(3) with no hints finds for
// service name: glibc tries the tcp entries, then the udp ones (the
// socket types it returns by default); the first that names it wins.
func ByNameAnyProto(name string) (uint16, bool) {
	d := load()
	if p, ok := d.byName[nameKey{name, "tcp"}]; ok {
		return p, true
	}
	p, ok := d.byName[nameKey{name, "udp"}]
	return p, ok
}

// ByPort returns the official name of the first entry for port/proto, as
// getservbyport(port, proto).
func ByPort(port uint16, proto string) (string, bool) {
	n, ok := load().byPort[portKey{port, proto}]
	return n, ok
}

// Entries returns a copy of the database's entries in file order.
func Entries() []Entry {
	d := load()
	out := make([]Entry, len(d.entries))
	for i, e := range d.entries {
		e.Aliases = append([]string(nil), e.Aliases...)
		out[i] = e
	}
	return out
}
