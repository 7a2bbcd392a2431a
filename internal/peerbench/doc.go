// Package peerbench measures troupe side by side with llama.cpp on the same
// weights, on the same machine, in one run, and reports ratios.
//
// Absolute speeds on a small shared machine move by 20% and more from hour
// to hour, so the only number this package treats as meaningful is a ratio
// of two programs measured one right after the other, with the load average
// recorded around them. It follows the procedure of the llama.cpp peer
// README the project keeps next to the binaries (bench/llamacpp/README.md):
//
//   - kernels: `llama-bench -p 512 -n 128 -d 0,512 -t 2 -r 3 -o json` against
//     `troupe generate --json` runs of the same shapes (a 512-id prompt for
//     prefill and for decode at depth 512, a 1-id prompt with 129 tokens for
//     decode at depth 0), three of each, medians taken. Prefill speed is
//     prompt_tokens / prompt_ms and decode speed decode_steps / generate_ms,
//     as troupe's generate reports them; llama-bench's speeds are the
//     medians of its per-repetition samples (samples_ts), so both sides are
//     medians of three.
//   - serving: the sequence of bench/side-by-side.sh, re-expressed in Go so
//     that servers are stopped on every path: llama-server with 8 slots,
//     then `troupe serve --parallel 8`, each driven by the shared Go load
//     generator (bench/loadgen) at concurrency 1 and 8 and then multi-turn.
//
// Ratios are always "how many times faster troupe is": troupe / llama.cpp
// for throughputs and llama.cpp / troupe for latencies, so above 1 means
// troupe wins on every row.
//
// The models are SmolLM2-135M-shaped random weights written once by the
// project's make_smollm_random.py into a cache folder outside the
// repository: a Hugging Face bf16 checkpoint for troupe and a bf16 GGUF for
// llama.cpp. Before they are used the package checks, tensor by tensor, that
// both files hold the same values (a small GGUF reader undoes the q/k row
// permutation llama.cpp's converters apply), because a ratio between two
// different models would mean nothing.
//
// Nothing here runs in the normal test suite against real binaries; the
// unit tests feed recorded outputs of llama-bench, troupe generate and
// loadgen through the parsing, median and ratio code.
package peerbench
