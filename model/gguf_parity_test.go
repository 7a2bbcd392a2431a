package model_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/safetensors"
)

// dequantTol bounds our float32 forward pass on a file's dequantized
// weights against llama.cpp's on the same weights in F32
// (dequant_f32_*_logits): both are float32 passes over identical weights
// and differ only in summation order.
const dequantTol = 1e-5

// ggufManifest is the part of fixtures/gguf/manifest.json the model tests
// read.
type ggufManifest struct {
	Prompt struct {
		IDs []int32 `json:"ids"`
	} `json:"prompt"`
	Models map[string]struct {
		Hidden  int  `json:"hidden_size"`
		Layers  int  `json:"num_hidden_layers"`
		Vocab   int  `json:"vocab_size"`
		Tied    bool `json:"tie_word_embeddings"`
		Context int  `json:"context_length"`
	} `json:"models"`
	Files []ggufFixture `json:"files"`
}

type ggufFixture struct {
	File                string         `json:"file"`
	Family              string         `json:"family"`
	FType               string         `json:"ftype"`
	LogitsFile          string         `json:"logits_file"`
	TypeCounts          map[string]int `json:"tensor_type_counts"`
	GreedyIDs           []int32        `json:"greedy_ids"`
	GreedyStepsChecked  int            `json:"greedy_steps_checked"`
	TeacherForcedSteps  []int          `json:"teacher_forced_checkable_steps"`
	PromptCheckable     []int          `json:"prompt_checkable_positions"`
	PromptArgmax        []int32        `json:"prompt_argmax"`
	Tolerance           float64        `json:"tolerance_abs_logit"`
	DequantF32ArgmaxIDs []int32        `json:"dequant_f32_argmax_ids"`
}

func readGGUFManifest(t *testing.T) (string, *ggufManifest) {
	t.Helper()
	p := fixtures.Path(t, "gguf", "manifest.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m ggufManifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if len(m.Files) == 0 || len(m.Prompt.IDs) == 0 {
		t.Fatalf("%s lists no files or no prompt", p)
	}
	return filepath.Dir(p), &m
}

// readLogits returns the named [rows, vocab] float32 tensors of a
// *.logits.safetensors file.
func readLogits(t *testing.T, path string, names ...string) map[string][]float32 {
	t.Helper()
	f, err := safetensors.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float32{}
	for _, n := range names {
		tn, err := f.Tensor(n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = (&gpu.Weight{DType: gpu.F32, Rows: 1, Cols: tn.Elements(), Data: tn.Data}).Float32s()
	}
	return out
}

// ggufDiffs are the largest logit differences of one run of a file.
type ggufDiffs struct {
	promptDequant, decodeDequant, promptLlama, decodeLlama float64
}

// TestGGUFParity loads every GGUF fixture (llama and qwen3, F16 and ten
// llama-quantize types), runs the 24-token prompt with logits at every
// position and 16 teacher-forced decode steps on every backend (gpu/ref,
// the CPU device, the CUDA device in a build with -tags cuda, the CPU
// device with packed weights), and
// compares with llama.cpp: within dequantTol of its float32 pass on the
// dequantized weights, within the file's tolerance_abs_logit of its own
// (quantized-activation) pass, and with its greedy ids for the steps the
// manifest says are decided by a clear margin.
func TestGGUFParity(t *testing.T) {
	dir, man := readGGUFManifest(t)
	var report []string
	for _, fx := range man.Files {
		t.Run(strings.TrimSuffix(filepath.Base(fx.File), ".gguf"), func(t *testing.T) {
			d := checkGGUFFile(t, dir, man, fx)
			report = append(report, fmt.Sprintf("%-28s vs dequant f32: prompt %.2e decode %.2e | vs llama.cpp: prompt %.2e decode %.2e (tol %g)",
				fx.File, d.promptDequant, d.decodeDequant, d.promptLlama, d.decodeLlama, fx.Tolerance))
		})
	}
	for _, r := range report {
		t.Log(r)
	}
}

func checkGGUFFile(t *testing.T, dir string, man *ggufManifest, fx ggufFixture) ggufDiffs {
	var all ggufDiffs
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			d := checkGGUFBackend(t, dir, man, fx, b)
			all.promptDequant = max(all.promptDequant, d.promptDequant)
			all.decodeDequant = max(all.decodeDequant, d.decodeDequant)
			all.promptLlama = max(all.promptLlama, d.promptLlama)
			all.decodeLlama = max(all.decodeLlama, d.decodeLlama)
		})
	}
	return all
}

