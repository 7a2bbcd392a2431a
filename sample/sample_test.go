package sample

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func softmax64(logits []float32, temp float64) []float64 {
	m := math.Inf(-1)
	for _, x := range logits {
		m = max(m, float64(x))
	}
	out := make([]float64, len(logits))
	var sum float64
	for i, x := range logits {
		out[i] = math.Exp((float64(x) - m) / temp)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

func logitsFromProbs(p ...float64) []float32 {
	out := make([]float32, len(p))
	for i, x := range p {
		out[i] = float32(math.Log(x))
	}
	return out
}

func randomLogits(n int, seed uint64, scale float64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * scale)
	}
	return out
}

func seeded(p Params, seed uint64) Params {
	p.Seed, p.HasSeed = seed, true
	return p
}

// draws samples n tokens and returns the histogram. Penalties must be off so
// the history does not change the distribution.
func draws(t *testing.T, p Params, logits []float32, n int) []int {
	t.Helper()
	s := New(p, nil)
	h := make([]int, len(logits))
	for range n {
		id := s.Sample(logits)
		if id < 0 || int(id) >= len(logits) {
			t.Fatalf("Sample returned out-of-range id %d", id)
		}
		h[id]++
	}
	return h
}

func TestGreedy(t *testing.T) {
	ninf := float32(math.Inf(-1))
	nan := float32(math.NaN())
	tests := []struct {
		name   string
		logits []float32
		want   int32
	}{
		{"single", []float32{3}, 0},
		{"argmax middle", []float32{0.1, 5, -2, 4.9}, 1},
		{"argmax last", []float32{-3, -2, -1}, 2},
		{"tie lowest id", []float32{1, 7, 3, 7, 7}, 1},
		{"all equal", []float32{2, 2, 2}, 0},
		{"nan ignored", []float32{nan, 1, nan, 0.5}, 1},
		{"neg inf", []float32{ninf, ninf, -100}, 2},
		{"all masked", []float32{ninf, nan}, 0},
		{"plus inf", []float32{1, float32(math.Inf(1)), 2}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Params{}, nil)
			for range 3 {
				if got := s.Sample(tc.logits); got != tc.want {
					t.Fatalf("Sample = %d, want %d", got, tc.want)
				}
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	logits := randomLogits(1000, 7, 1.5)
	cases := []Params{
		{Temperature: 1},
		{Temperature: 0.8, TopK: 50},
		{Temperature: 1, TopP: 0.9},
		{Temperature: 1.2, TopK: 100, TopP: 0.95, MinP: 0.01},
		{Temperature: 1, MinP: 0.05, RepetitionPenalty: 1.3, PresencePenalty: 0.5, FrequencyPenalty: 0.2},
	}
	prompt := []int32{1, 2, 3, 500}
	run := func(p Params) []int32 {
		s := New(p, prompt)
		out := make([]int32, 100)
		for i := range out {
			out[i] = s.Sample(logits)
		}
		return out
	}
	for _, p := range cases {
		a, b := run(seeded(p, 42)), run(seeded(p, 42))
		if !slices.Equal(a, b) {
			t.Errorf("%+v: same seed gave different sequences", p)
		}
		if c := run(seeded(p, 43)); slices.Equal(a, c) {
			t.Errorf("%+v: seeds 42 and 43 gave identical sequences", p)
		}
	}
	// The seed drawn when none is given is reported and reproduces the run.
	s := New(Params{Temperature: 1}, nil)
	got := make([]int32, 50)
	for i := range got {
		got[i] = s.Sample(logits)
	}
	r := New(Params{Temperature: 1, Seed: s.Seed(), HasSeed: true}, nil)
	for i := range got {
		if id := r.Sample(logits); id != got[i] {
			t.Fatalf("replaying Seed(): draw %d = %d, want %d", i, id, got[i])
		}
	}
}

func TestTopKOneIsGreedy(t *testing.T) {
	for seed := range uint64(20) {
		logits := randomLogits(500, seed, 2)
		if seed%2 == 0 { // inject ties at the top
			logits[3], logits[400] = 10, 10
		}
		want := New(Params{}, nil).Sample(logits)
		s := New(seeded(Params{Temperature: 1.5, TopK: 1}, seed), nil)
		for range 10 {
			if got := s.Sample(logits); got != want {
				t.Fatalf("seed %d: top-k=1 gave %d, greedy %d", seed, got, want)
			}
		}
	}
}

func TestTinyTopPIsArgmax(t *testing.T) {
	for _, n := range []int{4, 100, 5000} {
		for seed := range uint64(5) {
			logits := randomLogits(n, seed, 1)
			want := New(Params{}, nil).Sample(logits)
			for _, p := range []Params{
				{Temperature: 1, TopP: 1e-6},
				{Temperature: 1, TopP: 1e-6, TopK: 10},
				{Temperature: 3, TopP: 1e-6},
			} {
				s := New(seeded(p, seed), nil)
				for range 20 {
					if got := s.Sample(logits); got != want {
						t.Fatalf("n=%d %+v: got %d, want argmax %d", n, p, got, want)
					}
				}
			}
		}
	}
}

func TestFilters(t *testing.T) {
	// probabilities 0.5, 0.3, 0.15, 0.05
	logits := logitsFromProbs(0.5, 0.3, 0.15, 0.05)
	tests := []struct {
		name    string
		p       Params
		allowed []bool
	}{
		{"none", Params{Temperature: 1}, []bool{true, true, true, true}},
		{"top-k 2", Params{Temperature: 1, TopK: 2}, []bool{true, true, false, false}},
		{"top-k 3", Params{Temperature: 1, TopK: 3}, []bool{true, true, true, false}},
		{"top-p 0.75", Params{Temperature: 1, TopP: 0.75}, []bool{true, true, false, false}},
		{"top-p 0.45", Params{Temperature: 1, TopP: 0.45}, []bool{true, false, false, false}},
		{"top-p 0.9", Params{Temperature: 1, TopP: 0.9}, []bool{true, true, true, false}},
		{"top-p 0.99", Params{Temperature: 1, TopP: 0.99}, []bool{true, true, true, true}},
		// min-p 0.2: threshold 0.1 drops the 0.05 token.
		{"min-p 0.2", Params{Temperature: 1, MinP: 0.2}, []bool{true, true, true, false}},
		// min-p 0.5: threshold 0.25 keeps 0.5 and 0.3.
		{"min-p 0.5", Params{Temperature: 1, MinP: 0.5}, []bool{true, true, false, false}},
		{"min-p 0.7", Params{Temperature: 1, MinP: 0.7}, []bool{true, false, false, false}},
		{"min-p 1", Params{Temperature: 1, MinP: 1}, []bool{true, false, false, false}},
		{"top-k 3 + min-p 0.5", Params{Temperature: 1, TopK: 3, MinP: 0.5}, []bool{true, true, false, false}},
		// top-k 3 renormalizes to 0.526, 0.316, 0.158: top-p 0.8 needs two.
		{"top-k 3 + top-p 0.8", Params{Temperature: 1, TopK: 3, TopP: 0.8}, []bool{true, true, false, false}},
		{"top-p 0.9 + min-p 0.5", Params{Temperature: 1, TopP: 0.9, MinP: 0.5}, []bool{true, true, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := draws(t, seeded(tc.p, 1), logits, 4000)
			for id, c := range h {
				if !tc.allowed[id] && c > 0 {
					t.Errorf("token %d drawn %d times, should be filtered", id, c)
				}
				if tc.allowed[id] && c == 0 {
					t.Errorf("token %d never drawn, should be allowed", id)
				}
			}
		})
	}
}

// TestEmpiricalDistribution checks that draws follow softmax(logits/T) over
// the surviving tokens, renormalized, within 5 standard errors. The seed is
// fixed, so the test cannot flake.
func TestEmpiricalDistribution(t *testing.T) {
	const n = 20000
	logits := []float32{1.0, 2.0, 0.5, -1.0}
	tests := []struct {
		name string
		p    Params
		keep int // tokens kept, in order of probability: 1, 0, 2, 3
	}{
		{"temperature 1", Params{Temperature: 1}, 4},
		{"temperature 0.5", Params{Temperature: 0.5}, 4},
		{"temperature 2", Params{Temperature: 2}, 4},
		{"top-k 2", Params{Temperature: 1, TopK: 2}, 2},
		{"top-p 0.8", Params{Temperature: 1, TopP: 0.8}, 2},
	}
	order := []int{1, 0, 2, 3}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := softmax64(logits, float64(tc.p.Temperature))
			kept := 0.0
			for _, id := range order[:tc.keep] {
				kept += want[id]
			}
			for i := range want {
				if slices.Index(order[:tc.keep], i) < 0 {
					want[i] = 0
				} else {
					want[i] /= kept
				}
			}
			h := draws(t, seeded(tc.p, 12345), logits, n)
			for id, c := range h {
				p := want[id]
				got := float64(c) / n
				se := math.Sqrt(p * (1 - p) / n)
				if math.Abs(got-p) > 5*se+1e-12 {
					t.Errorf("token %d: frequency %.4f, want %.4f ± %.4f", id, got, p, 5*se)
				}
			}
		})
	}
}

