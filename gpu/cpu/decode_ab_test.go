package cpu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// abVariant is one configuration of BenchmarkDecodeAB.
type abVariant struct {
	name string
	opts Options
	mmap bool // weights left in the mapped file
}

// abVariants parses TROUPE_DECODE_AB: variants separated by ";", each a
// name followed by ",key=value" settings (sched=N, attn=MODE,
// mmap=1, threads=N). Default: the default device against the previous
// decode scheduling and the mapped weights.
func abVariants(b *testing.B) []abVariant {
	spec := os.Getenv("TROUPE_DECODE_AB")
	if spec == "" {
		spec = "default;counter,sched=1;mmap,mmap=1"
	}
	var vs []abVariant
	for _, v := range strings.Split(spec, ";") {
		f := strings.Split(v, ",")
		av := abVariant{name: f[0], opts: Options{Threads: 2}}
		for _, kv := range f[1:] {
			k, val, _ := strings.Cut(kv, "=")
			n, err := strconv.Atoi(val)
			if err != nil {
				b.Fatalf("TROUPE_DECODE_AB: %q: %v", kv, err)
			}
			switch k {
			case "sched":
				av.opts.mmSched = n
			case "attn":
				av.opts.attnMode = n
			case "mmap":
				av.mmap = n != 0
			case "threads":
				av.opts.Threads = n
			default:
				b.Fatalf("TROUPE_DECODE_AB: unknown setting %q", k)
			}
		}
		vs = append(vs, av)
	}
	return vs
}

// BenchmarkDecodeAB compares decode configurations within one process:
// SmolLM2-135M-shaped bf16 weights (written once to the temp dir), one
// sequence at KV depth 0 and 512, and turns of 8 decode steps that rotate
// between the variants for the benchmark time, so that every variant sees
// the same background load on a shared machine. It reports each variant's
// median tok/s over its turns and the median of its per-round ratio to the
// first variant. Variants: TROUPE_DECODE_AB (see abVariants); another
// checkpoint folder: TROUPE_DECODE_AB_MODEL.
func BenchmarkDecodeAB(b *testing.B) {
	dir := os.Getenv("TROUPE_DECODE_AB_MODEL")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "troupe-bench", "smollm2-135m-BF16")
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		cfg, err := checkpoint.Preset("smollm2-135m")
		if err != nil {
			b.Fatal(err)
		}
		if err := checkpoint.Write(dir, cfg, checkpoint.Options{DType: gpu.BF16, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	vs := abVariants(b)
	type inst struct {
		m    model.Model
		dev  *Device
		pool *kvcache.Pool
		seq  kvcache.Seq
	}
	models := map[bool]model.Model{}
	for _, v := range vs {
		if models[v.mmap] == nil {
			m, err := model.LoadWith(context.Background(), dir, model.LoadOptions{Mmap: v.mmap})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { m.Close() })
			models[v.mmap] = m
		}
	}
	for _, depth := range []int{0, 512} {
		b.Run(fmt.Sprintf("depth%d", depth), func(b *testing.B) {
			const steps = 8
			insts := make([]*inst, len(vs))
			for i, v := range vs {
				m := models[v.mmap]
				dev, err := New(v.opts)
				if err != nil {
					b.Fatal(err)
				}
				defer dev.Close()
				pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, (depth+steps)/16+2, 1)
				if err != nil {
					b.Fatal(err)
				}
				defer pool.Close()
				in := &inst{m: m, dev: dev, pool: pool}
				if err := pool.Reserve(&in.seq, depth+steps); err != nil {
					b.Fatal(err)
				}
				if depth > 0 {
					prompt := make([]int32, depth)
					for j := range prompt {
						prompt[j] = int32(1 + j*7919%49000)
					}
					if _, err := m.Forward(dev, pool, []model.Seq{{Tokens: prompt, Pages: in.seq.Pages, Logits: model.NoLogits}}); err != nil {
						b.Fatal(err)
					}
				}
				insts[i] = in
			}
			turn := func(in *inst) time.Duration {
				start := time.Now()
				tok := int32(17)
				for s := 0; s < steps; s++ {
					out, err := in.m.Forward(in.dev, in.pool, []model.Seq{{Tokens: []int32{tok}, Pos: depth + s, Pages: in.seq.Pages, Logits: model.LastLogits}})
					if err != nil {
						b.Fatal(err)
					}
					tok = int32(1 + (int(tok)*31+int(out[0]*1000)&0xffff)%49000)
				}
				return time.Since(start)
			}
			for _, in := range insts { // warm up
				turn(in)
			}
			tps := make([][]float64, len(vs))
			b.ResetTimer()
			for r := 0; b.Loop(); r++ {
				for k := range vs {
					i := (r + k) % len(vs)
					tps[i] = append(tps[i], steps/turn(insts[i]).Seconds())
				}
			}
			b.StopTimer()
			for i, v := range vs {
				ratios := make([]float64, len(tps[i]))
				for r := range ratios {
					ratios[r] = tps[i][r] / tps[0][r]
				}
				b.ReportMetric(median(tps[i]), v.name+"-tok/s")
				if i > 0 {
					b.ReportMetric(median(ratios), v.name+"/"+vs[0].name)
				}
			}
		})
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
