package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpNeg(t *testing.T) {
	check := func(x float64) {
		got, want := expNeg(x), math.Exp(x)
		if x*math.Log2E <= minExp2 {
			if got != 0 {
				t.Fatalf("expNeg(%v) = %v, want 0", x, got)
			}
			return
		}
		if rel := math.Abs(got-want) / want; rel > 1e-8 {
			t.Fatalf("expNeg(%v) = %v, want %v (rel err %g)", x, got, want, rel)
		}
	}
	for _, x := range []float64{0, -1e-300, -0.3465, -0.3466, -0.5, -1, -math.Ln2, -10, -87.3, -103.9, -700, -707.2} {
		check(x)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		check(-r.ExpFloat64() * 20)
	}
	for _, x := range []float64{-708.5, -1e9, math.Inf(-1), math.NaN()} {
		if got := expNeg(x); got != 0 {
			t.Errorf("expNeg(%v) = %v, want 0", x, got)
		}
	}
	if expNeg(0) != 1 {
		t.Errorf("expNeg(0) = %v, want exactly 1", expNeg(0))
	}
}

func TestSoftmaxNumeratorsMatchesScalar(t *testing.T) {
	v := randomLogits(10000, 3, 5)
	v[0], v[1] = float32(math.Inf(-1)), -1e30
	maxV := 0.0
	for _, x := range v {
		maxV = max(maxV, float64(x))
	}
	for _, temp := range []float64{0.1, 0.7, 1, 3} {
		scale := math.Log2E / temp
		w := make([]float32, len(v))
		total := softmaxNumerators(w, v, maxV, scale, 0)
		var sum float64
		for i, x := range v {
			want := float32(exp2Neg(float64((float64(x) - maxV) * scale)))
			if w[i] != want {
				t.Fatalf("T=%v w[%d] = %v, scalar %v", temp, i, w[i], want)
			}
			sum += float64(want)
		}
		if sum != total {
			t.Fatalf("total %v, want %v", total, sum)
		}
	}
}
