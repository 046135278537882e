package kubeproxy

// lineBuffer accumulates iptables-restore lines. Words are separated by one
// space; it is reset and reused between generations so that steady-state
// generation allocates little, as kube-proxy's LineBuffer does.
type lineBuffer struct {
	b     []byte
	lines int
	open  bool // a line has been started and not ended
}

func (l *lineBuffer) reset() {
	l.b = l.b[:0]
	l.lines = 0
	l.open = false
}

func (l *lineBuffer) sep() {
	if l.open {
		l.b = append(l.b, ' ')
	}
	l.open = true
}

// w appends words to the current line.
func (l *lineBuffer) w(words ...string) *lineBuffer {
	for _, s := range words {
		l.sep()
		l.b = append(l.b, s...)
	}
	return l
}

// q appends one double-quoted word made of the concatenated parts, the way
// kube-proxy writes comments with spaces (`"ns/svc:p80 cluster IP"`).
func (l *lineBuffer) q(parts ...string) *lineBuffer {
	l.sep()
	l.b = append(l.b, '"')
	for _, s := range parts {
		l.b = append(l.b, s...)
	}
	l.b = append(l.b, '"')
	return l
}

// end terminates the current line.
func (l *lineBuffer) end() {
	l.b = append(l.b, '\n')
	l.lines++
	l.open = false
}

// line writes a whole line of words.
func (l *lineBuffer) line(words ...string) {
	l.w(words...)
	l.end()
}

// chain writes a chain declaration that creates or flushes a user chain.
func (l *lineBuffer) chain(name string) {
	l.b = append(l.b, ':')
	l.b = append(l.b, name...)
	l.b = append(l.b, " - [0:0]\n"...)
	l.lines++
}
