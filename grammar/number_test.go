package grammar

import (
	"errors"
	"math/big"
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// acceptsString reports whether g matches all of s.
func acceptsString(g *Grammar, s string) bool { return accepts(g, []byte(s)) }

var (
	jsonIntRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	jsonNumRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
)

// refAccepts is what Integer or Number should accept: canonical JSON
// syntax, never negative zero, exponents only when every bound is 0 or
// absent, and the value within the bounds (by big.Rat).
func refAccepts(s string, min, max *Bound, integer bool) bool {
	if integer && !jsonIntRE.MatchString(s) || !integer && !jsonNumRE.MatchString(s) {
		return false
	}
	if strings.ContainsAny(s, "eE") {
		for _, bd := range []*Bound{min, max} {
			if bd != nil && ratOf(bd.Value).Sign() != 0 {
				return false
			}
		}
	}
	v := ratOf(s)
	if s[0] == '-' && v.Sign() == 0 {
		return false
	}
	if min != nil {
		c := v.Cmp(ratOf(min.Value))
		if c < 0 || c == 0 && min.Exclusive {
			return false
		}
	}
	if max != nil {
		c := v.Cmp(ratOf(max.Value))
		if c > 0 || c == 0 && max.Exclusive {
			return false
		}
	}
	return true
}

func ratOf(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("bad number " + s)
	}
	return r
}

// candidates are strings near the bounds and elsewhere, valid or not.
func candidates(rng *rand.Rand, bounds []string) []string {
	out := []string{
		"", "-", "0", "-0", "00", "01", "-01", "1", "-1", "1.", ".5", "+1", "-.5", "0.", "0.0", "0.000", "-0.0",
		"0.5", "1.0", "1.5", "2", "3", "9", "10", "11", "99", "100", "101", "999", "1000", "-1000", "-1001",
		"1e3", "1E3", "1e+3", "1e-3", "0e5", "-0e1", "2.5e1", "1e", "1e+", "--1", "1..2", "1.2.3", "0x1", " 1",
		"2147483647", "2147483648", "-2147483648", "-2147483649", "90", "-90", "90.0", "90.0001", "-90.00001",
		"89.999", "1.49", "1.5", "1.50", "1.51", "0.0001", "-0.0001", "12345678901234567890",
	}
	digits := func(n int) string {
		var sb strings.Builder
		for i := 0; i < n; i++ {
			sb.WriteByte(byte('0' + rng.Intn(10)))
		}
		return sb.String()
	}
	for _, bs := range bounds {
		if strings.ContainsAny(bs, "eE") {
			bs = ratOf(bs).FloatString(6)
			bs = strings.TrimRight(strings.TrimRight(bs, "0"), ".")
		}
		out = append(out, bs, bs+"0", bs+".0", bs+".000", bs+"1", bs+".0001", "-"+bs)
		if strings.HasPrefix(bs, "-") {
			out = append(out, bs[1:])
		}
		// Change one digit up or down.
		for i := 0; i < len(bs); i++ {
			if bs[i] >= '0' && bs[i] <= '9' {
				for _, d := range []int{-1, 1} {
					c := int(bs[i]-'0') + d
					if c >= 0 && c <= 9 {
						out = append(out, bs[:i]+string(rune('0'+c))+bs[i+1:])
					}
				}
			}
		}
		// Drop a digit, add one.
		if len(bs) > 1 {
			out = append(out, bs[:len(bs)-1], bs[1:])
		}
	}
	for i := 0; i < 300; i++ {
		var s string
		if rng.Intn(3) == 0 {
			s = "-"
		}
		n := 1 + rng.Intn(6)
		ip := digits(n)
		if rng.Intn(4) != 0 {
			ip = strings.TrimLeft(ip, "0")
			if ip == "" {
				ip = "0"
			}
		}
		s += ip
		if rng.Intn(2) == 0 {
			s += "." + digits(rng.Intn(5))
		}
		if rng.Intn(8) == 0 {
			s += "e" + []string{"", "+", "-"}[rng.Intn(3)] + digits(rng.Intn(3))
		}
		out = append(out, s)
	}
	return out
}

