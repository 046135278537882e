package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// IDRange is an inclusive range of user or group IDs.
type IDRange struct{ Min, Max uint32 }

func (r IDRange) contains(id uint32) bool { return id >= r.Min && id <= r.Max }

// OwnerMatch is "-m owner" (revision 1): it tests the local socket that
// sent the packet, so it is allowed only in OUTPUT and POSTROUTING. A
// packet without a socket matches only when every option given is
// inverted.
type OwnerMatch struct {
	UID, GID        IDRange
	HasUID, HasGID  bool
	InvUID, InvGID  bool
	SocketExists    bool // --socket-exists given
	InvSocketExists bool
	// SupplGroups makes the GID test also accept a supplementary group of
	// the socket owner (--suppl-groups).
	SupplGroups bool
}

func init() {
	registerMatch(&module{name: "owner",
		opts: []option{
			{name: "uid-owner", args: 1, invert: true},
			{name: "gid-owner", args: 1, invert: true},
			{name: "socket-exists", invert: true},
			{name: "suppl-groups"},
		},
		hooks:      []Hook{Output, Postrouting},
		newBuilder: func(*ruleCtx) builder { return &OwnerMatch{} }})
}

// ownerUsers and ownerGroups are Debian 12's base-passwd accounts, which
// iptables -L prints by name (getpwuid, getgrgid) and which --uid-owner
// and --gid-owner accept; a copy keeps the output machine-independent.
var ownerUsers = map[uint32]string{0: "root", 1: "daemon", 2: "bin", 3: "sys", 4: "sync", 5: "games",
	6: "man", 7: "lp", 8: "mail", 9: "news", 10: "uucp", 13: "proxy", 33: "www-data", 34: "backup",
	38: "list", 39: "irc", 42: "_apt", 65534: "nobody"}

var ownerGroups = map[uint32]string{0: "root", 1: "daemon", 2: "bin", 3: "sys", 4: "adm", 5: "tty",
	6: "disk", 7: "lp", 8: "mail", 9: "news", 10: "uucp", 12: "man", 13: "proxy", 15: "kmem",
	20: "dialout", 21: "fax", 22: "voice", 24: "cdrom", 25: "floppy", 26: "tape", 27: "sudo",
	29: "audio", 30: "dip", 33: "www-data", 34: "backup", 37: "operator", 38: "list", 39: "irc",
	40: "src", 42: "shadow", 43: "utmp", 44: "video", 45: "sasl", 46: "plugdev", 50: "staff",
	60: "games", 100: "users", 65534: "nogroup"}

// parseIDRange parses a name from names, an ID or "MIN-MAX"; IDs go up
// to 2^32-2, as (uid_t)-1 means "none".
func parseIDRange(opt, s string, names map[uint32]string) (IDRange, error) {
	for id, n := range names {
		if n == s {
			return IDRange{id, id}, nil
		}
	}
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	// strtoul with base 0, after leading blanks, as iptables reads IDs.
	a, ok1 := parseCUint(strings.TrimLeft(lo, " \t"), 0xfffffffe)
	b, ok2 := parseCUint(strings.TrimLeft(hi, " \t"), 0xfffffffe)
	if !ok1 || !ok2 {
		return IDRange{}, badValue("owner", opt, s, "a known name, an ID or a range MIN-MAX")
	}
	if a > b {
		return IDRange{}, badValue("owner", opt, s, "a range with MIN <= MAX")
	}
	return IDRange{uint32(a), uint32(b)}, nil
}

func (m *OwnerMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "uid-owner":
		r, err := parseIDRange("--uid-owner", args[0], ownerUsers)
		if err != nil {
			return err
		}
		m.UID, m.HasUID, m.InvUID = r, true, inv
	case "gid-owner":
		r, err := parseIDRange("--gid-owner", args[0], ownerGroups)
		if err != nil {
			return err
		}
		m.GID, m.HasGID, m.InvGID = r, true, inv
	case "socket-exists":
		m.SocketExists, m.InvSocketExists = true, inv
	case "suppl-groups":
		if !m.HasGID {
			return badValue("owner", "--suppl-groups", "", "--gid-owner before it")
		}
		m.SupplGroups = true
	}
	return nil
}

func (m *OwnerMatch) done(*ruleCtx) (any, error) {
	if !m.HasUID && !m.HasGID && !m.SocketExists {
		return nil, fmt.Errorf("%w: owner: at least one of --uid-owner, --gid-owner or --socket-exists is required", ErrMissingArgument)
	}
	return m, nil
}

// Module implements Match.
func (m *OwnerMatch) Module() string { return "owner" }

func appendIDRange(b []byte, r IDRange, names map[uint32]string) []byte {
	if r.Min != r.Max {
		b = strconv.AppendUint(b, uint64(r.Min), 10)
		b = append(b, '-')
		return strconv.AppendUint(b, uint64(r.Max), 10)
	}
	if n, ok := names[r.Min]; ok && names != nil {
		return append(b, n...)
	}
	return strconv.AppendUint(b, uint64(r.Min), 10)
}

func (m *OwnerMatch) appendItems(b []byte, sock, uid, gid, suppl string, numeric bool) []byte {
	users, groups := ownerUsers, ownerGroups
	if numeric {
		users, groups = nil, nil
	}
	if m.SocketExists {
		b = appendNot(b, m.InvSocketExists)
		b = append(b, sock...)
	}
	if m.HasUID {
		b = appendNot(b, m.InvUID)
		b = append(b, uid...)
		b = appendIDRange(b, m.UID, users)
	}
	if m.HasGID {
		b = appendNot(b, m.InvGID)
		b = append(b, gid...)
		b = appendIDRange(b, m.GID, groups)
	}
	if m.SupplGroups {
		b = append(b, suppl...)
	}
	return b
}

func (m *OwnerMatch) appendSave(b []byte) []byte {
	return m.appendItems(b, " --socket-exists", " --uid-owner ", " --gid-owner ", " --suppl-groups", true)
}

func (m *OwnerMatch) appendList(b []byte, numeric bool) []byte {
	return m.appendItems(b, " owner socket exists", " owner UID match ", " owner GID match ", " incl. suppl. groups", numeric)
}

func (m *OwnerMatch) match(c *evalCtx) bool {
	p := c.pkt
	if !p.HasSocket {
		// xt_owner: no socket matches only if every given test is inverted.
		return (!m.SocketExists || m.InvSocketExists) && (!m.HasUID || m.InvUID) && (!m.HasGID || m.InvGID)
	}
	if m.SocketExists && m.InvSocketExists {
		return false
	}
	if m.HasUID && m.UID.contains(p.UID) == m.InvUID {
		return false
	}
	if m.HasGID {
		in := m.GID.contains(p.GID)
		if !in && m.SupplGroups {
			for _, g := range p.Groups[:min(int(p.NumGroups), len(p.Groups))] {
				if m.GID.contains(g) {
					in = true
					break
				}
			}
		}
		if in == m.InvGID {
			return false
		}
	}
	return true
}
