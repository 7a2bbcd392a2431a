package sample

import (
	"errors"
	"fmt"
	"math"
)

// Params configures a Sampler. The zero value means greedy decoding with no
// penalties.
type Params struct {
	// Temperature divides the logits before the softmax. 0 selects greedy
	// decoding (argmax, ties broken towards the lowest token id).
	Temperature float32
	// TopK keeps only the K most probable tokens. 0 disables it.
	TopK int
	// TopP (nucleus sampling) keeps the smallest set of most probable tokens
	// whose cumulative probability is >= TopP; at least one token is always
	// kept. 0 and 1 disable it.
	TopP float32
	// MinP drops tokens whose probability is < MinP times the probability of
	// the most likely token. 0 disables it.
	MinP float32
	// RepetitionPenalty (Hugging Face / CTRL semantics) is applied to every
	// token id that occurs in the context (prompt plus generated tokens):
	// positive logits are divided by it, negative logits multiplied by it.
	// 0 and 1 disable it.
	RepetitionPenalty float32
	// PresencePenalty (OpenAI semantics) is subtracted once from the logit of
	// every token that occurs in the generated tokens.
	PresencePenalty float32
	// FrequencyPenalty (OpenAI semantics) is multiplied by the number of
	// times a token occurs in the generated tokens and subtracted from its
	// logit.
	FrequencyPenalty float32
	// Seed seeds the sampler's random number generator when HasSeed is set.
	// The same seed with the same inputs yields the same tokens. Without a
	// seed, New draws one from crypto/rand.
	Seed    uint64
	HasSeed bool
}

// MaxTopK is the largest TopK: requests carry it between actors as an
// int32, so a larger value would wrap rather than mean "every token".
const MaxTopK = math.MaxInt32

// Validate reports every out-of-range field in p. Each error names the
// offending field. The returned error is nil when p is usable as is.
func (p Params) Validate() error {
	var errs []error
	bad := func(field string, v float32, want string) {
		errs = append(errs, fmt.Errorf("sample: %s must be %s, got %v", field, want, v))
	}
	finite := func(v float32) bool {
		f := float64(v)
		return !math.IsNaN(f) && !math.IsInf(f, 0)
	}

	switch t := p.Temperature; {
	case !finite(t):
		bad("Temperature", t, "a finite number")
	case t < 0:
		bad("Temperature", t, ">= 0")
	}
	if p.TopK < 0 || p.TopK > MaxTopK {
		errs = append(errs, fmt.Errorf("sample: TopK must be in [0, %d], got %d", MaxTopK, p.TopK))
	}
	if v := p.TopP; !finite(v) || v < 0 || v > 1 {
		bad("TopP", v, "in [0, 1]")
	}
	if v := p.MinP; !finite(v) || v < 0 || v > 1 {
		bad("MinP", v, "in [0, 1]")
	}
	switch r := p.RepetitionPenalty; {
	case !finite(r):
		bad("RepetitionPenalty", r, "a finite number")
	case r < 0:
		bad("RepetitionPenalty", r, ">= 0")
	}
	if v := p.PresencePenalty; !finite(v) || v < -2 || v > 2 {
		bad("PresencePenalty", v, "in [-2, 2]")
	}
	if v := p.FrequencyPenalty; !finite(v) || v < -2 || v > 2 {
		bad("FrequencyPenalty", v, "in [-2, 2]")
	}
	return errors.Join(errs...)
}

// normalized folds the "off" encodings of every knob into one canonical
// form so the hot path only has to test one condition per stage. It also
// makes New total: out-of-range values that Validate would reject degrade
// to the nearest sensible behaviour instead of producing NaNs.
func (p Params) normalized() Params {
	nan := func(v float32) bool { return v != v }
	if nan(p.Temperature) || p.Temperature <= 0 {
		p.Temperature = 0
	}
	if math.IsInf(float64(p.Temperature), 1) {
		p.Temperature = math.MaxFloat32
	}
	if p.TopK < 0 {
		p.TopK = 0
	}
	if nan(p.TopP) || p.TopP <= 0 || p.TopP >= 1 {
		p.TopP = 0
	}
	if nan(p.MinP) || p.MinP <= 0 {
		p.MinP = 0
	}
	if p.MinP > 1 {
		p.MinP = 1
	}
	if r := p.RepetitionPenalty; nan(r) || r <= 0 || r == 1 || math.IsInf(float64(r), 0) {
		p.RepetitionPenalty = 0
	}
	clampPen := func(v float32) float32 {
		if nan(v) {
			return 0
		}
		return max(-2, min(2, v))
	}
	p.PresencePenalty = clampPen(p.PresencePenalty)
	p.FrequencyPenalty = clampPen(p.FrequencyPenalty)
	return p
}
