package netfilter

import (
	"math"
	"math/big"
	"sync"
)

// Probability is an exact probability of the form N/2^E, in lowest terms.
// The zero value is 0.
//
// Explain's probabilities are products of the kernel's 31-bit statistic
// fractions: along a cascade of n endpoints they grow to 31·n bits. They
// are therefore kept as the choices that make them and turned into
// numbers when first asked for, so that explaining stays linear in the
// paths. A Probability is safe for concurrent use.
type Probability struct {
	v *probValue
}

// probValue is a sum of products of choices, made exact once.
type probValue struct {
	arena *probArena
	terms []*probNode
	// f approximates the value; fErr bounds its relative error.
	f, fErr float64

	once sync.Once
	num  *big.Int
	exp  uint
}

// probNode is one choice on a path of random statistic rules: the path's
// probability up to here is parent's times factor/2^31.
type probNode struct {
	parent *probNode
	factor uint32
	depth  uint32  // number of factors, this one included
	f      float64 // the product as a float, for ordering

	exact *big.Int // numerator over 2^(31·depth), once computed
}

// probArena holds the choices of one Explain, which its outcomes share.
type probArena struct {
	// mu guards the exact products, computed lazily.
	mu   sync.Mutex
	root probNode // the empty product, 1
	// Nodes and values are allocated in chunks: an Explain makes one or
	// two of each per path.
	nodes  []probNode
	values []probValue
	made   int // nodes and values made so far, which sizes the next chunk
}

func newProbArena() *probArena {
	return &probArena{root: probNode{f: 1, exact: big.NewInt(1)}}
}

// node extends parent by a choice of probability factor/2^31.
func (a *probArena) node(parent *probNode, factor uint32) *probNode {
	if len(a.nodes) == 0 {
		a.nodes = make([]probNode, chunk(a.made))
	}
	a.made++
	n := &a.nodes[0]
	a.nodes = a.nodes[1:]
	*n = probNode{parent: parent, factor: factor, depth: parent.depth + 1,
		f: parent.f * (float64(factor) / (1 << 31))}
	return n
}

// product returns the node's exact numerator over 2^(31·depth). The caller
// holds the arena's lock.
func (n *probNode) product() *big.Int {
	if n.exact != nil {
		return n.exact
	}
	// Iteratively, from the nearest ancestor already known: a cascade of
	// 1000 endpoints is 1000 nodes deep.
	var path []*probNode
	for m := n; m.exact == nil; m = m.parent {
		path = append(path, m)
	}
	for i := len(path) - 1; i >= 0; i-- {
		m := path[i]
		m.exact = new(big.Int).Mul(m.parent.exact, big.NewInt(int64(m.factor)))
	}
	return n.exact
}

// sum returns the probability of the union of the paths ending in terms.
func (a *probArena) sum(terms []*probNode) Probability {
	if len(a.values) == 0 {
		a.values = make([]probValue, chunk(a.made))
	}
	a.made++
	v := &a.values[0]
	a.values = a.values[1:]
	v.arena, v.terms = a, terms
	depth := uint32(0)
	for _, t := range terms {
		v.f += t.f
		depth = max(depth, t.depth)
	}
	// Each product and each addition rounds once.
	v.fErr = float64(int(depth)+len(terms)+1) * 0x1p-52
	return Probability{v: v}
}

// exact computes N and E.
func (v *probValue) exact() (*big.Int, uint) {
	v.once.Do(func() {
		v.arena.mu.Lock()
		defer v.arena.mu.Unlock()
		var exp uint
		for _, t := range v.terms {
			exp = max(exp, 31*uint(t.depth))
		}
		sum := new(big.Int)
		for _, t := range v.terms {
			x := t.product()
			if shift := exp - 31*uint(t.depth); shift > 0 {
				x = new(big.Int).Lsh(x, shift)
			}
			sum.Add(sum, x)
		}
		if sum.Sign() == 0 {
			exp = 0
		} else {
			tz := min(sum.TrailingZeroBits(), exp)
			sum.Rsh(sum, tz)
			exp -= tz
		}
		v.num, v.exp = sum, exp
	})
	return v.num, v.exp
}

func (p Probability) parts() (*big.Int, uint) {
	if p.v == nil {
		return new(big.Int), 0
	}
	return p.v.exact()
}

// Rat returns the probability as a big.Rat.
func (p Probability) Rat() *big.Rat {
	return new(big.Rat).SetFrac(p.Numerator(), p.Denominator())
}

// Numerator returns N.
func (p Probability) Numerator() *big.Int {
	n, _ := p.parts()
	return new(big.Int).Set(n)
}

// Denominator returns 2^E.
func (p Probability) Denominator() *big.Int {
	_, e := p.parts()
	return new(big.Int).Lsh(big.NewInt(1), e)
}

// String returns "N/D", as big.Rat prints it ("1/1" for certainty).
func (p Probability) String() string {
	return p.Numerator().String() + "/" + p.Denominator().String()
}

// Float64 returns the nearest float64.
func (p Probability) Float64() float64 {
	n, e := p.parts()
	f := new(big.Float).SetInt(n)
	v, _ := f.SetMantExp(f, -int(e)).Float64()
	return v
}

// Cmp compares p and q, returning -1, 0 or +1.
func (p Probability) Cmp(q Probability) int {
	if p.v != nil && q.v != nil {
		if c, ok := approxCmp(p.v.f, p.v.fErr, q.v.f, q.v.fErr); ok {
			return c
		}
	}
	if c, ok := p.cmpPaths(q); ok {
		return c
	}
	x, xe := p.parts()
	y, ye := q.parts()
	x, y = new(big.Int).Set(x), new(big.Int).Set(y)
	if xe < ye {
		x.Lsh(x, ye-xe)
	} else {
		y.Lsh(y, xe-ye)
	}
	return x.Cmp(y)
}

// cmpPaths compares two single paths exactly through the choices below
// their common prefix, which is short when they branch late: the last two
// endpoints of a cascade share all but one choice.
func (p Probability) cmpPaths(q Probability) (int, bool) {
	if p.v == nil || q.v == nil || len(p.v.terms) != 1 || len(q.v.terms) != 1 {
		return 0, false
	}
	a, b := p.v.terms[0], q.v.terms[0]
	// Products below the common ancestor: x/2^(31·i) against y/2^(31·j).
	x, y := big.NewInt(1), big.NewInt(1)
	i, j := uint(0), uint(0)
	for a != b {
		if a.depth >= b.depth {
			x.Mul(x, big.NewInt(int64(a.factor)))
			a, i = a.parent, i+1
		} else {
			y.Mul(y, big.NewInt(int64(b.factor)))
			b, j = b.parent, j+1
		}
		if a == nil || b == nil {
			return 0, false // different arenas
		}
	}
	x.Lsh(x, 31*j)
	y.Lsh(y, 31*i)
	return x.Cmp(y), true
}

// approxCmp compares two approximations a and b with relative errors ea
// and eb; it decides only when they are further apart than their errors.
func approxCmp(a, ea, b, eb float64) (int, bool) {
	if math.Abs(a-b) <= a*ea+b*eb {
		return 0, false
	}
	if a < b {
		return -1, true
	}
	return 1, true
}
