package netfilter

import (
	"strings"
	"testing"
)

// TestAddressFormsIptables pins the address texts iptables 1.8.9 takes for
// -s and -d, as recorded with iptables-restore and iptables-save (see
// docs/kernel-notes.md): iptables' dotted form first, inet_aton's forms
// next, anything at all before a zero mask.
func TestAddressFormsIptables(t *testing.T) {
	for _, tc := range []struct {
		fam      Family
		in, save string
	}{
		{IPv4, "-s 80", "-s 80.0.0.0/32"},
		{IPv4, "-s 1.2.3", "-s 1.2.3.0/32"},
		{IPv4, "-s 010.0.0.1", "-s 8.0.0.1/32"},
		{IPv4, "-d 0x0a.1", "-d 10.1.0.0/32"},
		{IPv4, "-s 1..2.3/0", ""},
		{IPv4, "-s foo/0", ""},
		{IPv4, "-s 1.2.3.4/0.0.0.0", ""},
		{IPv4, "-s 1.2.3.4/00", ""},
		{IPv4, "-s 1.2.3.4.5/0", ""},
		{IPv4, "-s 1.2.3/24", "-s 1.2.3.0/24"},
		{IPv4, "-s 4294967295", "-s 255.255.255.255/32"},
		{IPv4, "-s 1.16777215", "-s 1.255.255.255/32"},
		{IPv4, "-s 1.2.65535", "-s 1.2.255.255/32"},
		{IPv4, "-s 256", "-s 0.0.1.0/32"},
		{IPv4, "-s +1.2.3.4", "-s 1.2.3.4/32"},
		{IPv4, "-s 0x1.0377.3.4", "-s 1.255.3.4/32"},
		{IPv4, "-s 1.2.3.4/010", "-s 1.0.0.0/8"},
		{IPv4, "-s 1.2.3.4/0x10", "-s 1.2.0.0/16"},
		{IPv4, "-s 1.2.3.4/+8", "-s 1.0.0.0/8"},
		{IPv4, "-s 1.2.3.4/0.255.0.0", "-s 0.2.0.0/0.255.0.0"},
		{IPv4, "-s 05.5.244.255", "-s 5.5.244.255/32"},
		{IPv6, "-s ::1/+8", "-s ::/8"},
		{IPv6, "-s ::1/010", "-s ::/8"},
		{IPv6, "-s junk/0", ""},
		{IPv6, "-s junk/::", ""},
		{IPv6, "-s 1::2/0/0", ""},
		{IPv6, "-s 1:2:3:4:5:6:7:8:9/0x0", ""},
	} {
		rs, err := ParseRestore(tc.fam, []byte("*filter\n-A INPUT "+tc.in+"\nCOMMIT\n"))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		got := string(rs.AppendSave(nil, SaveOptions{}))
		want := "-A INPUT" + strings.TrimRight(" "+tc.save, " ") + "\n"
		if !strings.Contains(got, want) {
			t.Errorf("%s: save\n%s\nwant the line %q", tc.in, got, want)
		}
	}
	for _, tc := range []struct {
		fam     Family
		in, err string
	}{
		{IPv4, "-s 1.2.3.4/255.255.0", "invalid mask"},
		{IPv4, "-s 1.2.3.4/0.0.0", "invalid mask"},
		{IPv4, "-s 1.2.3.256", "not found"},
		{IPv4, "-s 1.2.3.4/", "invalid mask"},
		{IPv4, "-s 1.2.3.4/33", "invalid mask"},
		{IPv4, "-s 1.2.3./8", "not found"},
		{IPv4, "-s .1.2.3", "not found"},
		{IPv4, "-s 1.2.3.4/-0", "invalid mask"},
		{IPv4, "-s 1.2.3.4/0/1", "not found"},
		{IPv4, "-s 0x", "not found"},
		{IPv4, "-s 09", "not found"},
		{IPv4, "! -s 1.2.3.4/0", "never match"},
		{IPv4, "! -s junk/0", "never match"},
		{IPv4, "! -s 1.2.3.4 -d 1.1.1.1,2.2.2.2", "multiple source or destination"},
		{IPv4, "! -s 1.2.3.4 -d 1.1.1.1/0,2.2.2.2/0", "multiple source or destination"},
		{IPv4, "! -s 1.2.3.4,5.6.7.8 -d 1.1.1.1", "multiple source or destination"},
		{IPv6, "-s 1.2.3.4", "not an ipv6 address"},
	} {
		_, err := ParseRestore(tc.fam, []byte("*filter\n-A INPUT "+tc.in+"\nCOMMIT\n"))
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: error %v, want one naming line 2 with %q", tc.in, err, tc.err)
		}
	}
}