func TestTemperatureScaling(t *testing.T) {
	logits := []float32{2, 1, 0, -1}
	share := func(temp float32) float64 {
		h := draws(t, seeded(Params{Temperature: temp}, 9), logits, 5000)
		return float64(h[0]) / 5000
	}
	cold, unit, hot := share(0.25), share(1), share(5)
	if !(cold > unit && unit > hot) {
		t.Fatalf("argmax share should fall as temperature rises: T=0.25 %.3f, T=1 %.3f, T=5 %.3f", cold, unit, hot)
	}
	if cold < 0.95 {
		t.Errorf("T=0.25 argmax share %.3f, want > 0.95", cold)
	}
	if hot > 0.4 {
		t.Errorf("T=5 argmax share %.3f, want < 0.4 (near uniform)", hot)
	}
}

func TestPenalties(t *testing.T) {
	tests := []struct {
		name      string
		p         Params
		prompt    []int32
		generated []int32
		logits    []float32
		want      int32
	}{
		{"no penalty baseline", Params{}, []int32{0}, []int32{0, 0}, []float32{2, 1.9}, 0},
		// 2/1.5 = 1.33 < 1.9
		{"repetition positive logit divided", Params{RepetitionPenalty: 1.5}, []int32{0}, nil, []float32{2, 1.9}, 1},
		// -1*1.5 = -1.5 < -1.2
		{"repetition negative logit multiplied", Params{RepetitionPenalty: 1.5}, []int32{0}, nil, []float32{-1, -1.2}, 1},
		{"repetition from generated", Params{RepetitionPenalty: 1.5}, nil, []int32{0}, []float32{2, 1.9}, 1},
		{"repetition counts once", Params{RepetitionPenalty: 1.05}, []int32{0, 0, 0}, []int32{0, 0}, []float32{2, 1.9}, 0},
		// penalty < 1 rewards repetition: 1.9/0.5 = 3.8 > 2
		{"repetition below one encourages", Params{RepetitionPenalty: 0.5}, []int32{1}, nil, []float32{2, 1.9}, 1},
		{"repetition out-of-range id ignored", Params{RepetitionPenalty: 2}, []int32{-1, 99}, nil, []float32{2, 1.9}, 0},
		// 1 - 0.6 = 0.4 < 0.5
		{"presence on generated", Params{PresencePenalty: 0.6}, nil, []int32{0}, []float32{1, 0.5}, 1},
		{"presence ignores prompt", Params{PresencePenalty: 0.6}, []int32{0}, nil, []float32{1, 0.5}, 0},
		{"presence does not scale with count", Params{PresencePenalty: 0.4}, nil, []int32{0, 0, 0}, []float32{1, 0.5}, 0},
		{"negative presence encourages", Params{PresencePenalty: -0.6}, nil, []int32{1}, []float32{1, 0.5}, 1},
		// 1 - 0.3 = 0.7 > 0.5 but 1 - 2*0.3 = 0.4 < 0.5
		{"frequency once", Params{FrequencyPenalty: 0.3}, nil, []int32{0}, []float32{1, 0.5}, 0},
		{"frequency twice", Params{FrequencyPenalty: 0.3}, nil, []int32{0, 0}, []float32{1, 0.5}, 1},
		{"frequency ignores prompt", Params{FrequencyPenalty: 2}, []int32{0, 0}, nil, []float32{1, 0.5}, 0},
		// repetition first: 1/1.25 = 0.8, then -0.25 = 0.55 > 0.5 ... and
		// - 0.1 presence = 0.45 < 0.5.
		{"combined", Params{RepetitionPenalty: 1.25, FrequencyPenalty: 0.25, PresencePenalty: 0.1}, nil, []int32{0}, []float32{1, 0.5}, 1},
		{"combined not enough", Params{RepetitionPenalty: 1.25, FrequencyPenalty: 0.25}, nil, []int32{0}, []float32{1, 0.5}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Greedy must still apply penalties; so must sampling at a
			// temperature low enough to be effectively greedy.
			for _, temp := range []float32{0, 1e-3} {
				p := seeded(tc.p, 3)
				p.Temperature = temp
				s := New(p, tc.prompt)
				for _, id := range tc.generated {
					s.Accept(id)
				}
				if got := s.Sample(tc.logits); got != tc.want {
					t.Errorf("T=%v: Sample = %d, want %d", temp, got, tc.want)
				}
			}
		})
	}
}

