package netfilter

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExtGrammarFacts pins what the grammar differential found iptables
// 1.8.9 doing with the issue-19 extensions (docs/kernel-notes.md, "Real
// rulesets" and "Issue-19 grammar"): the iptables-save line of each
// accepted rule, or a refusal.
func TestExtGrammarFacts(t *testing.T) {
	for _, tc := range []struct {
		fam       Family
		rule      string
		save, err string
	}{
		{IPv4, "-m ttl --ttl 68", "-A INPUT -m ttl --ttl-eq 68", ""},
		{IPv4, "-m ttl ! --ttl 5", "-A INPUT -m ttl ! --ttl-eq 5", ""},
		{IPv6, "-m hl --hl 5", "-A INPUT -m hl --hl-eq 5", ""},
		{IPv4, "-p ah -m ah --ah 240", "-A INPUT -p ah -m ah --ahspi 240", ""},
		{IPv4, "-m connlimit --connlimit-upto 8 --connlimit-mask 101", "-A INPUT -m connlimit --connlimit-upto 8 --connlimit-mask 32 --connlimit-saddr", ""},
		{IPv4, "-m connlimit --connlimit-upto 8 --connlimit-mask 256", "-A INPUT -m connlimit --connlimit-upto 8 --connlimit-mask 32 --connlimit-saddr", ""},
		{IPv6, "-m connlimit --connlimit-upto 8 --connlimit-mask 129", "", "--connlimit-mask"},
		{IPv4, "-m time --monthdays 0,31,1", "-A INPUT -m time --monthdays 1,31 --datestop 2038-01-19T03:14:07", ""},
		{IPv4, "-m time ! --monthdays 0", "-A INPUT -m time --monthdays 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31 --datestop 2038-01-19T03:14:07", ""},
		{IPv4, "-m time --monthdays 0", "-A INPUT -m time --monthdays  --datestop 2038-01-19T03:14:07", ""},
		{IPv4, "-m time --datestart 2038-12-31T23:59:59", "-A INPUT -m time --datestart 2038-12-31T23:59:59 --datestop 2038-01-19T03:14:07", ""},
		{IPv4, "-m time --datestart 2039", "", "2039"},
		{IPv4, "-m time --weekdays 1,8", "-A INPUT -m time --weekdays Mon --datestop 2038-01-19T03:14:07", ""},
		{IPv4, "-m time --weekdays 100", "-A INPUT -m time --weekdays Thu --datestop 2038-01-19T03:14:07", ""},
		{IPv4, "-m time --weekdays 40", "-A INPUT -m time --weekdays  --datestop 2038-01-19T03:14:07", ""},
		{IPv4, "-m time ! --weekdays 8", "-A INPUT -m time --datestop 2038-01-19T03:14:07", ""},
		{IPv4, "-m time --weekdays 0", "", "--weekdays"},
		{IPv6, "-m time --datestop 2040", "", "2040"},
	} {
		rs := NewRuleset(tc.fam)
		err := rs.Exec("-A INPUT " + tc.rule)
		if tc.err != "" {
			require.Error(t, err, tc.rule)
			assert.ErrorIs(t, err, ErrBadValue, tc.rule)
			assert.Contains(t, err.Error(), tc.err, tc.rule)
			continue
		}
		require.NoError(t, err, tc.rule)
		save := string(rs.AppendSave(nil, SaveOptions{}))
		found := false
		for _, l := range strings.Split(save, "\n") {
			found = found || l == tc.save
		}
		assert.True(t, found, "%s: want %q in\n%s", tc.rule, tc.save, save)
	}
	// ip6tables' ah has --ahlen and --ahres too: "--ah" is ambiguous there.
	assert.Error(t, NewRuleset(IPv6).Exec("-A INPUT -m ah --ah 5"))
	// CLASSIFY is limited by hook, not table.
	for _, line := range []string{"-A OUTPUT -j CLASSIFY --set-class 1:1", "-t nat -A POSTROUTING -j CLASSIFY --set-class 1:1", "-t raw -A OUTPUT -j CLASSIFY --set-class 1:1"} {
		assert.NoError(t, NewRuleset(IPv4).Exec(line), line)
	}
	// Day 0 is a bit no day has: "--monthdays 0" never matches.
	m := parseMatch(t, IPv4, "INPUT", "-m time --monthdays 0")
	all := parseMatch(t, IPv4, "INPUT", "-m time ! --monthdays 0")
	for d := 1; d <= 31; d++ {
		h := NewHost(HostConfig{Clock: NewManualClock(time.Date(2025, time.January, d, 12, 0, 0, 0, time.UTC))})
		assert.False(t, evalOn(h, m, Packet{}), "day %d", d)
		assert.True(t, evalOn(h, all, Packet{}), "day %d", d)
	}
}
