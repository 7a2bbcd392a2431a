package grammar

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Bound is one end of a numeric range: Value is a JSON number literal
// ("0", "-12", "3.5", "1e3", "-0.25") and Exclusive leaves the value itself
// out of the range.
type Bound struct {
	Value     string
	Exclusive bool
}

// maxBoundExp bounds the decimal exponent of a Bound's literal, so that a
// bound such as 1e1000000000 fails instead of making a huge grammar.
const maxBoundExp = 1000

// ErrEmptyRange is the error of Integer and Number when no number lies
// within the bounds.
var ErrEmptyRange = errors.New("grammar: empty numeric range")

// Integer returns a symbol for the JSON integers -?(0|[1-9][0-9]*) within
// min and max (nil: unbounded). A bound that is not an integer rounds
// inward: a minimum of 2.5 means >= 3, a maximum of 2.5 means <= 2. An
// empty range is an error (ErrEmptyRange).
//
// Negative zero ("-0") is never accepted: a '-' is always followed by a
// nonzero value, so every accepted text is the integer's canonical JSON
// spelling. The grammar is built digit-wise (by number of digits, then per
// digit against the bounds' digits), so its size grows with the bounds'
// digits, not with the number of values in the range.
func (b *Builder) Integer(min, max *Bound) (Sym, error) {
	lo, hi, err := parseBounds(min, max)
	if err != nil {
		return Sym{}, err
	}
	// Round the bounds inward to inclusive integer bounds.
	if lo != nil {
		f := floorRat(lo.v)
		if lo.excl || new(big.Rat).SetInt(f).Cmp(lo.v) != 0 {
			f.Add(f, big.NewInt(1))
		}
		lo = intBound(f)
	}
	if hi != nil {
		f := floorRat(hi.v)
		if hi.excl && new(big.Rat).SetInt(f).Cmp(hi.v) == 0 {
			f.Sub(f, big.NewInt(1))
		}
		hi = intBound(f)
	}
	if lo != nil && hi != nil && lo.v.Cmp(hi.v) > 0 {
		return Sym{}, fmt.Errorf("%w: no integer in [%s, %s]", ErrEmptyRange, min.Value, max.Value)
	}
	return b.numberRange("integer", lo, hi, false, false)
}

// Number returns a symbol for the JSON numbers
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? within min and max (nil:
// unbounded). An empty range is an error (ErrEmptyRange).
//
// It is exact, and strict: when every given bound is 0 (or there is none)
// the sign of a number is that of its mantissa, so exponents are allowed and
// the grammar is exact over all of JSON's numbers (less negative zero); with
// any other bound, exponent forms are refused altogether and the grammar
// accepts exactly the plain decimals (trailing fraction zeros allowed)
// within the bounds. Negative zero ("-0", "-0.0", "-0e1") is never accepted.
func (b *Builder) Number(min, max *Bound) (Sym, error) {
	lo, hi, err := parseBounds(min, max)
	if err != nil {
		return Sym{}, err
	}
	if lo != nil && hi != nil {
		c := lo.v.Cmp(hi.v)
		if c > 0 || c == 0 && (lo.excl || hi.excl) {
			return Sym{}, fmt.Errorf("%w: no number in the bounds %s and %s", ErrEmptyRange, min.Value, max.Value)
		}
	}
	exp := (lo == nil || lo.v.Sign() == 0) && (hi == nil || hi.v.Sign() == 0)
	return b.numberRange("number", lo, hi, true, exp)
}

// bound is a parsed Bound: its value, and its magnitude's decimal digits.
type bound struct {
	v    *big.Rat
	excl bool
	neg  bool
	dec  decimal
}

// decimal is a non-negative finite decimal: integer digits without leading
// zeros ("0" for none) and fraction digits without trailing zeros.
type decimal struct {
	ip, fp string
}

func (d decimal) digits() string { return d.ip + d.fp }

func parseBounds(min, max *Bound) (lo, hi *bound, err error) {
	if min != nil {
		if lo, err = parseBound(*min); err != nil {
			return nil, nil, err
		}
	}
	if max != nil {
		if hi, err = parseBound(*max); err != nil {
			return nil, nil, err
		}
	}
	return lo, hi, nil
}

// parseBound reads a JSON number literal.
func parseBound(bd Bound) (*bound, error) {
	s := bd.Value
	bad := func() (*bound, error) { return nil, fmt.Errorf("grammar: bound %q is not a JSON number", s) }
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	digitsAt := func() string {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		d := s[i:j]
		i = j
		return d
	}
	ip := digitsAt()
	if ip == "" || len(ip) > 1 && ip[0] == '0' {
		return bad()
	}
	fp := ""
	if i < len(s) && s[i] == '.' {
		i++
		if fp = digitsAt(); fp == "" {
			return bad()
		}
	}
	e := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		ed := digitsAt()
		if ed == "" {
			return bad()
		}
		ed = strings.TrimLeft(ed, "0")
		if len(ed) > 5 {
			return nil, fmt.Errorf("grammar: bound %q: exponent too large", s)
		}
		for _, c := range ed {
			e = e*10 + int(c-'0')
		}
		if eneg {
			e = -e
		}
	}
	if i != len(s) {
		return bad()
	}
	if e > maxBoundExp || e < -maxBoundExp {
		return nil, fmt.Errorf("grammar: bound %q: exponent beyond ±%d", s, maxBoundExp)
	}
	// Move the decimal point by e.
	all := ip + fp
	point := len(ip) + e
	if point < 0 {
		all = strings.Repeat("0", -point) + all
		point = 0
	}
	if point > len(all) {
		all += strings.Repeat("0", point-len(all))
	}
	d := decimal{ip: strings.TrimLeft(all[:point], "0"), fp: strings.TrimRight(all[point:], "0")}
	if d.ip == "" {
		d.ip = "0"
	}
	r, ok := new(big.Rat).SetString(d.ip + "." + d.fp + "0")
	if !ok {
		return bad()
	}
	if d.ip == "0" && d.fp == "" {
		neg = false
	}
	if neg {
		r.Neg(r)
	}
	return &bound{v: r, excl: bd.Exclusive, neg: neg, dec: d}, nil
}

