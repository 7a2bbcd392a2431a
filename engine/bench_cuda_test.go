//go:build cuda

package engine_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cuda"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// cudaBatches are the batch sizes of the CUDA benchmarks.
var cudaBatches = []int{1, 8, 64}

// cudaBench is a CUDA device 0 for b (Half16 as asked), with the
// operations that ran on the host logged and the device closed when b
// ends.
func cudaBench(b *testing.B, half16 bool) *cuda.Device {
	b.Helper()
	d, err := cuda.New(cuda.Options{Ordinal: 0, Half16: half16})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if fb := d.Fallbacks(); len(fb) > 0 {
			b.Logf("%s: operations on the host: %v", d.Name(), fb)
		}
		if err := d.Close(); err != nil {
			b.Error(err)
		}
	})
	return d
}

// cudaPool holds 64 sequences of up to 320 positions.
func cudaPool(b *testing.B, m model.Model) *kvcache.Pool {
	b.Helper()
	pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, 64*20, 64)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pool.Close() })
	return pool
}

// cudaRuns runs one sub-benchmark per weight precision (bf16 widened to
// float32 at upload, and kept in bf16 under Options.Half16) and batch size
// of cudaBatches on smollm2-135m shapes, each with the model, the pool, the
// device and the batch.
func cudaRuns(b *testing.B, run func(b *testing.B, m model.Model, pool *kvcache.Pool, dev *cuda.Device, batch int)) {
	m := benchModel(b, gpu.BF16)
	pool := cudaPool(b, m)
	for _, half16 := range []bool{false, true} {
		dev := cudaBench(b, half16)
		name := "smollm2-135m-bf16"
		if half16 {
			name += "-half16"
		}
		for _, batch := range cudaBatches {
			b.Run(name+"/batch"+strconv.Itoa(batch), func(b *testing.B) { run(b, m, pool, dev, batch) })
		}
	}
}

// BenchmarkCUDADecode measures decode tokens per second on the CUDA device
// (cudaRuns): each iteration prefills a 16-token prompt per sequence, then
// times 64 decode steps. It reports the aggregate tok/s, the weights as
// uploaded (weight-MiB) and the bandwidth that achieves if every step reads
// all weights once (GB/s = weight bytes x steps per second = weight bytes x
// tok/s / batch).
func BenchmarkCUDADecode(b *testing.B) {
	cudaRuns(b, func(b *testing.B, m model.Model, pool *kvcache.Pool, dev *cuda.Device, batch int) {
		const steps = 64
		var decode time.Duration
		for b.Loop() {
			reqs := make([]engine.Request, batch)
			for i := range reqs {
				reqs[i] = engine.Request{Prompt: prompt(16 + i%16), MaxTokens: steps + 1}
			}
			var longest time.Duration
			for _, r := range run(b, m, dev, pool, reqs) {
				longest = max(longest, r.Decode)
			}
			decode += longest
		}
		tokS := float64(batch*steps*b.N) / decode.Seconds()
		w := dev.WeightBytes()
		b.ReportMetric(tokS, "tok/s")
		b.ReportMetric(float64(w)/(1<<20), "weight-MiB")
		b.ReportMetric(float64(w)*tokS/float64(batch)/1e9, "GB/s")
	})
}

// BenchmarkCUDAPrefill measures prompt tokens per second on the CUDA device
// (cudaRuns) for sequences of a 256-token prompt each, prefilled together
// in 512-token steps (no prefix cache: each is computed): the aggregate
// rate, batch x 256 tokens over the time to the last sequence's first
// token.
func BenchmarkCUDAPrefill(b *testing.B) {
	const plen = 256
	cudaRuns(b, func(b *testing.B, m model.Model, pool *kvcache.Pool, dev *cuda.Device, batch int) {
		var prefill time.Duration
		for b.Loop() {
			reqs := make([]engine.Request, batch)
			for i := range reqs {
				reqs[i] = engine.Request{Prompt: prompt(plen), MaxTokens: 1}
			}
			var longest time.Duration
			for _, r := range run(b, m, dev, pool, reqs) {
				longest = max(longest, r.Prefill)
			}
			prefill += longest
		}
		b.ReportMetric(float64(batch*plen*b.N)/prefill.Seconds(), "tok/s")
	})
}
