package model_test

import (
	"context"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/internal/hugemem"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// TestWeightMemory: for every architecture, a model whose weights were
// copied into huge-page memory (the default; q/k/v and gate/up joined there)
// computes exactly what the same checkpoint computes from its
// memory-mapped files (LoadOptions.Mmap), and Info says where the weights
// live.
func TestWeightMemory(t *testing.T) {
	for _, arch := range checkpoint.Archs() {
		t.Run(arch, func(t *testing.T) {
			cfg, err := checkpoint.Tiny(arch)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := checkpoint.Write(dir, cfg, checkpoint.Options{DType: gpu.BF16, Seed: 5, Std: 0.3}); err != nil {
				t.Fatal(err)
			}
			copied, err := model.LoadWith(context.Background(), dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer copied.Close()
			mapped, err := model.LoadWith(context.Background(), dir, model.LoadOptions{Mmap: true})
			if err != nil {
				t.Fatal(err)
			}
			defer mapped.Close()
			thp := hugemem.THP()
			if want := thp == "always" || thp == "madvise"; copied.Info().HugePages != want {
				t.Errorf("copied weights: Info.HugePages %v with THP %q", copied.Info().HugePages, thp)
			}
			if mapped.Info().HugePages {
				t.Error("mapped weights: Info.HugePages is true")
			}
			prompt := []int32{1, 17, 25, 3, 9, 42, 7, 8}
			a := lastLogits(t, copied, ref.Device{}, [][]int32{prompt})
			b := lastLogits(t, mapped, ref.Device{}, [][]int32{prompt})
			if d := maxAbsDiff(a, b); d != 0 {
				t.Fatalf("logits differ by %g between copied and mapped weights", d)
			}
		})
	}
}