func floorRat(r *big.Rat) *big.Int {
	// Euclidean division by a positive denominator is the floor.
	return new(big.Int).Div(r.Num(), r.Denom())
}

func intBound(i *big.Int) *bound {
	bd := &bound{v: new(big.Rat).SetInt(i), neg: i.Sign() < 0}
	bd.dec = decimal{ip: new(big.Int).Abs(i).String()}
	return bd
}

// numberRange builds the numbers within [lo, hi] (nil: unbounded): those
// written without a sign (x >= 0) and those written with '-' (-x, x > 0),
// each a range of magnitudes.
func (b *Builder) numberRange(name string, lo, hi *bound, frac, exp bool) (Sym, error) {
	zero := &bound{v: new(big.Rat), dec: decimal{ip: "0"}}
	nb := &numBuilder{b: b, frac: frac}
	var alts [][]Sym
	var expSym Sym
	if exp {
		digit := T(Range('0', '9'))
		expSym = b.Opt(b.Seq("exponent", T(Bytes('e', 'E')), b.Opt(T(Bytes('+', '-'))), b.Plus(digit)))
	}
	add := func(s Sym, ok bool, neg bool) {
		if !ok {
			return
		}
		var a []Sym
		if neg {
			a = append(a, B('-'))
		}
		a = append(a, s)
		if exp {
			a = append(a, expSym)
		}
		alts = append(alts, a)
	}
	// x >= 0: from max(lo, 0) to hi.
	if hi == nil || hi.v.Sign() > 0 || hi.v.Sign() == 0 && !hi.excl {
		plo, ploExcl := zero.dec, false
		if lo != nil && lo.v.Sign() >= 0 {
			plo, ploExcl = lo.dec, lo.excl
		}
		var phi *decimal
		phiExcl := false
		if hi != nil {
			phi, phiExcl = &hi.dec, hi.excl
		}
		s, ok := nb.magnitudes(plo, ploExcl, phi, phiExcl)
		add(s, ok, false)
	}
	// x < 0, written -m: m from max(-hi, 0) (exclusive at 0) to -lo.
	if lo == nil || lo.v.Sign() < 0 {
		mlo, mloExcl := zero.dec, true
		if hi != nil && hi.v.Sign() < 0 {
			mlo, mloExcl = hi.dec, hi.excl
		}
		var mhi *decimal
		mhiExcl := false
		if lo != nil {
			mhi, mhiExcl = &lo.dec, lo.excl
		}
		s, ok := nb.magnitudes(mlo, mloExcl, mhi, mhiExcl)
		add(s, ok, true)
	}
	if b.err != nil {
		return Sym{}, b.err
	}
	if len(alts) == 0 {
		return Sym{}, fmt.Errorf("%w", ErrEmptyRange)
	}
	return b.Choice(name, alts...), nil
}

