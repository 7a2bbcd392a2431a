/*
 * cuhost.h: the host shim that lets the CUDA C kernels of this directory
 * compile as ordinary C++20 (g++/clang++) and run on the CPU, so that
 * `go test` checks them against gpu/ref without a GPU. It is never seen by
 * nvcc: common.cuh includes it only when __CUDACC__ is not defined.
 *
 * Execution model
 *
 *   launch(kernel, grid, block, args...) runs the grid's blocks one after
 *   the other on one team of blockDim.x*y*z real host threads (std::thread).
 *   Every thread of the team runs the kernel once per block, with the
 *   thread-locals threadIdx/blockIdx/blockDim/gridDim set as CUDA sets them.
 *   Blocks never run concurrently, which CUDA allows (it promises nothing
 *   about the order or concurrency of blocks), so kernels that rely on
 *   inter-block ordering or concurrency are not supported (none here does).
 *
 * __syncthreads()
 *
 *   A barrier across the live threads of the current block: arrivals are
 *   counted under a mutex, and waiters sleep on an atomic generation
 *   counter (C++20 atomic wait/notify) that the last arrival advances. A
 *   thread that returns from the kernel leaves the block: later barriers
 *   wait only for the threads still running, as on sm_70+. Every __syncthreads records its source line; if
 *   the threads of one barrier phase arrived from different lines (a
 *   __syncthreads in divergent code, undefined behaviour in CUDA) the
 *   process aborts with a message, so the tests catch it.
 *
 * Shared memory
 *
 *   Kernels declare shared arrays with SHARED_ARRAY(type, name, count),
 *   which on the device is `__shared__ type name[count]` (common.cuh) and
 *   here a reference into the block's arena: a 48 KiB buffer (CUDA's static
 *   shared-memory limit per block) owned by the launcher and shared by the
 *   team's threads. Each thread keeps its own bump offset into the arena,
 *   reset to 0 at every block; since every thread executes the same
 *   declarations in the same order (shared declarations sit unconditionally
 *   at the top of a kernel, as static __shared__ storage does in CUDA), all
 *   threads of a block resolve the same declaration to the same bytes, and
 *   the storage is private to the block because the arena is reset (and
 *   poisoned with NaN bytes, 0xff) before each block. Exceeding 48 KiB
 *   aborts, as the device build would fail to link.
 *
 * Warp intrinsics (__shfl_*, __ballot_*, ...) are deliberately not
 * provided: the kernels reduce through shared memory, which this shim
 * emulates exactly. Math functions are libm's (expf, tanhf, ...); rsqrtf
 * and the bit casts the device has as intrinsics are defined here.
 */
#ifndef CUHOST_H
#define CUHOST_H

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict

struct dim3 {
	unsigned x, y, z;
	constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using uint3 = dim3;

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __uint_as_float(unsigned u) {
	float f;
	std::memcpy(&f, &u, sizeof f);
	return f;
}
inline unsigned __float_as_uint(float f) {
	unsigned u;
	std::memcpy(&u, &f, sizeof u);
	return u;
}

namespace cuhost {

// kSharedBytes is CUDA's static shared-memory limit per block.
constexpr size_t kSharedBytes = 48 * 1024;

// Block is the state one team of threads shares while it runs a block.
class Block {
public:
	alignas(64) unsigned char arena[kSharedBytes];

	// reset prepares the block for n threads: all live, shared memory poisoned.
	void reset(unsigned n) {
		live_ = n;
		waiting_ = 0;
		std::memset(arena, 0xff, sizeof arena);
	}

	// sync is __syncthreads: wait for every live thread of the block.
	void sync(int line) {
		unsigned long gen;
		{
			std::lock_guard<std::mutex> l(mu_);
			if (waiting_ == 0) {
				line_ = line;
			} else if (line != line_) {
				std::fprintf(stderr, "cuhost: __syncthreads at line %d and line %d in the same phase (divergent barrier)\n", line_, line);
				std::abort();
			}
			gen = gen_.load(std::memory_order_relaxed);
			if (++waiting_ == live_) {
				release(gen);
				return;
			}
		}
		// Wait outside the mutex: the release store of the new generation
		// (made under the mutex every arriving thread took after its
		// writes) orders those writes before this thread's next reads.
		while (gen_.load(std::memory_order_acquire) == gen) gen_.wait(gen, std::memory_order_acquire);
	}

	// leave is a thread returning from the kernel.
	void leave() {
		std::lock_guard<std::mutex> l(mu_);
		--live_;
		if (waiting_ > 0 && waiting_ == live_) release(gen_.load(std::memory_order_relaxed));
	}

private:
	void release(unsigned long gen) {
		waiting_ = 0;
		gen_.store(gen + 1, std::memory_order_release);
		gen_.notify_all();
	}

	std::mutex mu_;
	unsigned live_ = 0, waiting_ = 0;
	std::atomic<unsigned long> gen_{0};
	int line_ = 0;
};

inline thread_local Block *tl_block;
inline thread_local size_t tl_shared_off;

// shared_array returns this thread's view of the next n elements of type T
// in the block's arena (see "Shared memory" above).
template <class T, size_t N> T (&shared_array())[N] {
	size_t off = (tl_shared_off + alignof(T) - 1) / alignof(T) * alignof(T);
	if (off + sizeof(T) * N > kSharedBytes) {
		std::fprintf(stderr, "cuhost: shared memory over %zu bytes\n", kSharedBytes);
		std::abort();
	}
	tl_shared_off = off + sizeof(T) * N;
	return *reinterpret_cast<T(*)[N]>(tl_block->arena + off);
}

inline void sync_threads(int line) { tl_block->sync(line); }

// launch runs kernel over grid blocks of block threads (see the header
// comment). It returns when every block has finished.
template <class... P, class... A> void launch(void (*kernel)(P...), dim3 grid, dim3 block, A... args) {
	unsigned n = block.x * block.y * block.z;
	unsigned long blocks = (unsigned long)grid.x * grid.y * grid.z;
	if (n == 0 || n > 1024 || blocks == 0) {
		std::fprintf(stderr, "cuhost: bad launch: block of %u threads, %lu blocks\n", n, blocks);
		std::abort();
	}
	Block *b = new Block; // 48 KiB: not on a thread's stack
	auto start = [b, n]() noexcept { b->reset(n); };
	std::barrier team((std::ptrdiff_t)n, start);
	std::vector<std::thread> threads;
	threads.reserve(n);
	for (unsigned t = 0; t < n; t++) {
		threads.emplace_back([&, t] {
			threadIdx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
			blockDim = block;
			gridDim = grid;
			tl_block = b;
			for (unsigned long i = 0; i < blocks; i++) {
				team.arrive_and_wait(); // the previous block is over; reset runs once
				blockIdx = dim3(i % grid.x, i / grid.x % grid.y, i / ((unsigned long)grid.x * grid.y));
				tl_shared_off = 0;
				kernel(static_cast<P>(args)...);
				b->leave();
			}
		});
	}
	for (auto &th : threads) th.join();
	delete b;
}

} // namespace cuhost

#define __syncthreads() cuhost::sync_threads(__LINE__)
#define SHARED_ARRAY(T, name, n) T(&name)[n] = cuhost::shared_array<T, (n)>()

#endif
