package cuda

import (
	"errors"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
)

func TestUploadBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[gpu.DType]int64
		half16 bool
		want   int64
	}{
		{"none", nil, false, 0},
		{"f32", map[gpu.DType]int64{gpu.F32: 10}, false, 40},
		{"bf16 widened", map[gpu.DType]int64{gpu.BF16: 10, gpu.F32: 1}, false, 44},
		{"bf16 kept", map[gpu.DType]int64{gpu.BF16: 10, gpu.F32: 1}, true, 24},
		{"f16 kept", map[gpu.DType]int64{gpu.F16: 3}, true, 6},
		{"quantized dequantized", map[gpu.DType]int64{gpu.Q8_0: 64, gpu.Q4_K: 256, gpu.F32: 2}, true, 4 * (64 + 256 + 2)},
	} {
		if got := UploadBytes(tc.params, tc.half16); got != tc.want {
			t.Errorf("%s: UploadBytes = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestCheckFit(t *testing.T) {
	const mib, gib = int64(1) << 20, int64(1) << 30
	for _, tc := range []struct {
		name        string
		need        MemoryNeed
		free, total int64
		oom         bool
		msg         string // the whole error; "" for none
	}{
		{name: "fits", need: MemoryNeed{Weights: 270 * mib, KV: gib, Scratch: 64 * mib}, free: 79 * gib, total: 80 * gib},
		{name: "exactly fits", need: MemoryNeed{Weights: 1, KV: 2, Scratch: 3}, free: 6, total: 6},
		{name: "short", need: MemoryNeed{Weights: 270 * mib, KV: gib, Scratch: 64 * mib}, free: 800 * mib, total: 80 * gib, oom: true,
			msg: "cuda:0: needs 1.3 GiB (weights 270.0 MiB, KV 1.0 GiB, scratch 64.0 MiB) but 800.0 MiB of 80.0 GiB is free: not enough free GPU memory"},
		{name: "one byte short", need: MemoryNeed{Weights: 1, KV: 2, Scratch: 3}, free: 5, total: 6, oom: true,
			msg: "cuda:0: needs 6 B (weights 1 B, KV 2 B, scratch 3 B) but 5 B of 6 B is free: not enough free GPU memory"},
		{name: "negative", need: MemoryNeed{Weights: -1}, free: 5, total: 6,
			msg: "cuda:0: bad memory figures: weights -1, KV 0, scratch 0, free 5 of 6 bytes"},
		{name: "free above total", need: MemoryNeed{}, free: 7, total: 6,
			msg: "cuda:0: bad memory figures: weights 0, KV 0, scratch 0, free 7 of 6 bytes"},
	} {
		err := CheckFit("cuda:0", tc.need, tc.free, tc.total)
		switch {
		case tc.msg == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.msg != "" && (err == nil || err.Error() != tc.msg):
			t.Errorf("%s: error %v\nwant %s", tc.name, err, tc.msg)
		case errors.Is(err, ErrOutOfMemory) != tc.oom:
			t.Errorf("%s: errors.Is(err, ErrOutOfMemory) = %v", tc.name, !tc.oom)
		}
	}
}