// numBuilder builds ranges of unsigned decimals (integer part 0 or without
// leading zero, optional fraction of one or more digits when frac).
type numBuilder struct {
	b    *Builder
	frac bool
	// shared symbols, made on first use.
	fracOpt, eps *Sym
}

func (nb *numBuilder) digit() Sym { return T(Range('0', '9')) }

func (nb *numBuilder) optFraction() Sym {
	if nb.fracOpt == nil {
		var s Sym
		if nb.frac {
			s = nb.b.Opt(nb.b.Seq("fraction", B('.'), nb.b.Plus(nb.digit())))
		} else {
			s = nb.empty()
		}
		nb.fracOpt = &s
	}
	return *nb.fracOpt
}

func (nb *numBuilder) empty() Sym {
	if nb.eps == nil {
		nt := nb.b.Rule("empty")
		nb.b.Alt(nt)
		s := N(nt)
		nb.eps = &s
	}
	return *nb.eps
}

// magnitudes returns a symbol for the unsigned decimals x with lo <= x
// (lo < x if loExcl) and x <= hi (x < hi if hiExcl; hi nil: unbounded),
// and whether there is any.
func (nb *numBuilder) magnitudes(lo decimal, loExcl bool, hi *decimal, hiExcl bool) (Sym, bool) {
	var alts [][]Sym
	nlo := len(lo.ip)
	nhi := -1
	if hi != nil {
		nhi = len(hi.ip)
		if nhi < nlo {
			return Sym{}, false
		}
	}
	// Integer parts as long as lo's: compared digit by digit with lo (and
	// with hi when it is as long).
	g := &digitGen{nb: nb, n: nlo, lo: lo.digits(), loCmp: true, loExcl: loExcl}
	if nhi == nlo {
		g.hi, g.hiCmp, g.hiExcl = hi.digits(), true, hiExcl
	}
	if s, ok := g.start(); ok {
		alts = append(alts, []Sym{s})
	}
	// Integer parts strictly between: free.
	first := T(Range('1', '9'))
	switch {
	case nhi < 0:
		alts = append(alts, []Sym{first, nb.b.Repeat(nb.digit(), nlo, -1), nb.optFraction()})
	case nhi-1 > nlo:
		alts = append(alts, []Sym{first, nb.b.Repeat(nb.digit(), nlo, nhi-2), nb.optFraction()})
	}
	// Integer parts as long as hi's (longer than lo's): compared with hi.
	if nhi > nlo {
		g := &digitGen{nb: nb, n: nhi, hi: hi.digits(), hiCmp: true, hiExcl: hiExcl}
		if s, ok := g.start(); ok {
			alts = append(alts, []Sym{s})
		}
	}
	if len(alts) == 0 {
		return Sym{}, false
	}
	return nb.b.Choice("magnitude", alts...), true
}

// digitGen builds the unsigned decimals whose integer part has n digits,
// compared digit by digit (integer digits, then fraction digits, both
// bounds' digit strings aligned at the same point and padded with zeros)
// with lo and hi where loCmp and hiCmp. Its states are positions with
// whether the digits so far equal the bound's (loEq, hiEq); once neither
// does, the rest is free.
type digitGen struct {
	nb             *numBuilder
	n              int
	lo, hi         string
	loCmp, hiCmp   bool
	loExcl, hiExcl bool
	memo           map[genKey]genRes
}

type genKind int8

const (
	kInt   genKind = iota // an integer digit at position i
	kAfter                // after the integer part: end, or '.'
	kFrac                 // the first fraction digit (position i = n)
	kMore                 // further fraction digits, or end
)

type genKey struct {
	kind       genKind
	i          int
	loEq, hiEq bool
}

type genRes struct {
	sym  Sym
	ok   bool
	done bool
}