func TestSampleRecordsGenerated(t *testing.T) {
	// Sample must count its own picks for the penalties: greedy with a
	// frequency penalty then alternates.
	s := New(Params{FrequencyPenalty: 0.5}, nil)
	logits := []float32{1, 0.6}
	got := []int32{s.Sample(logits), s.Sample(logits), s.Sample(logits)}
	// draws: 0 (1 vs .6); 1 (.5 vs .6); 0 (.5 vs .1)
	if want := []int32{0, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("sequence %v, want %v", got, want)
	}
}

func TestLogitsUnchanged(t *testing.T) {
	logits := randomLogits(3000, 5, 2)
	logits[7] = float32(math.NaN())
	logits[8] = float32(math.Inf(1))
	logits[9] = float32(math.Inf(-1))
	orig := slices.Clone(logits)
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, p := range []Params{
		{},
		{RepetitionPenalty: 1.5, PresencePenalty: 1, FrequencyPenalty: 1},
		{Temperature: 0.7},
		{Temperature: 0.7, MinP: 0.1, RepetitionPenalty: 1.2},
		{Temperature: 1, TopK: 40, TopP: 0.9, PresencePenalty: 0.5},
		{Temperature: 1, TopP: 0.95, FrequencyPenalty: 0.5},
	} {
		s := New(seeded(p, 1), prompt)
		for range 20 {
			s.Sample(logits)
		}
		for i := range logits {
			if math.Float32bits(logits[i]) != math.Float32bits(orig[i]) {
				t.Fatalf("%+v modified logits[%d]: %v -> %v", p, i, orig[i], logits[i])
			}
		}
	}
}

