package troupe

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/metrics"
	"github.com/troupe-ai/troupe/model"
)

func TestParseDevice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want DeviceSpec
		err  string
	}{
		{"", DeviceSpec{}, ""},
		{"cpu", DeviceSpec{}, ""},
		{"cuda", DeviceSpec{CUDA: true}, ""},
		{"cuda:0", DeviceSpec{CUDA: true}, ""},
		{"cuda:3", DeviceSpec{CUDA: true, Ordinal: 3}, ""},
		{"cuda:", DeviceSpec{}, "want cuda:N"},
		{"cuda:-1", DeviceSpec{}, "want cuda:N"},
		{"cuda:01", DeviceSpec{}, "want cuda:N"},
		{"cuda:x", DeviceSpec{}, "want cuda:N"},
		{"gpu", DeviceSpec{}, "want cpu, cuda or cuda:N"},
		{"cpu:0", DeviceSpec{}, "want cpu, cuda or cuda:N"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDevice(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseDevice(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseDevice(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if back, err := ParseDevice(got.String()); err != nil || back != got {
				t.Errorf("ParseDevice(%q) = %v, %v: String does not round-trip", got.String(), back, err)
			}
		})
	}
}

// TestCheckDevice: the CPU is always there; a CUDA device only in a binary
// built with -tags cuda.
func TestCheckDevice(t *testing.T) {
	if _, err := CheckDevice("cpu"); err != nil {
		t.Fatal(err)
	}
	_, err := CheckDevice("cuda:1")
	if cudaBuilt {
		if err != nil {
			t.Fatalf("CheckDevice(cuda:1) in a CUDA build: %v", err)
		}
		return
	}
	if !errors.Is(err, ErrNoCUDA) || err.Error() != "device cuda:1: this binary has no CUDA backend; build with -tags cuda" {
		t.Fatalf("CheckDevice(cuda:1) without CUDA: %v", err)
	}
	if _, _, err := openDevice(Options{Device: "cuda"}); !errors.Is(err, ErrNoCUDA) {
		t.Fatalf("openDevice(cuda) without CUDA: %v", err)
	}
}

// fitDevice is a device with a memory check that records its figures and
// answers err.
type fitDevice struct {
	ref.Device
	params map[gpu.DType]int64
	kv     int64
	err    error
}

func (d *fitDevice) Name() string { return "fake-gpu" }

func (d *fitDevice) CheckMemory(params map[gpu.DType]int64, kvBytes int64) error {
	d.params, d.kv = params, kvBytes
	return d.err
}

// TestCheckMemory: the loader's memory check asks a device that has one
// with the model's parameters by dtype and the pool's size, and wraps its
// error; a device without one (the CPU) is not checked.
func TestCheckMemory(t *testing.T) {
	params := map[gpu.DType]int64{gpu.BF16: 100, gpu.F32: 10}
	errShort := errors.New("needs 1 GiB but 1 MiB is free")
	for _, tc := range []struct {
		name string
		dev  gpu.Device
		err  string
	}{
		{"no check", ref.Device{}, ""},
		{"fits", &fitDevice{}, ""},
		{"short", &fitDevice{err: errShort}, "loading the model on fake-gpu: needs 1 GiB but 1 MiB is free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMemory(tc.dev, params, 4096)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || err.Error() != tc.err || !errors.Is(err, errShort)) {
				t.Fatalf("checkMemory: %v, want %q", err, tc.err)
			}
			if f, ok := tc.dev.(*fitDevice); ok && (f.kv != 4096 || !maps.Equal(f.params, params)) {
				t.Errorf("checked with %v and %d KV bytes, want %v and 4096", f.params, f.kv, params)
			}
		})
	}
}

// memLoader loads no model onto a device that reports its memory.
type memLoader struct {
	actors.Loader
	dev gpu.Device
}

func (l memLoader) LoadModel(context.Context, func(string)) (model.Model, gpu.Device, *kvcache.Pool, error) {
	return nil, l.dev, nil, nil
}

// memGPU is a device with memory of its own.
type memGPU struct{ ref.Device }

func (memGPU) MemoryUse() gpu.MemoryUse { return gpu.MemoryUse{Weights: 7, Scratch: 3, Total: 100} }

// TestDeviceMemoryExported: the runtime's loader exports
// troupe_device_memory_bytes for a device that reports its memory, and
// not for one that does not (the CPU).
func TestDeviceMemoryExported(t *testing.T) {
	for _, tc := range []struct {
		dev    gpu.Device
		series int
	}{{ref.Device{}, 0}, {memGPU{}, 4}} {
		m := metrics.New()
		l := &limitsLoader{Loader: memLoader{dev: tc.dev}, metrics: m, device: "cuda:1", log: slog.Default()}
		if _, _, _, err := l.LoadModel(context.Background(), func(string) {}); err != nil {
			t.Fatal(err)
		}
		n, err := testutil.GatherAndCount(m.Registry, "troupe_device_memory_bytes")
		if err != nil || n != tc.series {
			t.Errorf("%T: %d series (%v), want %d", tc.dev, n, err, tc.series)
		}
	}
}
