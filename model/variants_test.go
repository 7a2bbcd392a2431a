package model_test

import (
	"math"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// Config options the shared fixtures do not cover (the held-back set does):
// each variant must load, agree between the reference and CPU backends, and
// give the same logits whether a token is decoded after a cached prefix or
// prefilled together with it.
func TestConfigVariants(t *testing.T) {
	base := func(mt, arch string) checkpoint.Config {
		return checkpoint.Config{
			"architectures": []string{arch}, "model_type": mt,
			"hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300,
			"rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 64,
		}
	}
	with := func(c checkpoint.Config, kv ...any) checkpoint.Config {
		for i := 0; i < len(kv); i += 2 {
			c[kv[i].(string)] = kv[i+1]
		}
		return c
	}
	variants := []struct {
		name  string
		cfg   checkpoint.Config
		dtype gpu.DType
		// Dynamic NTK changes the frequencies with the sequence length, so
		// (as in transformers) keys cached before the length passed the limit
		// keep their old rotation and chunking changes the result.
		chunkDependent bool
	}{
		{"llama explicit head_dim, llama3 rope, biases, untied, bf16", with(base("llama", "LlamaForCausalLM"),
			"head_dim", 16, "attention_bias", true, "mlp_bias", true, "tie_word_embeddings", false,
			"rope_scaling", map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}), gpu.BF16, false},
		{"llama linear rope", with(base("llama", "LlamaForCausalLM"), "rope_scaling", map[string]any{"type": "linear", "factor": 2.0}), gpu.F32, false},
		{"llama dynamic rope past max positions", with(base("llama", "LlamaForCausalLM"), "max_position_embeddings", 8,
			"rope_scaling", map[string]any{"type": "dynamic", "factor": 2.0}), gpu.F32, true},
		{"qwen2 with sliding layers", with(base("qwen2", "Qwen2ForCausalLM"), "use_sliding_window", true, "sliding_window", 4, "max_window_layers", 1), gpu.F32, false},
		{"qwen3 bf16", with(base("qwen3", "Qwen3ForCausalLM"), "head_dim", 8), gpu.BF16, false},
		{"mistral window 3", with(base("mistral", "MistralForCausalLM"), "sliding_window", 3), gpu.F32, false},
		{"phi3 partial rotary", with(base("phi3", "Phi3ForCausalLM"), "partial_rotary_factor", 0.5), gpu.F32, false},
		{"gemma2", with(base("gemma2", "Gemma2ForCausalLM"), "head_dim", 16, "query_pre_attn_scalar", 16, "sliding_window", 4,
			"attn_logit_softcapping", 5.0, "final_logit_softcapping", 3.0), gpu.F32, false},
		{"gemma3 layer_types", with(base("gemma3_text", "Gemma3ForCausalLM"), "head_dim", 16, "query_pre_attn_scalar", 16, "sliding_window", 4,
			"layer_types", []string{"full_attention", "sliding_attention"}, "rope_scaling", map[string]any{"rope_type": "linear", "factor": 4.0}), gpu.BF16, false},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := checkpoint.Write(dir, v.cfg, checkpoint.Options{DType: v.dtype, Seed: 11, Std: 0.3}); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			// 20 tokens: the whole prompt takes the prefill kernels (16 rows
			// and more), the chunks the decode ones.
			prompt := []int32{1, 17, 250, 3, 99, 42, 7, 8, 200, 5, 6, 13, 77, 150, 2, 9, 31, 64, 120, 11}
			devs := backends(t)
			var first []float32
			for _, b := range devs {
				dev := b.use(t, m)
				full := lastLogits(t, m, dev, [][]int32{prompt})
				split := lastLogits(t, m, dev, [][]int32{prompt[:7], prompt[7:11], prompt[11:]})
				if d := maxAbsDiff(full, split); d > 1e-4 && !v.chunkDependent {
					t.Errorf("%s: chunked prefill differs from one pass by %.3g", b.name, d)
				}
				if first == nil {
					first = full
				} else if d := maxAbsDiff(first, full); d > 1e-3 {
					t.Errorf("%s differs from %s by %.3g", b.name, devs[0].name, d)
				}
			}
		})
	}
}

