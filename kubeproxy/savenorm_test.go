package kubeproxy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// This file predicts how iptables-save prints a rule kube-proxy wrote
// (docs/kube-proxy-notes.md, "What iptables-save shows for kube-proxy's
// rules", and docs/kernel-notes.md, "What iptables-save normalises"); the
// kernel test checks the
// prediction rule for rule. It is test-only: the netfilter package owns the
// real printer.

type word struct {
	s      string
	quoted bool
}

// splitWords splits a restore line on spaces, honouring double quotes.
func splitWords(line string) []word {
	var out []word
	for i := 0; i < len(line); {
		if line[i] == ' ' {
			i++
			continue
		}
		if line[i] == '"' {
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				j = len(line) - i - 1
			}
			out = append(out, word{line[i+1 : i+1+j], true})
			i += j + 2
			continue
		}
		j := strings.IndexByte(line[i:], ' ')
		if j < 0 {
			j = len(line) - i
		}
		out = append(out, word{line[i : i+j], false})
		i += j
	}
	return out
}

// saveString quotes like libxtables' xtables_save_string: only words made of
// [A-Za-z0-9_-]... are printed bare.
func saveString(s string) string {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return `"` + s + `"`
		}
	}
	return s
}

func hexMark(s string) string {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
	if err != nil {
		return "BAD(" + s + ")"
	}
	return fmt.Sprintf("0x%x", v)
}

func hostPrefix(a string, v6 bool) string {
	if strings.Contains(a, "/") {
		return a
	}
	if v6 {
		return a + "/128"
	}
	return a + "/32"
}

// savedProbability is what iptables-save prints for a --probability value:
// the u32 lround(p·2^31), printed %.11f.
func savedProbability(p string) string {
	f, err := strconv.ParseFloat(p, 64)
	if err != nil {
		return "BAD(" + p + ")"
	}
	stored := math.Round(f * 0x80000000)
	return fmt.Sprintf("%.11f", stored/0x80000000)
}

// predictSave turns one "-A CHAIN ..." restore line into iptables-save form.
func predictSave(line string, v6 bool) string {
	ws := splitWords(line)
	var head, mods []string
	var target []string
	hdr := map[string][]string{}
	neg := false
	inTarget := false
	curMod := ""
	var recent struct {
		name, mode, seconds string
		reap                bool
		at                  int
	}
	for i := 0; i < len(ws); i++ {
		w := ws[i].s
		if inTarget {
			target = append(target, w)
			continue
		}
		switch w {
		case "!":
			neg = true
			continue
		case "-A":
			head = append(head, "-A", ws[i+1].s)
			i++
		case "-s", "-d", "-i", "-o", "-p":
			val := ws[i+1].s
			if w == "-s" || w == "-d" {
				val = hostPrefix(val, v6)
			}
			if neg {
				hdr[w] = append(hdr[w], "!")
			}
			hdr[w] = append(hdr[w], w, val)
			i++
		case "-m":
			curMod = ws[i+1].s
			i++
			if curMod == "recent" {
				recent.at = len(mods)
				recent.name, recent.mode, recent.seconds, recent.reap = "", "", "", false
			}
			mods = append(mods, "-m", curMod)
		case "-j":
			inTarget = true
			target = append(target, "-j")
		default:
			if neg {
				mods = append(mods, "!")
			}
			switch {
			case curMod == "recent":
				switch w {
				case "--name":
					recent.name = ws[i+1].s
					i++
				case "--seconds":
					recent.seconds = ws[i+1].s
					i++
				case "--reap":
					recent.reap = true
				default:
					recent.mode = w
				}
			case w == "--comment":
				mods = append(mods, w, saveString(ws[i+1].s))
				i++
			case w == "--mark":
				m, mask, _ := strings.Cut(ws[i+1].s, "/")
				mods = append(mods, w, hexMark(m)+"/"+hexMark(mask))
				i++
			case w == "--probability":
				mods = append(mods, w, savedProbability(ws[i+1].s))
				i++
			case i+1 < len(ws) && !strings.HasPrefix(ws[i+1].s, "-") && ws[i+1].s != "!":
				mods = append(mods, w, ws[i+1].s)
				i++
			default:
				mods = append(mods, w)
			}
		}
		neg = false
	}
	if recent.mode != "" {
		mask := "255.255.255.255"
		if v6 {
			mask = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
		}
		r := []string{recent.mode}
		if recent.seconds != "" {
			r = append(r, "--seconds", recent.seconds)
		}
		if recent.reap {
			r = append(r, "--reap")
		}
		r = append(r, "--name", recent.name, "--mask", mask, "--rsource")
		at := recent.at + 2
		mods = append(mods[:at], append(r, mods[at:]...)...)
	}
	if len(target) > 1 {
		switch target[1] {
		case "MARK":
			if len(target) == 4 && target[2] == "--or-mark" {
				target = []string{"-j", "MARK", "--set-xmark", hexMark(target[3]) + "/" + hexMark(target[3])}
			} else if len(target) == 4 && target[2] == "--set-xmark" {
				v, m, _ := strings.Cut(target[3], "/")
				target[3] = hexMark(v) + "/" + hexMark(m)
			} else if len(target) == 4 && target[2] == "--xor-mark" {
				target = []string{"-j", "MARK", "--set-xmark", hexMark(target[3]) + "/0x0"}
			}
		case "REJECT":
			if len(target) == 2 {
				if v6 {
					target = append(target, "--reject-with", "icmp6-port-unreachable")
				} else {
					target = append(target, "--reject-with", "icmp-port-unreachable")
				}
			}
		}
	}
	for _, f := range []string{"-s", "-d", "-i", "-o", "-p"} {
		head = append(head, hdr[f]...)
	}
	out := append(head, mods...)
	out = append(out, target...)
	return strings.Join(out, " ")
}

// parsedSave is an iptables-save (or restore) document: per table, the
// declared chains and each chain's rules in order.
type parsedSave map[string]*parsedTable

type parsedTable struct {
	chains map[string]bool
	rules  map[string][]string
}

func parseSaveText(text string) parsedSave {
	out := parsedSave{}
	var cur *parsedTable
	for _, ln := range strings.Split(text, "\n") {
		switch {
		case ln == "" || strings.HasPrefix(ln, "#") || ln == "COMMIT":
		case strings.HasPrefix(ln, "*"):
			cur = &parsedTable{chains: map[string]bool{}, rules: map[string][]string{}}
			out[ln[1:]] = cur
		case strings.HasPrefix(ln, ":"):
			cur.chains[strings.Fields(ln[1:])[0]] = true
		case strings.HasPrefix(ln, "-A "):
			ch := strings.Fields(ln)[1]
			cur.rules[ch] = append(cur.rules[ch], ln)
		}
	}
	return out
}

// predictSaveDoc predicts iptables-save's view of a generated document.
func predictSaveDoc(doc string, v6 bool) parsedSave {
	p := parseSaveText(doc)
	for _, t := range p {
		for ch, rules := range t.rules {
			for i, r := range rules {
				rules[i] = predictSave(r, v6)
			}
			t.rules[ch] = rules
		}
	}
	return p
}