// TestSelectionMatchesSort compares the top-k heap and the top-p weighted
// quickselect against a full sort, including heavy ties.
func TestSelectionMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 0))
	for trial := range 200 {
		n := 1 + r.IntN(2000)
		v := make([]float32, n)
		for i := range v {
			if trial%3 == 0 {
				v[i] = float32(r.IntN(5)) // many ties
			} else {
				v[i] = float32(r.NormFloat64() * 3)
			}
		}
		ref := make([]int32, n)
		for i := range ref {
			ref[i] = int32(i)
		}
		sortBest(v, ref)
		for i := 1; i < n; i++ {
			a, b := ref[i-1], ref[i]
			if v[a] < v[b] || (v[a] == v[b] && a > b) {
				t.Fatal("sortBest order wrong")
			}
		}

		k := 1 + r.IntN(n)
		if got := selectTopK(v, k, nil); !slices.Equal(got, ref[:k]) {
			t.Fatalf("trial %d: selectTopK(k=%d) = %v..., want %v...", trial, k, got[:min(k, 5)], ref[:min(k, 5)])
		}

		// Weights in the same order as the logits (monotone map).
		w := make([]float32, n)
		var total float64
		for i, x := range v {
			w[i] = float32(math.Exp(float64(x - v[ref[0]])))
			total += float64(w[i])
		}
		keys := make([]uint64, n)
		for i, id := range ref {
			keys[i] = packKey(w[id], id)
		}
		// keys follow ref's order only if w preserved it (no rounding
		// collisions); rank the reference by key to be exact.
		slices.SortFunc(keys, func(a, b uint64) int { return cmp.Compare(b, a) })
		sortedW := make([]float32, n)
		for i, key := range keys {
			sortedW[i] = keyWeight(key)
		}
		need := r.Float64() * total
		if trial%50 == 0 {
			need = 0
		}
		wantM := prefixReaching(sortedW, need)
		shuffled := slices.Clone(keys)
		r.Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		m := nucleus(shuffled, need)
		got := slices.Clone(shuffled[:m])
		slices.SortFunc(got, func(a, b uint64) int { return cmp.Compare(b, a) })
		if !slices.Equal(got, keys[:wantM]) {
			t.Fatalf("trial %d n=%d need=%.3f/%.3f: nucleus size %d, want %d", trial, n, need, total, m, wantM)
		}
	}
}

