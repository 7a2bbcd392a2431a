// Package cpu is the fast CPU backend of gpu.Device: C kernels called through
// cgo, chosen at run time by CPU feature.
//
// # Kernel sets
//
// New picks the best kernel set the CPU supports, or the one named in
// Options.Kernels (for tests and benchmarks):
//
//   - "avx512bf16": AVX-512 F/BW/VL with AVX512_BF16 (vdpbf16ps). Hand-written
//     intrinsics for the matmul (mm_avx512.c), the vector template
//     (generic_impl.h) at 16 lanes for the rest.
//   - "avx2": AVX2 + FMA + F16C, the template at 8 lanes.
//   - "portable": plain C (the template at 4 lanes, which GCC lowers to SSE2 or
//     NEON); the only set built on non-x86 machines.
//
// No file is compiled with -mavx* or -march: the x86 code carries per-function
// target attributes and is only reached after __builtin_cpu_supports says the
// CPU has the features, so one binary runs on any x86-64.
//
// # Matmul
//
// MatMul computes dst = x·Wᵀ with W in nn.Linear layout (N rows of K).
//
// Prefill (m >= 16) of BF16 weights packed at load (PackWeights, which
// model.PackWeights calls for every layer matrix) uses the panel kernel
// (mm_panel_avx512.c): the weights are stored a second time in panels of 32
// outputs, k-major, two bf16 per 32-bit word (outputs i and 16+i), so one
// 64-byte load per k gives the panel's 32 weights and two integer operations
// (shift, mask) widen them exactly; x is read in place, a row per broadcast.
// Per k: 1 load, 2 widening operations, 12 broadcasts and 24 FMAs into
// register accumulators, each output one sequential f32 FMA chain over the
// whole of k. Work items are (96 rows, panels worth 256 KB), taken from a
// shared counter; a thread keeps an item's panels in L2 while it walks its
// strips. It runs at the FMA peak of a Zen 5 core (~205 GFLOP/s at m = 512,
// 6-8% above the per-call packing kernel below) and gives the same bits as
// that kernel wherever it does not split k. The epilogue can also add to dst
// (MatMulAdd: the residual connection after o_proj and down_proj) or take a
// gated pair (MatMulGated: tiles of gate and up for the same rows, then
// act(gate) * up, so neither projection is written out). The copy costs 2
// bytes per weight of every layer matrix (about 200 MB on SmolLM2-135M); the
// original stays for decode.
//
// Prefill of other weights (F32, F16, BF16 not packed) on the avx512bf16 set
// uses a packed outer-product kernel (mm_avx512.c, TR_MM_PACK): x is packed
// once per call into strips of 12 rows, k-major; W is packed per panel of 32
// outputs and block of up to 576 k, transposed (32 weights per k) and widened
// to f32 as it is packed, so 16-bit weights cost nothing extra. For each k
// the kernel loads 2 zmm of weights, broadcasts 12 x values and issues 24
// FMAs into register accumulators; the first k block stores into dst, later
// ones add to it. It runs near the FMA
// peak of a Zen 5 core (~185-195 GFLOP/s single-threaded at m = 512, against
// ~150-190 for the dot-product tiles). Work items are panels of outputs (and
// parts of M when there are few panels), taken from a shared counter.
//
// Decode (m < 16), FastBF16 and the other kernel sets use dot-product tiles:
// up to 4 x-rows against 4 W-rows as K-vectorised dot products (16 f32 lanes,
// or 32 bf16 lanes for vdpbf16ps), with masked loads for the K tail and one
// transposing horizontal reduction per tile. W is walked in blocks of about
// 256 KB that stay in L2 while every x tile passes over them; the first pass
// over a block (the one that streams W from memory) prefetches 8 KB ahead.
// Decode is memory-bound (every weight is read once per token), so its
// threads each own a contiguous region of the output rows and walk it front
// to back in chunks that shrink as it empties: one sequential stream per
// thread. A thread done with its region takes chunks from the back of the
// fullest other region, so a descheduled thread does not hold up the call.
// Other matmuls take chunks of output rows from a shared counter. The
// weights themselves should sit on 2 MiB pages (model copies them into
// internal/hugemem memory): from the 4 KiB pages of a file mapping the same
// decode ran 1.15-1.4x slower on the project's 2-core VM.
//
// # Quantized weights
//
// Weights in ggml's block formats (gpu.Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K: GGUF files as they come) are never widened for
// decode. MatMul quantizes each row of x once per call, per block as the
// weight type pairs it (gpu/ref.QuantizeAct: blocks of 32 with their sum
// for the types with blocks of 32, blocks of 256 with sums per 16 for the K
// types; scale amax/127, quants rounded to nearest even), and every output
// is the sum over blocks of an integer dot product of the stored weight
// quants with the activation quants, offsets and minimums applied through
// the activation sums, times the scales (qmm.c, q_impl.h, q_portable.c):
// gpu/ref.QuantMatMul is that computation in Go, and the tests hold every
// kernel set to it within 2e-5 of the sum of the absolute values of its
// float terms. The result differs from x times the dequantized weights by the
// rounding of the activations (at most half a step of each activation
// block's scale times |w|).
//
// The kernels take the weight quants as unsigned bytes as stored (nibbles
// with the fifth or sixth bits or'ed in) and the activations as signed
// bytes: on the avx512bf16 set vpdpbusd (AVX-512 VNNI on 256-bit vectors)
// sums 4 products into int32 lanes exactly; on avx2 vpmaddubsw and vpmaddwd
// do (the largest pair, 63*127*2, fits int16); Q8_0 uses |w| and x with w's
// sign. The sub-block scales multiply the int32 lanes; per block the sums
// are converted once and scaled in float32. One call dots a weight row with
// up to 4 rows of x, unpacking each weight vector once for all of them. On
// the avx512bf16 set every type but Q2_K and Q3_K also has a kernel that
// dots two weight rows at once in 512-bit vectors (the two rows' blocks side
// by side, each row of x broadcast to both halves), which halves the vector
// instructions per output; the matmul pairs rows with it. Portable C does
// the same arithmetic with scalar integers (correct, but some 20-50x slower:
// the set for machines without AVX2).
//
// Decode (m < 5 on the VNNI set, m < 16 elsewhere) streams the weights
// once, threads owning regions of rows as for 16-bit decode (with
// stealing), prefetching 4 KB ahead; elsewhere prefills of 16-31 rows take
// 32 KB groups of weight rows that stay in cache while every 4 rows of x
// pass.
//
// On the VNNI set, weights of the types with blocks of 32 (Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1) and Q4_K packed at load (PackWeights, the packed group
// layout of tr_impl.h) serve every matmul of 1-31 rows. The bytes of each block
// of 16 weight rows are rearranged so that one 64-byte vector holds 4
// quants of each of the 16 rows (Q8_0 stored as q + 128, the others as
// their nibble bytes, two vectors per load, with the fifth bits of Q5_0
// and Q5_1 in a vector of their own, spread into the bytes by one shuffle
// and one bit test), followed by the 16 rows' scales (and minimums; Q4_K's
// 6-bit sub-block scales and minimums as bytes, one vector per sub-block):
// vpdpbusd takes such a vector against 4 quants of one row of x broadcast
// to all lanes, so every weight load serves all the rows of x of a tile
// of 8, every instruction 16 weight rows, and the sums land as 16
// consecutive outputs. The weights stream once per call in one sequential
// run per thread region, prefetched 4 KB ahead, with no unpacking: a
// batch of 8 costs 1.0-1.7x the time of one row on the layer matrices
// (BenchmarkQuantLayers, where the one-row kernels took 3-4x), and one row
// runs 1.1-2.2x faster than the one-row kernels (BenchmarkQuantKernel). The
// copy costs as much memory as the weights themselves (the same bytes,
// the last group padded to 16 rows): model.PackWeights packs the layer
// matrices as decode multiplies them and a quantized output head.
//
// Batches of 5-31 rows of the other K types on the VNNI set (and of weights not
// packed) run the same lane layout from the weights' own blocks
// (q_avx512.c's xl_*): 16 weight rows at a time are unpacked once per
// call (xl_block, then an 8x8 dword transpose per half) into a scratch
// buffer that every tile of 8 rows of x then streams. The one-row kernels
// would unpack each weight block again for every 4 rows of x.
//
// From 32 rows of x on (compute-bound prefill) the weights
// are dequantized to float32, bit-exact with gpu's block dequantizers (on
// the VNNI set in vectors, through the lane layout's block unpacking; in
// portable C elsewhere), in chunks of at most 4 MB, and multiplied by x unquantized with the f32
// kernels (the packed outer-product kernel on avx512bf16): gpu/ref.MatMul's
// semantics at the FMA peak. Embed dequantizes the gathered rows with
// gpu's block dequantizers (bit-exact).
//
// # Precision
//
// Activations are float32 and accumulation is in float32. F32 weights are used
// as they are; BF16 and F16 weights are widened to float32 exactly, so by
// default a 16-bit matmul is as accurate as an f32 matmul on the widened
// weights (tests hold every element within 1e-5 of sum_k |x_k||w_k| of the
// float64 reference):
//
//   - m < 16 (decode, memory-bound): weights are widened in registers; 16
//     partial sums per dot product (error about K/16 ulp of sum |x||w|).
//   - m >= 16 (prefill, compute-bound): the packed kernel, one sequential FMA
//     chain per output (error at most about K ulp of sum |x||w|, in practice
//     ~sqrt(K) ulp: ~1e-7 relative at K = 1536). Options-level test modes can
//     still force the older converted-block kernel (CONV), which converts an
//     L2-sized block of weights to float32 and runs the dot-product tiles.
//
// An alternative exact-enough mode splits each activation into hi = bf16(x)
// and lo = bf16(x - hi) and issues two vdpbf16ps per weight load (16 mantissa
// bits of x, error about 2^-17 of sum |x||w|); it is kept for benchmarks only.
//
// Options.FastBF16 rounds the activations to bf16 once and uses a single
// vdpbf16ps per 32 products: twice the arithmetic throughput of the exact
// modes, at about 3 significant digits (errors up to ~2^-9 of sum |x||w|).
// It only changes BF16-weight matmuls on the avx512bf16 kernels.
//
// Element-wise operations use a vectorised exp (Cody-Waite reduction, degree-7
// polynomial, ~1 ulp) and tanh (odd series below 0.4, else from exp); SiLU and
// GELU-tanh are written as g/(1+exp(-z)) to avoid cancellation.
//
// # Attention
//
// Prefill attention is tiled (flash-attention style): a work item is a block
// of query positions times the heads of one KV group (about 48 query rows),
// and walks the keys once, 64 at a time (32 or 16 for wider heads), with an
// online softmax (running max and sum per query row, in float32). Q is packed
// transposed and pre-scaled so that scores are vectors over query rows: each
// K element is broadcast from the KV cache straight into the FMAs of 8 keys x
// 48 rows, with no transposition of K and no horizontal sums; P·V then reuses
// each V row for 4 rows x 64 dimensions. Key tiles that no row of a query
// vector can see (causal, sliding window) are skipped, and blocks that every
// row sees fully skip the masking. On Zen 5 this runs about 6x faster than
// the per-head kernel (512-token prefill, 9/3 heads of 64).
//
// Decode (one query position of a sequence, head dim a multiple of the
// vector width) has its own kernel (attn_dec.h): a work item is a range of
// keys for every head, so it reads whole K and V rows (all KV heads of a
// position are stored together), with the rows of the next block of keys
// prefetched while the current one is computed. Scores come 16 keys at a
// time as vectors of partial products reduced by one shuffle tree, then an
// exact two-pass softmax; P·V keeps up to 4 heads x 64 outputs in registers
// so that a GQA group loads each V row once. A sequence alone on several
// threads splits its keys into parts (2 per thread, at least 128 keys; at
// most 4096), merged by the last part to finish (max and sum rescaling).
// Other calls with fewer than 3 query rows per KV head use the per-head
// kernel: an exact two-pass softmax per query row and head. All agree with
// the float64 reference within about 1e-6 of the largest output.
//
// # Threading
//
// A Device owns a pool of Threads-1 C threads; the calling thread is thread 0.
// Idle workers spin briefly on pause, then yield between checks (so that an
// oversubscribed machine does not starve the caller), then sleep on a
// condition variable after 200 µs without work. Dispatch costs well under a
// microsecond while they spin. Small operations (under 16K elements, or 64K
// multiply-adds for a matmul) run on the calling thread alone. Attention is
// split into (sequence, query block, KV head) items, (sequence, head,
// 16-query block) for the per-head kernel, or (sequence, part of the keys)
// for decode, taken dynamically, largest first (sequences with the longest
// context first, then their last query blocks).
// Calls on one Device are serialised by a mutex; Close stops the threads.
//
// # The calling goroutine
//
// Decode is a long run of short cgo calls (5-50 µs each, about 300 per step)
// from one goroutine that may never block: the engine steps back to back
// while requests last. Measured on the 2-vCPU Zen 5 VM (a paravirtualised
// guest): called from Go that way, the kernels cost 1.5-5 µs more per call
// than the same kernels called in a loop from C, a third of the time of a
// step's layer matmuls at 1 and at 8 rows. GODEBUG=asyncpreemptoff=1
// shrinks the gap and a runtime.Gosched every few milliseconds removes it,
// which points at Go's preemption of a goroutine that has run 10 ms without
// passing through the scheduler: while it sits in cgo calls, sysmon takes
// its P at its ticks, each call returns through the slow path of
// exitsyscall, and getting a P back does not give it a new scheduling tick
// (the runtime itself was not traced). So a kernel call starts with
// runtime.Gosched when 4 ms have passed since the last one did; a Device
// used from several goroutines yields on behalf of whichever one makes
// that call. More often costs more than it saves: a Gosched every 16 calls
// measured 15% slower than every 256.
package cpu