// lastLogits feeds the chunks one forward call each and returns the logits
// after the last one.
func lastLogits(t *testing.T, m model.Model, dev gpu.Device, chunks [][]int32) []float32 {
	t.Helper()
	pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 4, 16, 8)
	if err != nil {
		t.Fatal(err)
	}
	var seq kvcache.Seq
	var logits []float32
	for i, c := range chunks {
		if err := pool.Reserve(&seq, seq.Len+len(c)); err != nil {
			t.Fatal(err)
		}
		if err := pool.EnsureSlot(&seq); err != nil {
			t.Fatal(err)
		}
		mode := model.NoLogits
		if i == len(chunks)-1 {
			mode = model.LastLogits
		}
		out, err := m.Forward(dev, pool, []model.Seq{{Tokens: c, Pos: seq.Len, Pages: seq.Pages, Slot: seq.Slot, Logits: mode}})
		if err != nil {
			t.Fatal(err)
		}
		seq.Len += len(c)
		logits = append(logits[:0], out...)
	}
	return logits
}

// TestSlidingWindowMatters guards against a window that is silently ignored:
// with a window smaller than the prompt the logits must differ from the same
// weights without one.
func TestSlidingWindowMatters(t *testing.T) {
	cfg := func(win int) checkpoint.Config {
		return checkpoint.Config{
			"architectures": []string{"MistralForCausalLM"}, "model_type": "mistral",
			"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
			"num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 64,
			"sliding_window": win, "max_position_embeddings": 64,
		}
	}
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	var out [2][]float32
	for i, win := range []int{3, 64} {
		dir := t.TempDir()
		if err := checkpoint.Write(dir, cfg(win), checkpoint.Options{Seed: 5, Std: 0.5}); err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = lastLogits(t, m, ref.Device{}, [][]int32{prompt})
		m.Close()
	}
	if d := maxAbsDiff(out[0], out[1]); d < 1e-3 {
		t.Fatalf("window 3 and window 64 give the same logits (diff %.3g)", d)
	}
}

func TestCapabilityOfDenseFamilies(t *testing.T) {
	// Every dense family keeps full KV pages (windows are masks), so none
	// needs snapshots; the window shows in the cache declaration.
	layers := []model.LayerCache{{Kind: model.FullAttention, KVHeads: 2, HeadDim: 8}, {Kind: model.WindowedAttention, KVHeads: 2, HeadDim: 8, Window: 4}}
	if model.SnapshotReuse(layers) {
		t.Fatal("windowed attention over full pages must not need snapshots")
	}
	if got := model.PoolLayout(layers); got.KVDims[0] != 16 || got.KVDims[1] != 16 || got.StateSizes[0] != 0 {
		t.Fatalf("pool layout %+v", got)
	}
	r := model.NewRegistry()
	for _, mt := range []string{"llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3_text"} {
		if _, ok := r.Family(mt); !ok {
			t.Errorf("family %s not registered", mt)
		}
	}
}

func TestRopeScalingFrequencies(t *testing.T) {
	plain, err := model.NewRope(500000, 128, 131072, 131072, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.ParseConfig("config.json", []byte(`{"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}`))
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := cfg.Sub("rope_scaling")
	l3, err := model.NewRope(500000, 128, 131072, 131072, sub)
	if err != nil {
		t.Fatal(err)
	}
	p, s := plain.InvFreq(1), l3.InvFreq(1)
	for i := range p {
		wave := 2 * math.Pi / float64(p[i])
		ratio := float64(s[i]) / float64(p[i])
		switch {
		case wave < 8192/4.0: // high frequencies are kept
			if ratio != 1 {
				t.Fatalf("freq %d (wavelength %.0f) scaled by %g, want 1", i, wave, ratio)
			}
		case wave > 8192: // low frequencies are divided by the factor
			if math.Abs(ratio-1.0/8) > 1e-6 {
				t.Fatalf("freq %d (wavelength %.0f) scaled by %g, want 1/8", i, wave, ratio)
			}
		default: // in between, a smooth blend
			if ratio <= 1.0/8 || ratio >= 1 {
				t.Fatalf("freq %d (wavelength %.0f) scaled by %g, want between 1/8 and 1", i, wave, ratio)
			}
		}
	}
	if _, err := model.NewRope(10000, 64, 2048, 2048, mustSub(t, `{"rope_scaling": {"type": "yarn-ish"}}`)); err == nil {
		t.Fatal("unknown rope type accepted")
	}
}

func mustSub(t *testing.T, js string) *model.Config {
	c, err := model.ParseConfig("config.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Sub("rope_scaling")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