func TestPackKey(t *testing.T) {
	ks := []uint64{packKey(0.5, 7), packKey(0.5, 3), packKey(1, 9), packKey(0, 0), packKey(0.25, 1)}
	slices.SortFunc(ks, func(a, b uint64) int { return cmp.Compare(b, a) })
	var ids []int32
	for _, k := range ks {
		ids = append(ids, keyID(k))
	}
	if !slices.Equal(ids, []int32{9, 3, 7, 1, 0}) {
		t.Fatalf("key order %v, want [9 3 7 1 0]", ids)
	}
	if keyWeight(packKey(0.25, 5)) != 0.25 || keyID(packKey(0.25, 5)) != 5 {
		t.Fatal("packKey round trip")
	}
}

// sortBest sorts ids best first (reference for the selection tests).
func sortBest(v []float32, ids []int32) {
	slices.SortFunc(ids, func(a, b int32) int {
		if better(v, a, b) {
			return -1
		}
		if a == b {
			return 0
		}
		return 1
	})
}

func gather(w []float32, ids []int32) []float32 {
	out := make([]float32, len(ids))
	for i, id := range ids {
		out[i] = w[id]
	}
	return out
}

func TestLogSoftmaxAndTopLogprobs(t *testing.T) {
	logits := []float32{1, 3, 3, -2, 0.5}
	dst := make([]float32, len(logits))
	LogSoftmax(dst, logits)
	want := softmax64(logits, 1)
	var sum float64
	for i := range dst {
		if d := math.Abs(float64(dst[i]) - math.Log(want[i])); d > 1e-6 {
			t.Errorf("LogSoftmax[%d] = %v, want %v", i, dst[i], math.Log(want[i]))
		}
		sum += math.Exp(float64(dst[i]))
	}
	if math.Abs(sum-1) > 1e-6 {
		t.Errorf("exp(LogSoftmax) sums to %v", sum)
	}

	top := TopLogprobs(logits, 3)
	ids := []int32{top[0].ID, top[1].ID, top[2].ID}
	if !slices.Equal(ids, []int32{1, 2, 0}) {
		t.Fatalf("TopLogprobs ids = %v, want [1 2 0] (ties by id)", ids)
	}
	for _, tl := range top {
		if tl.Logprob != dst[tl.ID] {
			t.Errorf("TopLogprobs id %d = %v, LogSoftmax %v", tl.ID, tl.Logprob, dst[tl.ID])
		}
	}
	if got := TopLogprobs(logits, 99); len(got) != len(logits) {
		t.Errorf("TopLogprobs(k > n) returned %d entries", len(got))
	}
	if got := TopLogprobs(logits, 0); got != nil {
		t.Errorf("TopLogprobs(k=0) = %v, want nil", got)
	}

	// In place, with NaN.
	in := []float32{0, float32(math.NaN()), 0}
	LogSoftmax(in, in)
	if !math.IsInf(float64(in[1]), -1) || math.Abs(float64(in[0])-math.Log(0.5)) > 1e-6 {
		t.Errorf("in-place LogSoftmax with NaN = %v", in)
	}
}

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name  string
		p     Params
		field string // "" means valid
	}{
		{"zero value", Params{}, ""},
		{"typical", Params{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.1, PresencePenalty: 2, FrequencyPenalty: -2}, ""},
		{"top-p one", Params{TopP: 1, MinP: 1}, ""},
		{"negative temperature", Params{Temperature: -0.1}, "Temperature"},
		{"nan temperature", Params{Temperature: nan}, "Temperature"},
		{"inf temperature", Params{Temperature: float32(math.Inf(1))}, "Temperature"},
		{"negative top-k", Params{TopK: -1}, "TopK"},
		{"top-k past int32", Params{TopK: MaxTopK + 2}, "TopK"},
		{"top-k at int32 max", Params{TopK: MaxTopK}, ""},
		{"top-p above one", Params{TopP: 1.01}, "TopP"},
		{"top-p negative", Params{TopP: -0.1}, "TopP"},
		{"top-p nan", Params{TopP: nan}, "TopP"},
		{"min-p above one", Params{MinP: 1.5}, "MinP"},
		{"min-p negative", Params{MinP: -0.5}, "MinP"},
		{"min-p nan", Params{MinP: nan}, "MinP"},
		{"repetition negative", Params{RepetitionPenalty: -1}, "RepetitionPenalty"},
		{"repetition nan", Params{RepetitionPenalty: nan}, "RepetitionPenalty"},
		{"presence too big", Params{PresencePenalty: 2.5}, "PresencePenalty"},
		{"presence nan", Params{PresencePenalty: nan}, "PresencePenalty"},
		{"frequency too small", Params{FrequencyPenalty: -2.01}, "FrequencyPenalty"},
		{"frequency nan", Params{FrequencyPenalty: nan}, "FrequencyPenalty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want error naming %s", tc.field)
			}
			if !strings.Contains(err.Error(), tc.field+" ") {
				t.Fatalf("Validate() = %q, want it to name %s", err, tc.field)
			}
		})
	}
	err := Params{Temperature: -1, TopK: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Temperature") || !strings.Contains(err.Error(), "TopK") {
		t.Errorf("multiple errors: got %v, want both fields named", err)
	}
}

