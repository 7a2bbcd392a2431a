package templates

import (
	"math"
	"math/big"
	"strings"
)

// Size bounds for values built by operators, which jinja2's sandbox does
// not bound: a template doubling a string or list in a loop would exhaust
// memory long before the output limit saw it. They are far above what a
// chat template builds.
const (
	maxStrLen   = 64 << 20 // bytes in a str built by + or *
	maxSeqItems = 1 << 20  // items in a list or tuple built by + or *
)

// arith is Python's binary operator op on l and r.
func arith(op string, l, r any) any {
	if u, ok := l.(*undefined); ok {
		u.fail()
	}
	if s, ok := l.(string); ok && op == "%" {
		// str.__mod__ takes any right operand, Undefined included.
		return percentFormat(s, r)
	}
	if u, ok := r.(*undefined); ok {
		u.fail()
	}
	if isNumber(l) && isNumber(r) {
		return numArith(op, l, r)
	}
	switch op {
	case "+":
		switch x := l.(type) {
		case string:
			if y, ok := r.(string); ok {
				if len(x)+len(y) > maxStrLen {
					throw(excLimit, "string longer than %d bytes", maxStrLen)
				}
				return x + y
			}
			typeError(`can only concatenate str (not "%s") to str`, typeName(r))
		case []any:
			if y, ok := r.([]any); ok {
				if len(x)+len(y) > maxSeqItems {
					throw(excLimit, "list longer than %d items", maxSeqItems)
				}
				out := make([]any, 0, len(x)+len(y))
				return append(append(out, x...), y...)
			}
			typeError(`can only concatenate list (not "%s") to list`, typeName(r))
		case tuple:
			if y, ok := r.(tuple); ok {
				if len(x)+len(y) > maxSeqItems {
					throw(excLimit, "tuple longer than %d items", maxSeqItems)
				}
				out := make(tuple, 0, len(x)+len(y))
				return append(append(out, x...), y...)
			}
			typeError(`can only concatenate tuple (not "%s") to tuple`, typeName(r))
		}
	case "*":
		if n, ok := asInt64(r); ok {
			if v, ok := repeatSeq(l, n); ok {
				return v
			}
		}
		if n, ok := asInt64(l); ok {
			if v, ok := repeatSeq(r, n); ok {
				return v
			}
		}
		if isSeq(l) || isSeq(r) {
			other := r
			if isSeq(r) {
				other = l
			}
			typeError("can't multiply sequence by non-int of type '%s'", typeName(other))
		}
	case "%":
		if s, ok := l.(string); ok {
			return percentFormat(s, r)
		}
	}
	typeError("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
	return nil
}

// repeatStr is strings.Repeat bounded by maxStrLen (padding widths, indents
// and precisions come from the template and may be absurd).
func repeatStr(s string, n int) string {
	if n <= 0 || s == "" {
		return ""
	}
	if n > maxStrLen/len(s) {
		throw(excLimit, "string longer than %d bytes", maxStrLen)
	}
	return strings.Repeat(s, n)
}

func isSeq(v any) bool {
	switch v.(type) {
	case string, []any, tuple:
		return true
	}
	return false
}

func repeatSeq(v any, n int64) (any, bool) {
	if n < 0 {
		n = 0
	}
	switch x := v.(type) {
	case string:
		if n > 0 && int64(len(x))*n > maxStrLen {
			throw(excLimit, "string longer than %d bytes", maxStrLen)
		}
		return strings.Repeat(x, int(n)), true
	case []any:
		if n > 0 && int64(len(x))*n > maxSeqItems {
			throw(excLimit, "list longer than %d items", maxSeqItems)
		}
		out := make([]any, 0, len(x)*int(n))
		for i := int64(0); i < n; i++ {
			out = append(out, x...)
		}
		return out, true
	case tuple:
		if n > 0 && int64(len(x))*n > maxSeqItems {
			throw(excLimit, "tuple longer than %d items", maxSeqItems)
		}
		out := make(tuple, 0, len(x)*int(n))
		for i := int64(0); i < n; i++ {
			out = append(out, x...)
		}
		return out, true
	}
	return nil, false
}

func toBig(v any) *big.Int {
	switch x := v.(type) {
	case *big.Int:
		return x
	case int64:
		return big.NewInt(x)
	case bool:
		if x {
			return big.NewInt(1)
		}
		return big.NewInt(0)
	}
	return nil
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case bool:
		if x {
			return 1
		}
		return 0
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		if math.IsInf(f, 0) {
			throw(excOverflow, "int too large to convert to float")
		}
		return f
	}
	return 0
}

