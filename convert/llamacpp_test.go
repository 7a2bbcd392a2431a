package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/quant"
)

// llamaServerPath is llama.cpp's llama-server built for this machine
// (TROUPE_FIXTURES/../bench/llamacpp, else ../shared/bench/llamacpp beside
// the repository), "" when it is not there.
func llamaServerPath() string {
	dir := os.Getenv("TROUPE_FIXTURES")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "fixtures")
	}
	p := filepath.Join(dir, "..", "bench", "llamacpp", "llama-server")
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		return ""
	}
	return p
}

// llamaStep is one generated token of llama-server's /completion: the id
// and the log-probabilities of the five most likely tokens.
type llamaStep struct {
	ID     int32   `json:"id"`
	LogP   float64 `json:"logprob"`
	TopLog []struct {
		ID   int32   `json:"id"`
		LogP float64 `json:"logprob"`
	} `json:"top_logprobs"`
}

// llamaGenerate starts llama-server on the GGUF file at path and returns
// its greedy generation of n tokens after prompt (token ids, no BOS added).
func llamaGenerate(t *testing.T, server, path string, prompts [][]int32, n int) [][]llamaStep {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var log bytes.Buffer
	cmd := exec.CommandContext(ctx, server, "-m", path, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "-t", "1", "-c", "256", "-np", "1")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for {
		if r, err := http.Get(base + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			t.Fatalf("llama-server exited on %s:\n%s", path, log.String())
		case <-ctx.Done():
			t.Fatalf("llama-server did not come up on %s:\n%s", path, log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	var out [][]llamaStep
	for _, prompt := range prompts {
		// One token a request, the prompt grown by llama.cpp's own choice:
		// the answer holds the tokens' text, which the server parses and
		// refuses once random byte tokens make it invalid UTF-8.
		var steps []llamaStep
		ids := slices.Clone(prompt)
		for range n {
			body, _ := json.Marshal(map[string]any{"prompt": ids, "n_predict": 1, "temperature": 0, "n_probs": 5,
				"cache_prompt": false, "ignore_eos": true})
			r, err := http.Post(base+"/completion", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var resp struct {
				Evaluated int         `json:"tokens_evaluated"`
				Probs     []llamaStep `json:"completion_probabilities"`
			}
			data, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err == nil {
				err = json.Unmarshal(data, &resp)
			}
			if err != nil || r.StatusCode != http.StatusOK {
				t.Fatalf("llama-server /completion: status %d, %v: %s", r.StatusCode, err, data)
			}
			if resp.Evaluated != len(ids) || len(resp.Probs) != 1 {
				t.Fatalf("llama-server evaluated %d tokens (prompt %d) and generated %d", resp.Evaluated, len(ids), len(resp.Probs))
			}
			steps = append(steps, resp.Probs[0])
			ids = append(ids, resp.Probs[0].ID)
		}
		out = append(out, steps)
	}
	return out
}

// teacherForced loads the model at path and returns the log-softmax of the
// logits that decide each of the tokens llama.cpp generated after prompt,
// feeding llama.cpp's tokens back (row 0: after the prompt).
func teacherForced(t *testing.T, path string, prompt []int32, steps []llamaStep) [][]float64 {
	t.Helper()
	m, pool, seq := loadSeq(t, path, len(prompt)+len(steps))
	var rows [][]float64
	tokens, pos := prompt, 0
	for range steps {
		out, err := m.Forward(ref.Device{}, pool, []model.Seq{{Tokens: tokens, Pos: pos, Pages: seq.Pages, Slot: seq.Slot, Logits: model.LastLogits}})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, logSoftmax(out))
		pos += len(tokens)
		tokens = []int32{steps[len(rows)-1].ID}
	}
	return rows
}

func logSoftmax(x []float32) []float64 {
	hi := float64(slices.Max(x))
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - hi)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - hi - math.Log(sum)
	}
	return out
}

// compareLlama checks troupe's rows against llama.cpp's steps: the top-5
// log-probabilities within tol, and each greedy id troupe's argmax unless
// the two are within tol of each other in troupe's row (a tie that rounding
// decides). It returns the largest log-probability difference.
func compareLlama(t *testing.T, what string, rows [][]float64, steps []llamaStep, tol float64) float64 {
	t.Helper()
	var worst float64
	for k, s := range steps {
		row := rows[k]
		for _, p := range s.TopLog {
			worst = max(worst, math.Abs(row[p.ID]-p.LogP))
		}
		best := 0
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		if int32(best) != s.ID && row[best]-row[s.ID] > tol {
			t.Errorf("%s: step %d: llama.cpp chose %d (troupe log p %.5f), troupe %d (%.5f)", what, k, s.ID, row[s.ID], best, row[best])
		}
	}
	if worst > tol {
		t.Errorf("%s: top-5 log-probabilities differ from llama.cpp's by up to %.2g (tolerance %.2g)", what, worst, tol)
	}
	return worst
}

// llamaCppShapes make the tiny configs exercise what the GGUF keys carry:
// phi3 partial rotary embeddings, gemma2 soft-capping strong enough to
// matter on random weights, gemma3 a global layer (the sixth) with its own
// rope base.
var llamaCppShapes = map[string]map[string]any{
	"phi3":        {"partial_rotary_factor": 0.5, "original_max_position_embeddings": 1024},
	"gemma2":      {"attn_logit_softcapping": 0.5, "final_logit_softcapping": 0.25},
	"gemma3_text": {"num_hidden_layers": 6, "rope_theta": 1e6, "rope_local_base_freq": 100.0},
}

// llamaCppCases are the checkpoints TestLlamaCppParity runs: the shapes,
// phi3 with longrope scaling (llama-server's 256-token context keeps it on
// the short factors, as troupe's short sequences do), and gemma3 with every other layer global (a pattern the file has to
// say) and with no local layers at all (no sliding window in the file).
var llamaCppCases = []struct {
	name, arch string
	set        map[string]any
}{
	{"phi3", "phi3", llamaCppShapes["phi3"]},
	{"phi3-longrope", "phi3", map[string]any{"original_max_position_embeddings": 1024, "rope_scaling": map[string]any{"type": "longrope",
		"long_factor":  []float64{1, 1.5, 2, 3, 4, 6, 8, 12},
		"short_factor": []float64{1, 1.125, 1.25, 1.375, 1.5, 2, 2.5, 3}}}}, // exact in float32, as GGUF keeps them
	{"gemma2", "gemma2", llamaCppShapes["gemma2"]},
	{"gemma3", "gemma3_text", llamaCppShapes["gemma3_text"]},
	{"gemma3-pattern2", "gemma3_text", map[string]any{"sliding_window_pattern": 2, "rope_theta": 1e6, "rope_local_base_freq": 100.0}},
	{"gemma3-global", "gemma3_text", map[string]any{"sliding_window_pattern": 1, "rope_theta": 1e6, "rope_local_base_freq": 100.0}},
}

// TestLlamaCppParity: llama.cpp's llama-server runs the GGUF files Write
// makes of tiny random phi3, gemma2 and gemma3 checkpoints and generates
// greedily what troupe computes from the same file and from the checkpoint
// itself: the same ids, the top-5 log-probabilities within rounding. One
// prompt stays inside the tiny configs' sliding window (32), one goes past
// it. Skipped where llama-server is not built.
func TestLlamaCppParity(t *testing.T) {
	server := llamaServerPath()
	if server == "" {
		t.Skip("llama.cpp's llama-server not found at TROUPE_FIXTURES/../bench/llamacpp (see shared/bench/llamacpp/README.md)")
	}
	// The binary is built for one kind of CPU (AVX-512): elsewhere it
	// cannot run, which says nothing about troupe.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, server, "--version").CombinedOutput(); err != nil {
		t.Skipf("llama.cpp's llama-server does not run on this machine (%v): %s", err, bytes.TrimSpace(out))
	}
	short := []int32{1, 5, 9, 17, 33, 70, 101, 200}
	long := make([]int32, 40)
	for i := range long {
		long[i] = int32(3 + (i*37)%500)
	}
	prompts := [][]int32{short, long}
	const n = 16
	for _, c := range llamaCppCases {
		t.Run(c.name, func(t *testing.T) {
			dir := tinyCheckpointWith(t, c.arch, c.set)
			for _, tc := range []struct {
				ft  quant.FileType
				tol float64
			}{{"f32", 1e-3}, {"f16", 2e-2}} {
				out := filepath.Join(t.TempDir(), string(tc.ft)+".gguf")
				if err := Write(dir, out, Options{Type: tc.ft}); err != nil {
					t.Fatal(err)
				}
				llama := llamaGenerate(t, server, printableCopy(t, out), prompts, n)
				for i, prompt := range prompts {
					what := fmt.Sprintf("%s prompt %d (%d tokens)", tc.ft, i, len(prompt))
					ids := make([]int32, n)
					for k, s := range llama[i] {
						ids[k] = s.ID
					}
					d := compareLlama(t, what+", troupe on the GGUF file", teacherForced(t, out, prompt, llama[i]), llama[i], tc.tol)
					msg := fmt.Sprintf("%s: llama.cpp ids %v; troupe on GGUF: top-5 log p within %.2g", what, ids, d)
					if tc.ft == "f32" {
						d := compareLlama(t, what+", troupe on the checkpoint", teacherForced(t, dir, prompt, llama[i]), llama[i], tc.tol)
						msg += fmt.Sprintf(", on the checkpoint: within %.2g", d)
					}
					t.Log(msg)
				}
			}
		})
	}
}

