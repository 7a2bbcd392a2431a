package sample

import "math"

// Fast, portable exponentials for the softmax numerators.
//
// They exist for two reasons. Speed: exponentials dominate the cost of
// sampling a large vocabulary, and these are markedly cheaper than math.Exp.
// Reproducibility: math.Exp has architecture-specific assembly (whose result
// may depend on FMA availability), while every product here is wrapped in
// an explicit float64 conversion, which the Go spec says prevents fusing it
// into an FMA. Results are therefore bit-identical on every platform, and so
// is a seeded token sequence.
//
// Method: for t <= 0, 2**t = 2**k * 2**f with k = round(t) (half to even,
// by adding roundMagic: converting to an integer and back made sampling
// with temperature 18% slower), |f| <= 1/2;
// 2**f = e**(f ln2) by its degree-7 Taylor polynomial in f (truncation error
// below 0.347**8/8! ~ 5e-9 relative), and 2**k is built in the exponent bits.

// Taylor coefficients of 2**f = sum (f ln2)**i / i!.
const (
	c1 = math.Ln2
	c2 = c1 * math.Ln2 / 2
	c3 = c2 * math.Ln2 / 3
	c4 = c3 * math.Ln2 / 4
	c5 = c4 * math.Ln2 / 5
	c6 = c5 * math.Ln2 / 6
	c7 = c6 * math.Ln2 / 7

	// Below this, 2**t underflows float64 normals; report 0.
	minExp2 = -1021

	// roundMagic + t, for |t| < 2**51, rounds t to an integer held in the
	// low bits of the sum's encoding: its bits minus roundMagicBits.
	roundMagic     = 0x1.8p52
	roundMagicBits = 0x4338000000000000
)

// exp2Neg returns 2**t for t <= 0 with relative error below 1e-8, and 0 for
// t <= -1021, -Inf or NaN.
func exp2Neg(t float64) float64 {
	if !(t > minExp2) {
		return 0
	}
	r := float64(t + roundMagic) // k = round(t), see roundMagic
	k := int64(math.Float64bits(r)) - roundMagicBits
	return poly2(float64(t-float64(r-roundMagic))) * math.Float64frombits(uint64(k+1023)<<52)
}

// poly2 evaluates the 2**f polynomial in Estrin form: the same terms as
// Horner but a dependency chain of 4 multiply-adds instead of 7, which is
// what bounds the throughput of a long loop of independent exponentials.
func poly2(f float64) float64 {
	f2 := float64(f * f)
	f4 := float64(f2 * f2)
	a := float64(c1*f) + 1
	b := float64(c3*f) + c2
	c := float64(c5*f) + c4
	d := float64(c7*f) + c6
	ab := float64(b*f2) + a
	cd := float64(d*f2) + c
	return float64(cd*f4) + ab
}

// expNeg returns e**x for x <= 0 (see exp2Neg).
func expNeg(x float64) float64 { return exp2Neg(float64(x * math.Log2E)) }

// softmaxNumerators sets w[i] = exp((v[i]-maxV)/T) for every token, where
// scale = log2(e)/T, zeroes entries below minP (min-p relative to the max
// token, whose weight is exactly 1), and returns the sum of w. It is
// exp2Neg written out in the loop, which the compiler will not do itself;
// TestSoftmaxNumeratorsMatchesScalar checks the two agree bit for bit.
func softmaxNumerators(w, v []float32, maxV, scale float64, minP float32) float64 {
	w = w[:len(v)]
	var total float64
	for i, x := range v {
		t := float64((float64(x) - maxV) * scale)
		var e float32
		if t > minExp2 {
			// k = round(t) without a float-to-int conversion: adding
			// roundMagic leaves round(t) in the low bits of the sum
			r := float64(t + roundMagic)
			k := int64(math.Float64bits(r)) - roundMagicBits
			f := float64(t - float64(r-roundMagic))
			// poly2(f), by hand: it is just over the inlining budget.
			f2 := float64(f * f)
			f4 := float64(f2 * f2)
			a := float64(c1*f) + 1
			b := float64(c3*f) + c2
			c := float64(c5*f) + c4
			d := float64(c7*f) + c6
			ab := float64(b*f2) + a
			cd := float64(d*f2) + c
			p := float64(cd*f4) + ab
			e = float32(p * math.Float64frombits(uint64(k+1023)<<52))
			if e < minP {
				e = 0
			}
		}
		w[i] = e
		total += float64(e)
	}
	return total
}
