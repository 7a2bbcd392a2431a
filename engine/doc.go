// Package engine runs generation on a model: it turns requests into forward
// steps over a paged KV pool and samples their tokens.
//
// It holds no goroutines and no locks. A step is a plain function of the
// engine's state; the scheduler actor (and, before it lands, the CLI and the
// benchmarks) drives it. Each step packs prefill chunks under a token budget
// together with the single-token decodes of every running sequence, so one
// matmul per weight serves the whole batch — the point of batching on a
// memory-bound decoder.
package engine