// printableCopy writes a copy of the GGUF file at path in which every
// normal token but the newline ("Ċ", which llama.cpp looks up) reads
// "t<id>": llama-server parses the text it generates and refuses the
// invalid UTF-8 that random byte tokens make. Token ids, and so the
// computation, are unchanged.
func printableCopy(t *testing.T, path string) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kvs := f.KVs()
	tv, _ := f.Value("tokenizer.ggml.token_type")
	types, ok := tv.Int32s()
	if !ok {
		t.Fatal("no tokenizer.ggml.token_type")
	}
	for i, kv := range kvs {
		if kv.Key != "tokenizer.ggml.tokens" {
			continue
		}
		tokens, _ := kv.Value.Strings()
		tokens = slices.Clone(tokens)
		for id := range tokens {
			if types[id] == tokenNormal && tokens[id] != "Ċ" {
				tokens[id] = fmt.Sprintf("t%d", id)
			}
		}
		kvs[i].Value = gguf.StringsValue(tokens)
	}
	var tensors []gguf.WriteTensor
	for _, info := range f.Tensors() {
		data, err := f.TensorData(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: info.Name, Dims: info.Dims, Type: info.Type, Data: data})
	}
	out := filepath.Join(t.TempDir(), "printable.gguf")
	if err := gguf.WriteFile(out, kvs, tensors, 0); err != nil {
		t.Fatal(err)
	}
	return out
}