func numArith(op string, l, r any) any {
	_, lf := l.(float64)
	_, rf := r.(float64)
	if op == "/" && !lf && !rf && toFloat(r) == 0 {
		throw(excZeroDivision, "division by zero")
	}
	if lf || rf || op == "/" {
		return floatArith(op, toFloat(l), toFloat(r))
	}
	a, aok := asInt64(l)
	b, bok := asInt64(r)
	if aok && bok {
		switch op {
		case "+":
			if c := a + b; (c > a) == (b > 0) {
				return c
			}
		case "-":
			if c := a - b; (c < a) == (b > 0) {
				return c
			}
		case "*":
			if a == 0 || b == 0 {
				return int64(0)
			}
			c := a * b
			if c/b == a && !(a == -1 && b == math.MinInt64) && !(b == -1 && a == math.MinInt64) {
				return c
			}
		case "//":
			if b == 0 {
				throw(excZeroDivision, "integer division or modulo by zero")
			}
			if !(a == math.MinInt64 && b == -1) {
				q := a / b
				if (a%b != 0) && ((a < 0) != (b < 0)) {
					q--
				}
				return q
			}
		case "%":
			if b == 0 {
				throw(excZeroDivision, "integer modulo by zero")
			}
			if b == -1 {
				return int64(0)
			}
			m := a % b
			if m != 0 && (m < 0) != (b < 0) {
				m += b
			}
			return m
		case "**":
			if b < 0 {
				return floatArith(op, float64(a), float64(b))
			}
		}
	}
	return bigArith(op, toBig(l), toBig(r))
}

func bigArith(op string, a, b *big.Int) any {
	z := new(big.Int)
	switch op {
	case "+":
		z.Add(a, b)
	case "-":
		z.Sub(a, b)
	case "*":
		if a.BitLen()+b.BitLen() > 1<<20 {
			throw(excLimit, "integer result too large")
		}
		z.Mul(a, b)
	case "//", "%":
		if b.Sign() == 0 {
			if op == "//" {
				throw(excZeroDivision, "integer division or modulo by zero")
			}
			throw(excZeroDivision, "integer modulo by zero")
		}
		q, m := new(big.Int), new(big.Int)
		q.DivMod(a, b, m) // Euclidean: m >= 0
		if m.Sign() != 0 && b.Sign() < 0 {
			// Python floors: remainder takes the divisor's sign.
			m.Add(m, b)
			q.Add(q, big.NewInt(1))
		}
		if op == "//" {
			return normInt(q)
		}
		return normInt(m)
	case "**":
		if b.Sign() < 0 {
			return floatArith(op, toFloat(a), toFloat(b))
		}
		if a.BitLen() > 1 && (!b.IsInt64() || int64(a.BitLen())*b.Int64() > 1<<20) {
			throw(excLimit, "integer result too large")
		}
		z.Exp(a, b, nil)
	}
	return normInt(z)
}

func floatArith(op string, a, b float64) any {
	switch op {
	case "+":
		return a + b
	case "-":
		return a - b
	case "*":
		return a * b
	case "/":
		if b == 0 {
			throw(excZeroDivision, "float division by zero")
		}
		return a / b
	case "//":
		if b == 0 {
			throw(excZeroDivision, "float floor division by zero")
		}
		return math.Floor(a / b)
	case "%":
		if b == 0 {
			throw(excZeroDivision, "float modulo")
		}
		m := math.Mod(a, b)
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return m
	case "**":
		if a == 0 && b < 0 {
			throw(excZeroDivision, "0.0 cannot be raised to a negative power")
		}
		return math.Pow(a, b)
	}
	return nil
}

func unary(op byte, v any) any {
	if u, ok := v.(*undefined); ok {
		u.fail()
	}
	switch x := v.(type) {
	case int64:
		if op == '-' {
			if x == math.MinInt64 {
				return new(big.Int).Neg(big.NewInt(x))
			}
			return -x
		}
		return x
	case bool:
		n := int64(0)
		if x {
			n = 1
		}
		if op == '-' {
			return -n
		}
		return n
	case float64:
		if op == '-' {
			return -x
		}
		return x
	case *big.Int:
		if op == '-' {
			return normInt(new(big.Int).Neg(x))
		}
		return x
	}
	typeError("bad operand type for unary %c: '%s'", op, typeName(v))
	return nil
}

// compare is one link of a comparison chain.
func compare(op string, l, r any) bool {
	switch op {
	case "==":
		return pyEqual(l, r)
	case "!=":
		return !pyEqual(l, r)
	case "in":
		return contains(r, l)
	case "notin":
		return !contains(r, l)
	}
	c := pyCompare(op, l, r)
	if c == 2 {
		return false
	}
	switch op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	return false
}

// contains is Python's item in container.
func contains(container, item any) bool {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			typeError("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(c, s)
	case []any:
		for _, e := range c {
			if pyEqual(e, item) {
				return true
			}
		}
		return false
	case tuple:
		for _, e := range c {
			if pyEqual(e, item) {
				return true
			}
		}
		return false
	case *Dict:
		mustHash(item)
		_, ok := c.getAny(item)
		return ok
	case *undefined:
		return false
	case *loopCtx:
		return contains(c.items, item)
	case *dictView:
		if c.kind == 'k' && !c.iter {
			mustHash(item)
			_, ok := c.d.getAny(item)
			return ok
		}
		return contains(c.items(), item)
	}
	typeError("argument of type '%s' is not iterable", typeName(container))
	return false
}