// TestAbbreviationsAmbiguousWithCommands: getopt_long's table holds
// iptables' command options too, so a prefix they share with a module's
// option is ambiguous (recorded with iptables-restore 1.8.9: "unknown
// option").
func TestAbbreviationsAmbiguousWithCommands(t *testing.T) {
	for _, spec := range []string{"-m helper --he ftp", "-m helper --hel ftp", "-m recent --re", "-m comment --c x", "-m mark --ma 1", "--in eth0"} {
		_, err := ParseRestore(IPv4, []byte("*filter\n-A INPUT "+spec+"\nCOMMIT\n"))
		if err == nil || !strings.Contains(err.Error(), "unknown option") {
			t.Errorf("%s: %v, want unknown option", spec, err)
		}
	}
	for spec, want := range map[string]string{
		"-m helper --helpe ftp": "-A INPUT -m helper --helper ftp",
		"--fragments":           "-A INPUT -f",
		"--fragm":               "-A INPUT -f",
	} {
		rs, err := ParseRestore(IPv4, []byte("*filter\n-A INPUT "+spec+"\nCOMMIT\n"))
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		if got := string(rs.AppendSave(nil, SaveOptions{})); !strings.Contains(got, want+"\n") {
			t.Errorf("%s: save\n%s\nwant %q", spec, got, want)
		}
	}
}

// TestSetOfOtherFamily: ip6tables refuses an IPv4 set and iptables an
// IPv6 one, in -m set and -j SET; a list:set has no family and fits both
// (recorded with iptables-restore 1.8.9 and ipset 7.17).
func TestSetOfOtherFamily(t *testing.T) {
	h := NewHost(HostConfig{})
	if err := h.Sets().Create("s4", "hash:ip", false); err != nil {
		t.Fatal(err)
	}
	if err := h.Sets().Create("s6", "hash:ip", false, "family", "inet6"); err != nil {
		t.Fatal(err)
	}
	if err := h.Sets().Create("sl", "list:set", false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    Family
		rule string
		err  string
	}{
		{IPv6, "-A INPUT -m set --match-set s4 src", "the protocol family of set s4 is IPv4, which is not applicable"},
		{IPv4, "-A INPUT -m set --match-set s6 src", "the protocol family of set s6 is IPv6, which is not applicable"},
		{IPv4, "-A INPUT -j SET --add-set s6 src", "the protocol family of set s6 is IPv6, which is not applicable"},
		{IPv4, "-A INPUT -m set --match-set s4 src", ""},
		{IPv6, "-A INPUT -m set --match-set s6 src", ""},
		{IPv6, "-A INPUT -m set --match-set sl src", ""},
		{IPv4, "-A INPUT -m set --match-set sl src", ""},
	} {
		err := h.Restore(tc.f, []byte("*filter\n"+tc.rule+"\nCOMMIT\n"), RestoreOptions{})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %s: %v", tc.f, tc.rule, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "line 2")):
			t.Errorf("%s %s: %v, want line 2: %s", tc.f, tc.rule, err, tc.err)
		}
	}
}
