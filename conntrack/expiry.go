package conntrack

import (
	"math"
	"time"
)

// Expiry without scanning the table. Every confirmed entry is filed under
// the slot of its deadline (slots of 2^30 ns, about a second) in a map
// from slot to entries, with a min-heap of the slots in use. A packet
// that extends an entry's life (the usual case) leaves it where it is:
// when its slot comes due, Expire finds the later deadline and files the
// entry again. Only a deadline moved to an earlier slot (a FIN, a RST,
// REJECT's close) files the entry at once. An entry removed otherwise
// leaves a stale reference, skipped when its slot comes due; when stale
// references outnumber the live entries the slots are rebuilt, so the
// cost stays proportional to the entries that expire or move.

const slotShift = 30

// timers is the table's deadline index.
type timers struct {
	slots map[int64][]*Entry
	heap  []int64 // slot keys, a min-heap; a key may outlive its list
	refs  int     // references held in slots, stale ones included
	// cur is the slot Expire last scanned because now was in it, and
	// curMin the earliest deadline (Unix ns) left there: until now
	// reaches it, the slot need not be scanned again.
	cur, curMin int64
}

func (w *timers) reset() {
	w.slots = nil
	w.heap = w.heap[:0]
	w.refs = 0
	w.cur = 0
}

// key returns the slot of deadline at: its Unix time in units of 2^30 ns,
// at least 1 (0 means unfiled; earlier deadlines share slot 1).
func (w *timers) key(at int64) int64 {
	return max(at>>slotShift, 1)
}

// schedule files a confirmed entry under its deadline's slot unless it is
// already filed at that slot or an earlier one.
func (t *Table) schedule(e *Entry) {
	w := &t.timers
	k := w.key(e.expires)
	if k == w.cur {
		w.curMin = min(w.curMin, e.expires)
	}
	if e.timer != 0 && e.timer <= k {
		return
	}
	if w.slots == nil {
		w.slots = map[int64][]*Entry{}
	}
	list, ok := w.slots[k]
	if !ok {
		w.push(k)
	}
	w.slots[k] = append(list, e)
	w.refs++
	e.timer = k
	if w.refs > 2*t.count+4096 {
		t.refile()
	}
}

// setExpires changes a confirmed entry's deadline.
func (t *Table) setExpires(e *Entry, at time.Time) {
	e.expires = unixNano(at)
	t.schedule(e)
}

// refile rebuilds the slots from the live entries, dropping stale
// references.
func (t *Table) refile() {
	w := &t.timers
	clear(w.slots)
	w.heap = w.heap[:0]
	w.refs = 0
	w.cur = 0
	t.idx.entries(func(e *Entry) { e.timer = 0 })
	t.idx.entries(func(e *Entry) { t.schedule(e) })
}

// Expire removes every entry whose timer has run out and returns how many
// it removed (the kernel's garbage collector, run explicitly). Its cost
// is proportional to the entries whose slot came due, not to the table.
func (t *Table) Expire() int {
	now := t.clock.Now()
	w := &t.timers
	nowKey := w.key(now.UnixNano())
	n := 0
	for len(w.heap) > 0 && w.heap[0] < nowKey {
		k := w.pop()
		if k == w.cur {
			w.cur = 0
		}
		list := w.slots[k]
		delete(w.slots, k)
		w.refs -= len(list)
		for _, e := range list {
			if e.timer != k {
				continue // filed again earlier, or removed
			}
			e.timer = 0
			if e.expired(now) {
				if t.Remove(e) {
					n++
				}
				continue
			}
			if t.live(e) {
				t.schedule(e)
			}
		}
	}
	// The current slot holds deadlines on both sides of now; it is
	// scanned again only once now reaches the earliest left.
	if w.cur == nowKey && now.UnixNano() < w.curMin {
		return n
	}
	if list, ok := w.slots[nowKey]; ok {
		keep := list[:0]
		earliest := int64(math.MaxInt64)
		for _, e := range list {
			switch {
			case e.timer != nowKey:
			case e.expired(now):
				e.timer = 0
				if t.Remove(e) {
					n++
				}
			default:
				keep = append(keep, e)
				earliest = min(earliest, e.expires)
				continue
			}
			w.refs--
		}
		clear(list[len(keep):])
		w.slots[nowKey] = keep
		w.cur, w.curMin = nowKey, earliest
	}
	return n
}

// live reports whether e is in the table.
func (t *Table) live(e *Entry) bool {
	orig := e.Original()
	got, _, ok := t.idx.get(&orig)
	return ok && got == e
}

func (w *timers) push(k int64) {
	h := append(w.heap, k)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	w.heap = h
}

func (w *timers) pop() int64 {
	h := w.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if r < len(h) && h[r] < h[m] {
			m = r
		}
		if m == i {
			break
		}
		h[m], h[i] = h[i], h[m]
		i = m
	}
	w.heap = h
	return top
}