func TestInvalidParamsDoNotBreakNew(t *testing.T) {
	logits := []float32{1, 2, 3}
	nan := float32(math.NaN())
	for _, p := range []Params{
		{Temperature: -1},
		{Temperature: nan, TopP: nan, MinP: nan},
		{Temperature: 1, TopK: -3, TopP: 7, MinP: 9},
		{Temperature: 1, RepetitionPenalty: -2, PresencePenalty: 50, FrequencyPenalty: nan},
	} {
		s := New(seeded(p, 1), []int32{0})
		for range 10 {
			if id := s.Sample(logits); id < 0 || id > 2 {
				t.Fatalf("%+v: Sample = %d", p, id)
			}
		}
	}
}

func TestSampleDoesNotAllocate(t *testing.T) {
	logits := randomLogits(4096, 1, 2)
	for _, p := range []Params{
		{Temperature: 1},
		{Temperature: 1, TopK: 40, TopP: 0.9},
		{Temperature: 1, TopP: 0.9, MinP: 0.05},
	} {
		s := New(seeded(p, 1), nil)
		s.Sample(logits) // size the buffers
		if a := testing.AllocsPerRun(50, func() { s.Sample(logits) }); a != 0 {
			t.Errorf("%+v: %v allocs per Sample, want 0", p, a)
		}
	}
}

// TestLargeVocabFilters checks that tokens drawn on the large-vocabulary
// paths (heap top-k, quickselect top-p) stay inside the sets a full sort
// defines.
func TestLargeVocabFilters(t *testing.T) {
	const n = 2000
	logits := randomLogits(n, 11, 2)
	temp := 0.9
	probs := softmax64(logits, temp)
	ref := make([]int32, n)
	for i := range ref {
		ref[i] = int32(i)
	}
	sortBest(logits, ref)
	nucleusOf := func(topP float64) map[int32]bool {
		set := map[int32]bool{}
		var cum float64
		for _, id := range ref {
			set[id] = true
			cum += probs[id]
			if cum >= topP {
				break
			}
		}
		return set
	}
	n50, n95 := nucleusOf(0.5), nucleusOf(0.95)
	tests := []struct {
		name    string
		p       Params
		allowed func(id int32) bool
	}{
		{"top-p 0.5", Params{TopP: 0.5}, func(id int32) bool { return n50[id] }},
		{"top-p 0.95", Params{TopP: 0.95}, func(id int32) bool { return n95[id] }},
		{"top-k 25", Params{TopK: 25}, func(id int32) bool { return slices.Contains(ref[:25], id) }},
		{"min-p 0.1", Params{MinP: 0.1}, func(id int32) bool { return probs[id] >= 0.1*probs[ref[0]] }},
		{"top-p 0.95 + min-p 0.2", Params{TopP: 0.95, MinP: 0.2}, func(id int32) bool {
			return n95[id] && probs[id] >= 0.2*probs[ref[0]]
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := seeded(tc.p, 5)
			p.Temperature = float32(temp)
			h := draws(t, p, logits, 1000)
			distinct := 0
			for id, c := range h {
				if c == 0 {
					continue
				}
				distinct++
				if !tc.allowed(int32(id)) {
					t.Fatalf("token %d (rank prob %.2g) drawn %d times outside the filter", id, probs[id], c)
				}
			}
			if distinct < 2 {
				t.Errorf("only %d distinct tokens drawn; filter too strict?", distinct)
			}
		})
	}
}

