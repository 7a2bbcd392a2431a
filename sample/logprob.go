package sample

import "math"

// TokenLogprob is a token id with its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// logSumExp returns the max and log(sum(exp(x))) of logits in float64,
// treating NaN as -Inf and +Inf as the largest finite float32 (the same
// sanitizing Sample applies).
func logSumExp(logits []float32) (maxV, lse float64) {
	maxV = math.Inf(-1)
	for _, x := range logits {
		if v := clean(x); v > maxV {
			maxV = v
		}
	}
	if math.IsInf(maxV, -1) {
		return maxV, maxV
	}
	var sum float64
	for _, x := range logits {
		sum += expNeg(clean(x) - maxV)
	}
	return maxV, maxV + math.Log(sum)
}

func clean(x float32) float64 {
	switch {
	case x != x:
		return math.Inf(-1)
	case x > math.MaxFloat32:
		return math.MaxFloat32
	}
	return float64(x)
}

// LogSoftmax writes log(softmax(logits)) into dst, computed in float64 for
// stability. dst must be at least as long as logits and may be logits
// itself. NaN logits get -Inf; if no logit is finite or +Inf, every output
// is -Inf.
func LogSoftmax(dst, logits []float32) {
	if len(dst) < len(logits) {
		panic("sample: LogSoftmax dst shorter than logits")
	}
	_, lse := logSumExp(logits)
	if math.IsInf(lse, -1) {
		for i := range logits {
			dst[i] = float32(math.Inf(-1))
		}
		return
	}
	for i, x := range logits {
		dst[i] = float32(clean(x) - lse)
	}
}

// TopLogprobs returns the k tokens with the highest log-probability under
// softmax(logits), by log-probability descending, ties by ascending id. It
// uses partial selection, so it costs O(n log k) rather than a full sort.
// k is clamped to len(logits); k <= 0 returns nil. The logprobs are of the
// raw distribution (no temperature, penalties or filters), which is what
// OpenAI-style "logprobs" report.
func TopLogprobs(logits []float32, k int) []TokenLogprob {
	k = min(k, len(logits))
	if k <= 0 {
		return nil
	}
	_, lse := logSumExp(logits)
	ids := selectTopK(logits, k, make([]int32, 0, k))
	out := make([]TokenLogprob, k)
	for i, id := range ids {
		lp := float32(math.Inf(-1))
		if !math.IsInf(lse, -1) {
			lp = float32(clean(logits[id]) - lse)
		}
		out[i] = TokenLogprob{ID: id, Logprob: lp}
	}
	return out
}
