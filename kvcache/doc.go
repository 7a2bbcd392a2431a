// Package kvcache holds the paged key/value memory of attention layers.
//
// KV lives in fixed-size pages shared by all sequences, as in vLLM's paged
// attention: a sequence owns a page table (a list of page ids), position p
// lives in page table[p/PageSize], slot p%PageSize. Every attention layer has
// its own K and V arrays indexed by the same page ids, so one page table serves
// all layers. Admission and preemption reason in pages, never in bytes.
//
// The pool is a plain data structure with no locking: the scheduler that owns
// the compute stream owns the pool. The prefix index (radix tree over token
// ids with reference-counted pages) is layered on top of it by the prompt-cache
// work; pages therefore carry reference counts from the start.
//
// Index is that prefix index for dense KV: a radix tree with one node per
// page, keyed by the page's token ids. Lookup shares whole matched pages by
// reference (one Retain each) and reports a page the match ends inside
// separately, for the caller to copy on write (CopyPage). Insert keeps one
// reference per node and reuses nodes already cached. Evict frees
// least-recently-used leaves whose page only the index holds.
//
// Pin keeps a cached prefix ahead of that LRU order until a given time: the
// prompt-cache breakpoints a client asks for (Anthropic's cache_control,
// 5 minutes or 1 hour) are inserted as soon as they are computed and
// pinned. Evict takes unpinned and expired pages first, least recently used
// first; only when nothing else is evictable does it take pinned pages, the
// pin that ends first first (counted as IndexStats.PinEvictions), so a pin
// never makes an allocation fail that would otherwise succeed and never
// wedges the scheduler. Pinning again extends a pin. Pins are timed by the
// clock given to NewIndexClock (time.Now by default), so tests inject one.
package kvcache
