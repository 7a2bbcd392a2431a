package peerbench

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// CopyBandwidth is the machine's measured memory copy rate: bytes copied per
// second (each byte read once and written once), best of several copies of
// one large buffer, with one thread and with Threads threads each copying a
// slice of it.
type CopyBandwidth struct {
	Bytes    int64     `json:"bytes"`
	Threads  int       `json:"threads"`
	Samples1 []float64 `json:"samples_1_thread_bytes_per_s"`
	SamplesN []float64 `json:"samples_n_threads_bytes_per_s"`
	Best1    float64   `json:"best_1_thread_bytes_per_s"`
	BestN    float64   `json:"best_n_threads_bytes_per_s"`
}

// MeasureCopy copies a size-byte buffer reps times with one thread and reps
// times with threads threads and keeps the best rate of each. The buffers
// are written before timing so that page faults are not measured, and
// handed back to the OS afterwards.
func MeasureCopy(ctx context.Context, size int64, threads, reps int) (CopyBandwidth, error) {
	cb := CopyBandwidth{Bytes: size, Threads: threads}
	if size <= 0 || threads <= 0 || reps <= 0 {
		return cb, fmt.Errorf("copy bandwidth: size %d, threads %d, reps %d must be positive", size, threads, reps)
	}
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	defer debug.FreeOSMemory()
	once := func(n int) float64 {
		chunk := (len(src) + n - 1) / n
		var wg sync.WaitGroup
		t0 := time.Now()
		for lo := 0; lo < len(src); lo += chunk {
			hi := min(lo+chunk, len(src))
			wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
		}
		wg.Wait()
		return float64(size) / time.Since(t0).Seconds()
	}
	for range reps {
		if err := ctx.Err(); err != nil {
			return cb, fmt.Errorf("copy bandwidth: %w", err)
		}
		cb.Samples1 = append(cb.Samples1, once(1))
		cb.SamplesN = append(cb.SamplesN, once(threads))
	}
	for i := range cb.Samples1 {
		cb.Best1 = max(cb.Best1, cb.Samples1[i])
		cb.BestN = max(cb.BestN, cb.SamplesN[i])
	}
	return cb, nil
}
