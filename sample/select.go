package sample

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// The selection routines rank tokens by a strict total order: higher logit
// first, ties broken towards the lower token id. NaN ranks below -Inf, so
// callers that pass unsanitized logits still get a well-defined order.

func key(x float32) float32 {
	if x != x {
		return float32(math.Inf(-1))
	}
	return x
}

// better reports whether token a ranks strictly above token b.
func better(v []float32, a, b int32) bool {
	va, vb := key(v[a]), key(v[b])
	return va > vb || (va == vb && a < b)
}

// selectTopK returns the k best token ids of v, best first, using h as
// storage. It keeps a size-k min-heap (worst candidate at the root), so the
// cost is O(n) comparisons against the root plus O(log k) per insertion; for
// k << n nearly every token is rejected by one comparison. k must be in
// [1, len(v)].
func selectTopK(v []float32, k int, h []int32) []int32 {
	h = h[:0]
	n := len(v)
	for i := 0; i < k; i++ {
		h = append(h, int32(i))
		siftUp(v, h, i)
	}
	// Later ids lose ties, so a newcomer must beat the root strictly.
	thr := key(v[h[0]])
	for i := k; i < n; i++ {
		if key(v[i]) <= thr {
			continue
		}
		h[0] = int32(i)
		siftDown(v, h, 0, k)
		thr = key(v[h[0]])
	}
	// Heap sort: move the worst to the back repeatedly, leaving best first.
	for end := k - 1; end > 0; end-- {
		h[0], h[end] = h[end], h[0]
		siftDown(v, h, 0, end)
	}
	return h
}

func siftUp(v []float32, h []int32, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !better(v, h[parent], h[i]) {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func siftDown(v []float32, h []int32, i, n int) {
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && better(v, h[c], h[r]) {
			c = r // pick the worse child
		}
		if !better(v, h[i], h[c]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// packKey packs a token's weight (>= 0) and id into one integer whose
// descending order is: heavier first, then lower id. Non-negative float32
// bit patterns order like the floats, so selection runs on plain uint64
// comparisons over contiguous memory.
func packKey(w float32, id int32) uint64 {
	return uint64(math.Float32bits(w))<<32 | uint64(^uint32(id))
}

func keyWeight(k uint64) float32 { return math.Float32frombits(uint32(k >> 32)) }
func keyID(k uint64) int32       { return int32(^uint32(k)) }

// nucleus reorders keys (see packKey) so that keys[:m] is the smallest set
// of best-ranked tokens whose weights sum to >= need, and returns m (at
// least 1 when keys is non-empty). keys[:m] is not sorted.
//
// It is a weighted quickselect: partition around a pivot, then continue
// only on the side that holds the boundary, so the expected cost is
// O(len(keys)). A depth limit falls back to sorting the remaining range,
// bounding the worst case at O(n log n).
func nucleus(keys []uint64, need float64) int {
	lo, hi := 0, len(keys)
	// Invariant: keys[:lo] is in the nucleus and ranks above keys[lo:hi];
	// keys[hi:] is out. need is what keys[lo:hi] still has to contribute.
	budget := 2 * (bits.Len(uint(len(keys))) + 4)
	for hi-lo > 32 && budget > 0 {
		budget--
		pivot := median3(keys[lo], keys[lo+(hi-lo)/2], keys[hi-1])
		// Branch-free Lomuto: always swap, advance i only when the key
		// beats the pivot, since the comparison is unpredictable.
		i := lo
		for j := lo; j < hi; j++ {
			k := keys[j]
			keys[j] = keys[i]
			keys[i] = k
			step := 0
			if k > pivot {
				step = 1
			}
			i += step
		}
		var mass float64
		for _, k := range keys[lo:i] {
			mass += float64(keyWeight(k))
		}
		// keys[lo:i] beat the pivot; the pivot is somewhere in keys[i:hi].
		// Move it to keys[i].
		for j := i; j < hi; j++ {
			if keys[j] == pivot {
				keys[i], keys[j] = pivot, keys[i]
				break
			}
		}
		withPivot := mass + float64(keyWeight(pivot))
		switch {
		case i > lo && mass >= need:
			hi = i
		case withPivot >= need:
			return i + 1
		default:
			need -= withPivot
			lo = i + 1
		}
	}
	rest := keys[lo:hi]
	slices.SortFunc(rest, func(a, b uint64) int { return cmp.Compare(b, a) })
	var cum float64
	for j, k := range rest {
		cum += float64(keyWeight(k))
		if cum >= need {
			return lo + j + 1
		}
	}
	return max(hi, min(1, len(keys)))
}

func median3(a, b, c uint64) uint64 {
	if a < b {
		a, b = b, a
	}
	// a >= b
	if c > b {
		return min(a, c)
	}
	return b
}