// checkGGUFBackend loads the file and checks it on one backend.
func checkGGUFBackend(t *testing.T, dir string, man *ggufManifest, fx ggufFixture, b backend) ggufDiffs {
	var d ggufDiffs
	m, err := model.LoadWith(context.Background(), filepath.Join(dir, fx.File), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, want := m.Info(), man.Models[fx.Family]
	if info.Vocab != want.Vocab || info.Hidden != want.Hidden || info.Layers != want.Layers || info.MaxPos != want.Context {
		t.Errorf("Info %+v does not match the manifest's model %+v", info, want)
	}
	if info.BOS != 1 || len(info.EOS) != 1 || info.EOS[0] != 2 {
		t.Errorf("BOS %d EOS %v, want 1 and [2] (tokenizer.ggml.*)", info.BOS, info.EOS)
	}
	ref := readLogits(t, filepath.Join(dir, fx.LogitsFile), "prompt_logits", "decode_logits", "dequant_f32_prompt_logits", "dequant_f32_decode_logits")
	V := info.Vocab
	ids := man.Prompt.IDs
	steps := len(fx.GreedyIDs)
	dev := b.use(t, m)
	pool := newPool(t, m)
	seq := newSeq(t, pool, len(ids)+steps)
	prompt, err := m.Forward(dev, pool, []model.Seq{{Tokens: ids, Pages: seq.Pages, Logits: model.AllLogits}})
	if err != nil {
		t.Fatal(err)
	}
	prompt = append([]float32(nil), prompt...)
	d.promptDequant = maxAbsDiff(prompt, ref["dequant_f32_prompt_logits"])
	d.promptLlama = maxAbsDiff(prompt, ref["prompt_logits"])
	for _, pos := range fx.PromptCheckable {
		if got := argmax(prompt[pos*V : (pos+1)*V]); got != fx.PromptArgmax[pos] {
			t.Errorf("prompt position %d: argmax %d, llama.cpp %d", pos, got, fx.PromptArgmax[pos])
		}
	}
	// Teacher-forced decode: feed llama.cpp's greedy ids one at a time.
	// Row k of the logits decides greedy_ids[k] (row 0: the last prompt
	// position).
	rows := [][]float32{prompt[(len(ids)-1)*V:]}
	for i, id := range fx.GreedyIDs {
		out, err := m.Forward(dev, pool, []model.Seq{{Tokens: []int32{id}, Pos: len(ids) + i, Pages: seq.Pages, Logits: model.LastLogits}})
		if err != nil {
			t.Fatal(err)
		}
		row := append([]float32(nil), out...)
		d.decodeDequant = max(d.decodeDequant, maxAbsDiff(row, ref["dequant_f32_decode_logits"][i*V:(i+1)*V]))
		d.decodeLlama = max(d.decodeLlama, maxAbsDiff(row, ref["decode_logits"][i*V:(i+1)*V]))
		rows = append(rows, row)
	}
	for k := 0; k < fx.GreedyStepsChecked; k++ {
		if got := argmax(rows[k]); got != fx.GreedyIDs[k] {
			t.Errorf("greedy step %d: id %d, llama.cpp %d (steps checked: %d)", k, got, fx.GreedyIDs[k], fx.GreedyStepsChecked)
		}
	}
	for _, k := range fx.TeacherForcedSteps {
		if got := argmax(rows[k]); got != fx.GreedyIDs[k] {
			t.Errorf("teacher-forced step %d: argmax %d, llama.cpp %d", k, got, fx.GreedyIDs[k])
		}
	}
	quantized := info.DType.Quantized() && b.name != "ref"
	for k, want := range fx.DequantF32ArgmaxIDs {
		// Our float32 pass and llama.cpp's run the same weights: even
		// small margins decide alike. (Not with quantized activations,
		// where llama.cpp's own quantized pass decides some otherwise.)
		if quantized {
			break
		}
		if got := argmax(rows[k]); got != want {
			t.Errorf("step %d: argmax %d, llama.cpp on the dequantized weights %d", k, got, want)
		}
	}
	// The reference backend dots the dequantized rows in float64: llama.cpp's
	// float32 pass on the same weights. The CPU kernels quantize the
	// activations per block, as llama.cpp's do: that error is what the
	// file's tolerance allows.
	tol := dequantTol
	if quantized {
		tol = fx.Tolerance
	}
	if d.promptDequant > tol || d.decodeDequant > tol {
		t.Errorf("logits differ from llama.cpp's float32 pass on the dequantized weights by %.3g (prompt) / %.3g (decode), tolerance %g",
			d.promptDequant, d.decodeDequant, tol)
	}
	if d.promptLlama > fx.Tolerance || d.decodeLlama > fx.Tolerance {
		t.Errorf("logits differ from llama.cpp's by %.3g (prompt) / %.3g (decode), the file's tolerance is %g",
			d.promptLlama, d.decodeLlama, fx.Tolerance)
	}
	return d
}
