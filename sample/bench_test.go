package sample

import "testing"

// BenchmarkSample measures one Sample call on a 49152-token vocabulary with
// roughly LLM-shaped logits (Gaussian, std 3).
func BenchmarkSample(b *testing.B) {
	const vocab = 49152
	logits := randomLogits(vocab, 1, 3)
	cases := []struct {
		name string
		p    Params
	}{
		{"greedy", Params{}},
		{"temperature", Params{Temperature: 0.8}},
		{"topk40_topp0.9", Params{Temperature: 0.8, TopK: 40, TopP: 0.9}},
		{"topp0.9", Params{Temperature: 0.8, TopP: 0.9}},
		{"topp0.9_flat", Params{Temperature: 1, TopP: 0.9}},
		{"minp0.05", Params{Temperature: 0.8, MinP: 0.05}},
		{"penalties_topp0.9", Params{Temperature: 0.8, TopP: 0.9, RepetitionPenalty: 1.1, PresencePenalty: 0.5, FrequencyPenalty: 0.5}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			in := logits
			if tc.name == "topp0.9_flat" {
				in = randomLogits(vocab, 2, 0.5) // worst case: a wide nucleus
			}
			prompt := make([]int32, 512)
			for i := range prompt {
				prompt[i] = int32(i * 37 % vocab)
			}
			s := New(seeded(tc.p, 1), prompt)
			b.ReportAllocs()
			for b.Loop() {
				s.Sample(in)
			}
		})
	}
}

func BenchmarkTopLogprobs(b *testing.B) {
	logits := randomLogits(49152, 1, 3)
	for b.Loop() {
		TopLogprobs(logits, 20)
	}
}