func TestNumberBounds(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	vals := []string{"0", "1", "-1", "1.5", "-1.5", "90", "-90", "2.5", "-2.5", "0.25", "-0.25", "10", "99",
		"100", "-1000", "2147483647", "1e3", "-12", "3.5", "0.001", "1000.5", "7", "5.05", "-0.0"}
	type pair struct{ min, max *Bound }
	var pairs []pair
	pairs = append(pairs, pair{nil, nil})
	for _, v := range vals {
		for _, ex := range []bool{false, true} {
			pairs = append(pairs, pair{&Bound{v, ex}, nil}, pair{nil, &Bound{v, ex}})
		}
	}
	for i := 0; i < 120; i++ {
		a, c := vals[rng.Intn(len(vals))], vals[rng.Intn(len(vals))]
		if ratOf(a).Cmp(ratOf(c)) > 0 {
			a, c = c, a
		}
		pairs = append(pairs, pair{&Bound{a, rng.Intn(2) == 0}, &Bound{c, rng.Intn(2) == 0}})
	}
	// The common cases.
	pairs = append(pairs,
		pair{&Bound{"0", false}, nil}, pair{&Bound{"0", true}, nil},
		pair{&Bound{"0", false}, &Bound{"1", false}}, pair{&Bound{"-90", false}, &Bound{"90", false}},
		pair{&Bound{"1.5", false}, nil}, pair{&Bound{"-1000", false}, &Bound{"2147483647", false}},
	)
	for _, integer := range []bool{false, true} {
		for _, p := range pairs {
			var b Builder
			var s Sym
			var err error
			if integer {
				s, err = b.Integer(p.min, p.max)
			} else {
				s, err = b.Number(p.min, p.max)
			}
			name := boundsName(p.min, p.max, integer)
			if err != nil {
				if !errors.Is(err, ErrEmptyRange) {
					t.Errorf("%s: %v", name, err)
					continue
				}
				// Check that the range really is empty.
				for _, c := range candidates(rng, boundStrings(p.min, p.max)) {
					if refAccepts(c, p.min, p.max, integer) {
						t.Errorf("%s: empty range error, but %q is in it", name, c)
						break
					}
				}
				continue
			}
			top := b.Rule("top")
			b.Alt(top, s)
			g, err := b.Build(top)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, c := range candidates(rng, boundStrings(p.min, p.max)) {
				if got, want := acceptsString(g, c), refAccepts(c, p.min, p.max, integer); got != want {
					t.Errorf("%s: %q accepted %v, want %v", name, c, got, want)
				}
			}
		}
	}
}

func boundStrings(min, max *Bound) []string {
	var out []string
	for _, bd := range []*Bound{min, max} {
		if bd != nil {
			out = append(out, bd.Value)
		}
	}
	return out
}

func boundsName(min, max *Bound, integer bool) string {
	s := "number"
	if integer {
		s = "integer"
	}
	s += " "
	if min == nil {
		s += "(-inf"
	} else if min.Exclusive {
		s += "(" + min.Value
	} else {
		s += "[" + min.Value
	}
	s += ", "
	if max == nil {
		s += "inf)"
	} else if max.Exclusive {
		s += max.Value + ")"
	} else {
		s += max.Value + "]"
	}
	return s
}

func TestNumberEmptyRange(t *testing.T) {
	for _, tc := range []struct {
		min, max Bound
		integer  bool
	}{
		{Bound{"2.5", false}, Bound{"2.7", false}, true},
		{Bound{"3", true}, Bound{"4", true}, true},
		{Bound{"5", true}, Bound{"5", false}, false},
		{Bound{"5", false}, Bound{"5", true}, false},
		{Bound{"6", false}, Bound{"5", false}, false},
	} {
		var b Builder
		var err error
		if tc.integer {
			_, err = b.Integer(&tc.min, &tc.max)
		} else {
			_, err = b.Number(&tc.min, &tc.max)
		}
		if !errors.Is(err, ErrEmptyRange) {
			t.Errorf("%v %v: err %v, want ErrEmptyRange", tc.min, tc.max, err)
		}
	}
	var b Builder
	for _, v := range []string{"", "1.", ".5", "+1", "01", "1e", "1e400000", "x"} {
		if _, err := b.Number(&Bound{v, false}, nil); err == nil {
			t.Errorf("bound %q accepted", v)
		}
	}
}

// TestNumberSize checks that a wide integer range costs a grammar that grows
// with the bounds' digits, not with the number of values.
func TestNumberSize(t *testing.T) {
	var b Builder
	b.SetLimit(5000)
	if _, err := b.Integer(&Bound{"-1000", false}, &Bound{"2147483647", false}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Number(&Bound{"-123456789.123456789", true}, &Bound{"98765432109876543210.5", false}); err != nil {
		t.Fatal(err)
	}
	if b.size > 3000 {
		t.Errorf("grammar of %d symbols", b.size)
	}
}

// TestNumberLongRuns: a long run of fraction zeros at a bound stays cheap.
func TestNumberLongRuns(t *testing.T) {
	var b Builder
	s, err := b.Number(&Bound{"0", true}, &Bound{"0.1", false})
	if err != nil {
		t.Fatal(err)
	}
	top := b.Rule("top")
	b.Alt(top, s)
	g, err := b.Build(top)
	if err != nil {
		t.Fatal(err)
	}
	long := "0.1" + strings.Repeat("0", 5000)
	if !acceptsString(g, long) || acceptsString(g, long+"1") || acceptsString(g, "0."+strings.Repeat("0", 5000)) {
		t.Error("long runs of zeros")
	}
}