func (g *digitGen) start() (Sym, bool) {
	g.memo = map[genKey]genRes{}
	return g.gen(genKey{kind: kInt, i: 0, loEq: g.loCmp, hiEq: g.hiCmp})
}

func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return '0'
}

func zeroFrom(s string, i int) bool {
	for ; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// clampFrac maps fraction positions past both bounds' digits to one state.
func (g *digitGen) clampFrac(i int) int {
	c := g.n + 1
	if g.loCmp && len(g.lo) > c {
		c = len(g.lo)
	}
	if g.hiCmp && len(g.hi) > c {
		c = len(g.hi)
	}
	if i > c {
		return c
	}
	return i
}

// canEnd reports whether a number ending at digit position i, with the
// given equalities, is within the bounds.
func (g *digitGen) canEnd(k genKey) bool {
	if k.loEq && (!zeroFrom(g.lo, k.i) || g.loExcl) {
		return false // below lo, or equal to an exclusive lo
	}
	if k.hiEq && zeroFrom(g.hi, k.i) && g.hiExcl {
		return false // equal to an exclusive hi
	}
	return true
}

func (g *digitGen) gen(k genKey) (Sym, bool) {
	if r, ok := g.memo[k]; ok {
		if !r.done {
			return Sym{}, false // a loop onto itself adds nothing
		}
		return r.sym, r.ok
	}
	g.memo[k] = genRes{}
	s, ok := g.build(k)
	g.memo[k] = genRes{sym: s, ok: ok, done: true}
	return s, ok
}

func (g *digitGen) build(k genKey) (Sym, bool) {
	b, nb := g.nb.b, g.nb
	if !k.loEq && !k.hiEq {
		switch k.kind {
		case kInt:
			return b.Seq("digits", b.Repeat(nb.digit(), g.n-k.i, g.n-k.i), nb.optFraction()), true
		case kAfter:
			return nb.optFraction(), true
		case kFrac:
			return b.Plus(nb.digit()), true
		default:
			return b.Star(nb.digit()), true
		}
	}
	var alts [][]Sym
	if (k.kind == kAfter || k.kind == kMore) && g.canEnd(k) {
		alts = append(alts, nil)
	}
	if k.kind == kAfter {
		if nb.frac {
			if s, ok := g.gen(genKey{kFrac, g.n, k.loEq, k.hiEq}); ok {
				alts = append(alts, []Sym{B('.'), s})
			}
		}
	} else {
		// A digit: group the digits by the state they lead to.
		var next genKey
		switch k.kind {
		case kInt:
			next = genKey{kind: kInt, i: k.i + 1}
			if k.i+1 == g.n {
				next = genKey{kind: kAfter, i: g.n}
			}
		default:
			next = genKey{kind: kMore, i: g.clampFrac(k.i + 1)}
		}
		lod, hid := at(g.lo, k.i), at(g.hi, k.i)
		var sets []ByteSet
		var keys []genKey
		var loop ByteSet
		d0 := byte('0')
		if k.kind == kInt && k.i == 0 && g.n > 1 {
			d0 = '1'
		}
		for d := d0; d <= '9'; d++ {
			t := next
			t.loEq, t.hiEq = k.loEq, k.hiEq
			if k.loEq {
				if d < lod {
					continue
				}
				t.loEq = d == lod
			}
			if k.hiEq {
				if d > hid {
					continue
				}
				t.hiEq = d == hid
			}
			if t == k {
				loop.Add(d)
				continue
			}
			j := 0
			for j < len(keys) && keys[j] != t {
				j++
			}
			if j == len(keys) {
				keys = append(keys, t)
				sets = append(sets, ByteSet{})
			}
			sets[j].Add(d)
		}
		for j, t := range keys {
			if s, ok := g.gen(t); ok {
				alts = append(alts, []Sym{T(sets[j]), s})
			}
		}
		if loop != (ByteSet{}) && len(alts) > 0 {
			// A run of digits that keeps the state: left-recursive, so
			// that long runs cost constant items per byte.
			body := b.Choice("digits", alts...)
			return b.Seq("digits", b.Star(T(loop)), body), true
		}
	}
	if len(alts) == 0 {
		return Sym{}, false
	}
	return b.Choice("digits", alts...), true
}
