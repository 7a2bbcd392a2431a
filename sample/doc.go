// Package sample chooses the next token from a logits vector.
//
// A [Sampler] holds the state of one request: its random number generator,
// the context tokens the penalties look at, and scratch buffers that are
// reused from token to token so that [Sampler.Sample] does not allocate
// once warm. It is not safe for concurrent use; create one per request with
// [New] after checking the request with [Params.Validate].
//
// # Pipeline
//
// Sample applies, in this order:
//
//  1. Penalties on the raw logits, in vLLM's order: repetition, then
//     frequency, then presence.
//     - RepetitionPenalty follows the CTRL paper as implemented by Hugging
//     Face's RepetitionPenaltyLogitsProcessor and vLLM: for every distinct
//     token id in the context (prompt plus generated tokens, each counted
//     once) a positive logit is divided by the penalty and a negative one
//     multiplied by it, so values > 1 always make the token less likely.
//     - FrequencyPenalty and PresencePenalty follow the OpenAI API (and
//     vLLM): they look only at generated tokens, subtracting
//     FrequencyPenalty times the token's count and PresencePenalty once if
//     the count is non-zero.
//  2. Temperature: logits are divided by Temperature. Temperature 0 means
//     greedy decoding: the penalties still apply, then the argmax is taken
//     (lowest id on ties) and no randomness is consumed. This matches vLLM,
//     where penalties also change greedy output.
//  3. Top-k, then top-p, then min-p, the order in which Hugging Face
//     transformers applies its warpers. Each filter sees the distribution
//     renormalized over the survivors of the previous one: top-p is the
//     smallest set of most probable tokens whose probability sums to
//     >= TopP (at least one token), and min-p keeps tokens with probability
//     >= MinP times the top token's (a ratio no renormalization changes).
//     vLLM's V1 sampler applies min-p before top-k/top-p; the two orders
//     agree unless both TopP and MinP are set, because min-p and top-k both
//     cut a prefix of the ranking, which commutes.
//  4. Softmax over the survivors and one categorical draw by inverse CDF,
//     using exactly one uniform variate from the RNG per sampled token.
//
// Hugging Face implements top-p by removing the tokens whose ascending
// cumulative probability is <= 1-TopP; that is the same set as the
// definition above except for ties and rounding at the boundary. Ties in
// ranking are broken towards the lower token id everywhere, so results never
// depend on sort stability or map iteration order.
//
// # Determinism
//
// The RNG is math/rand/v2's PCG, seeded from Params.Seed (or crypto/rand
// when HasSeed is false; [Sampler.Seed] reports the seed either way so a
// request can be replayed). PCG's output is specified bit for bit, and the
// softmax uses a portable polynomial exponential rather than math.Exp (whose
// assembly versions differ by architecture and FMA availability), so a
// seeded request yields the same tokens on every platform. The mapping from
// the uniform to a token depends on which filters are active, so sequences
// are reproducible for fixed Params, not across different filter settings
// or versions of this package.
//
// # Performance
//
// Vocabularies run to 256k entries, so each stage avoids sorting the
// vocabulary:
//   - Greedy without penalties scans the caller's slice directly; otherwise
//     the logits are copied once into an internal buffer (the caller's
//     slice is never modified).
//   - Temperature (with or without min-p) needs no ordering: one pass
//     computes exp((l-max)/T), the draw walks the ids in order.
//   - Top-k keeps a size-k heap of candidates, rejecting most tokens with a
//     single comparison, then sorts only those k.
//   - Top-p without top-k uses the bound that tokens lighter than
//     (1-TopP)/n of the total can never be in the nucleus to prefilter, packs
//     each survivor's weight and id into one uint64, and finds the nucleus
//     boundary with a weighted quickselect (expected linear time); the
//     nucleus itself is never sorted.
//
// # Log-probabilities
//
// [LogSoftmax] and [TopLogprobs] serve APIs that return logprobs. They work
// on the logits they are given, so passing the raw model output reports the
// model's distribution before penalties, temperature and filtering, as the
// OpenAI API and vLLM's default do.
//
// # Model defaults
//
// [Defaults] are a model's recommended parameters (generation_config.json:
// temperature, top_p, top_k, min_p, repetition_penalty, the keys vLLM's
// --generation-config auto takes). [Defaults.Apply] replaces only the
// parameters a request did not set itself ([Fields]); an explicit value,
// temperature 0 included, always wins, as in vLLM.
//
// # Special values
//
// NaN logits are treated as -Inf (never chosen) and +Inf as the largest
// finite float32. If every logit is -Inf the result is token 0.
package sample
