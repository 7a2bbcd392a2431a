package checkpoint_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// TestEveryArchRoundTrips: a tiny checkpoint of every architecture loads
// through the real loader, declares the right capability, and generates the
// same greedy tokens on the reference and CPU backends.
func TestEveryArchRoundTrips(t *testing.T) {
	dev, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	recurrent := map[string]bool{"mamba": true, "mamba2": true, "jamba": true, "bamba": true}
	for _, arch := range checkpoint.Archs() {
		for _, dt := range []gpu.DType{gpu.F32, gpu.BF16} {
			t.Run(arch+"/"+dt.String(), func(t *testing.T) {
				cfg, err := checkpoint.Tiny(arch)
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				if err := checkpoint.Write(dir, cfg, checkpoint.Options{DType: dt, Seed: 3, Std: 0.2}); err != nil {
					t.Fatal(err)
				}
				m, err := model.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if got := model.SnapshotReuse(m.Cache()); got != recurrent[arch] {
					t.Errorf("SnapshotReuse = %v, want %v", got, recurrent[arch])
				}
				if m.Info().DType != dt {
					t.Errorf("weights loaded as %v, want %v", m.Info().DType, dt)
				}
				var ids [][]int32
				for _, d := range []gpu.Device{ref.Device{}, dev} {
					pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, 8, 2)
					if err != nil {
						t.Fatal(err)
					}
					res, err := engine.Generate(context.Background(), m, d, pool, []engine.Request{{Prompt: []int32{1, 7, 300, 42, 9}, MaxTokens: 6}}, engine.Options{})
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, res[0].IDs)
				}
				if !slices.Equal(ids[0], ids[1]) {
					t.Errorf("reference backend %v, CPU backend %v", ids[0], ids[1])
				}
			})
		}
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	cfg, _ := checkpoint.Tiny("mamba2")
	var files [][]byte
	for _, seed := range []uint64{9, 9, 10} {
		d := t.TempDir()
		if err := checkpoint.Write(d, cfg, checkpoint.Options{Seed: seed}); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(d, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, data)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatal("the same config and seed gave different weights")
	}
	if bytes.Equal(files[0], files[2]) {
		t.Fatal("seeds 9 and 10 gave the same weights")
	}
}

// TestScriptModel: a script model replays its script after a prompt ending
// in the script's first token, greedy and sampled at temperature 1, in f32
// and bf16; a script whose token repeats with another successor is refused.
func TestScriptModel(t *testing.T) {
	dev, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	script := []int32{10, 200, 3, 77, 150, 9}
	for _, arch := range []string{"llama", "qwen3"} {
		for _, dt := range []gpu.DType{gpu.F32, gpu.BF16} {
			t.Run(arch+"/"+dt.String(), func(t *testing.T) {
				cfg, _ := checkpoint.Tiny(arch)
				dir := t.TempDir()
				if err := checkpoint.Write(dir, cfg, checkpoint.Options{DType: dt, Seed: 4, Script: script}); err != nil {
					t.Fatal(err)
				}
				m, err := model.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				for _, temp := range []float32{0, 1} {
					pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, 8, 2)
					if err != nil {
						t.Fatal(err)
					}
					req := engine.Request{Prompt: []int32{5, 300, 42, 10}, MaxTokens: len(script) - 1}
					req.Sample.Temperature = temp
					res, err := engine.Generate(context.Background(), m, dev, pool, []engine.Request{req}, engine.Options{})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(res[0].IDs, script[1:]) {
						t.Fatalf("temperature %v: generated %v, want the script %v", temp, res[0].IDs, script[1:])
					}
				}
			})
		}
	}
	cfg, _ := checkpoint.Tiny("llama")
	if err := checkpoint.Write(t.TempDir(), cfg, checkpoint.Options{Script: []int32{1, 2, 1, 3}}); err == nil {
		t.Fatal("a script repeating token 1 with successors 2 and 3 was accepted")
	}
}
