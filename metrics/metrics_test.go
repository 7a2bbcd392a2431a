package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/troupe-ai/troupe/gpu"
)

// fakeGPU reports fixed figures, as a CUDA device's accounting would.
type fakeGPU struct{ use gpu.MemoryUse }

func (f *fakeGPU) MemoryUse() gpu.MemoryUse { return f.use }

// TestDeviceMemory: troupe_device_memory_bytes is absent until a device
// with memory of its own is watched, then reports its figures by kind as
// they are when scraped; watching the same device twice fails.
func TestDeviceMemory(t *testing.T) {
	m := New()
	if n, err := testutil.GatherAndCount(m.Registry, "troupe_device_memory_bytes"); err != nil || n != 0 {
		t.Fatalf("before a device is watched: %d series, %v", n, err)
	}
	dev := &fakeGPU{use: gpu.MemoryUse{Weights: 270 << 20, KV: 0, Scratch: 64 << 20, Total: 80 << 30}}
	if err := m.WatchDeviceMemory("cuda:0", dev); err != nil {
		t.Fatal(err)
	}
	dev.use.Weights, dev.use.KV = 540<<20, 1<<30
	want := `# HELP troupe_device_memory_bytes Memory of the compute device by kind: weights, kv, scratch (in use, from the device's own accounting), total (the device's memory).
# TYPE troupe_device_memory_bytes gauge
troupe_device_memory_bytes{device="cuda:0",kind="kv"} 1.073741824e+09
troupe_device_memory_bytes{device="cuda:0",kind="scratch"} 6.7108864e+07
troupe_device_memory_bytes{device="cuda:0",kind="total"} 8.589934592e+10
troupe_device_memory_bytes{device="cuda:0",kind="weights"} 5.66231040e+08
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "troupe_device_memory_bytes"); err != nil {
		t.Error(err)
	}
	if err := m.WatchDeviceMemory("cuda:0", dev); err == nil {
		t.Error("watching cuda:0 twice: no error")
	}
}