// TestSampleAllowed: under a mask only allowed ids come out, for every
// filter; among them the draw follows the softmax of their logits alone;
// an empty mask gives -1, and allowed logits that are all NaN or -Inf give
// the first allowed id, never a refused one.
func TestSampleAllowed(t *testing.T) {
	const n = 130 // three mask words, the last partial
	logits := randomLogits(n, 7, 3)
	allowedIDs := []int{3, 70, 129}
	for i := range logits {
		if !slices.Contains(allowedIDs, i) {
			logits[i] += 20 // refused tokens are far more likely
		}
	}
	mask := make([]uint64, 3)
	for _, id := range allowedIDs {
		mask[id/64] |= 1 << (id % 64)
	}
	for _, p := range []Params{
		{}, {Temperature: 1}, {Temperature: 0.7, TopK: 2}, {Temperature: 1, TopP: 0.9}, {Temperature: 1, MinP: 0.2},
		{Temperature: 1, RepetitionPenalty: 1.5, PresencePenalty: 1}, {RepetitionPenalty: 1.3},
	} {
		s := New(seeded(p, 3), []int32{3})
		for range 300 {
			if id := s.SampleAllowed(logits, mask); !slices.Contains(allowedIDs, int(id)) {
				t.Fatalf("%+v: sampled refused id %d", p, id)
			}
		}
	}
	// The distribution among allowed ids is their own softmax.
	sub := []float32{logits[3], logits[70], logits[129]}
	want := softmax64(sub, 1)
	s := New(seeded(Params{Temperature: 1}, 9), nil)
	h := map[int32]int{}
	const draws = 20000
	for range draws {
		h[s.SampleAllowed(logits, mask)]++
	}
	for j, id := range allowedIDs {
		got, p := float64(h[int32(id)])/draws, want[j]
		if se := math.Sqrt(p * (1 - p) / draws); math.Abs(got-p) > 5*se+1e-12 {
			t.Errorf("id %d: frequency %.4f, want %.4f", id, got, p)
		}
	}
	if id := New(Params{}, nil).SampleAllowed(logits, make([]uint64, 3)); id != -1 {
		t.Errorf("empty mask: got %d, want -1", id)
	}
	bad := slices.Clone(logits)
	bad[3], bad[70], bad[129] = float32(math.NaN()), float32(math.Inf(-1)), float32(math.NaN())
	for _, p := range []Params{{}, {Temperature: 1, TopK: 5}, {Temperature: 1, TopP: 0.5}} {
		if id := New(p, nil).SampleAllowed(bad, mask); id != 3 {
			t.Errorf("%+v, allowed logits NaN/-Inf: got %d, want 3", p, id)
		}
	}
}

// TestArgmax: the first index of the largest value, NaNs never chosen, on
// random vectors of every length mod 4 with many ties, against one running
// best.
func TestArgmax(t *testing.T) {
	simple := func(v []float32) (int, float32) {
		best, bestV := 0, float32(math.Inf(-1))
		for i, x := range v {
			if x > bestV {
				best, bestV = i, x
			}
		}
		return best, bestV
	}
	r := rand.New(rand.NewPCG(1, 2))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for n := 0; n < 40; n++ {
		for range 200 {
			v := make([]float32, n)
			for i := range v {
				switch r.IntN(10) {
				case 0:
					v[i] = nan
				case 1:
					v[i] = -inf
				case 2:
					v[i] = inf
				default:
					v[i] = float32(r.IntN(5)) // ties
				}
			}
			gi, gv := argmax(v)
			wi, wv := simple(v)
			if gi != wi || gv != wv {
				t.Fatalf("%v: argmax %d (%v), want %d (%v)", v, gi, gv, wi, wv)
			}
		}
	}
}
