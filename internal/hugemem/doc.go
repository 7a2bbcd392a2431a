// Package hugemem holds large read-mostly data, a model's weights, in
// anonymous memory that the kernel is asked to back with transparent huge
// pages (2 MiB on x86-64), instead of the 4 KiB pages of a file mapping or
// of the Go heap.
//
// Why: a decode step streams every weight once (270 MB for a 135M model in
// bf16). With 4 KiB pages that is 66,000 TLB misses per token, and on a
// virtual machine every miss is a two-level walk (guest page tables, then
// the host's); the hardware prefetchers also stop at each 4 KiB boundary.
// With 2 MiB pages the same bytes span 130 pages. On the project's 2-core
// Zen VM the decode matmuls of SmolLM2-135M stream about 1.5x faster from
// huge pages than from 4 KiB ones.
//
// An Arena reserves address space for its capacity (MAP_NORESERVE: only
// the pages written are committed), aligned to 2 MiB, and on Linux
// advises MADV_HUGEPAGE for all of it, which the kernel honours when
// /sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise".
// Where huge pages are unavailable ("never", other systems) the arena
// still works, on ordinary pages: Huge reports which. Allocation is a bump
// pointer (64-byte aligned blocks, in the order asked for, so weights
// used one after the other lie one after the other); Seal makes the used
// part read-only and returns the unused tail; Close unmaps everything, and
// slices obtained from the arena must not be used afterwards. On platforms
// without mmap the arena is a Go byte slice.
//
// This mirrors what llama.cpp does not do by default (it maps the GGUF
// file and reads it through 4 KiB page-cache pages, or copies it to heap
// memory with --no-mmap), and what engines that load weights into their
// own buffers get when the allocator uses huge pages.
package hugemem
