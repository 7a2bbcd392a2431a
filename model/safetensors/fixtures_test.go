package safetensors

import (
	"github.com/troupe-ai/troupe/internal/fixtures"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/model/pyjson"
)

// fixturesDir is the shared fixtures directory (see internal/fixtures).
func fixturesDir(t *testing.T) string {
	t.Helper()
	fixtures.Path(t, "models") // ends the test when the models are missing
	return fixtures.Dir(t)
}

// knownCounts is the number of tensors in the shared fixtures, checked when a
// model of that name is found.
var knownCounts = map[string]int{
	"bamba": 47, "gemma2": 46, "gemma3_text": 54, "jamba": 75, "llama_gqa": 21,
	"llama_tied": 29, "mamba": 22, "mamba2": 21, "mistral_swa": 21, "phi3": 15,
	"qwen2": 27, "qwen3": 24, "stories260k": 47,
}

var torchDTypes = map[string]gpu.DType{"float32": gpu.F32, "bfloat16": gpu.BF16, "float16": gpu.F16}

func TestFixtures(t *testing.T) {
	dir := fixturesDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "models", "*", SingleFile))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s under %s/models (%v)", SingleFile, dir, err)
	}
	for _, p := range files {
		modelDir := filepath.Dir(p)
		name := filepath.Base(modelDir)
		t.Run(name, func(t *testing.T) {
			m, err := Open(modelDir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			names := m.Names()
			if want, ok := knownCounts[name]; ok && len(names) != want {
				t.Errorf("%d tensors, want %d", len(names), want)
			}
			if len(names) == 0 {
				t.Fatal("no tensors")
			}
			var want gpu.DType
			if cfg, err := os.ReadFile(filepath.Join(modelDir, "config.json")); err == nil {
				var c struct {
					TorchDType string `json:"torch_dtype"`
					DType      string `json:"dtype"`
				}
				if err := pyjson.Unmarshal(cfg, &c); err != nil {
					t.Fatalf("config.json: %v", err)
				}
				want = torchDTypes[c.TorchDType]
				if want == 0 {
					want = torchDTypes[c.DType]
				}
			}
			counts := map[gpu.DType]int{}
			embed := false
			for _, n := range names {
				tt, err := m.Tensor(n)
				if err != nil {
					t.Fatal(err)
				}
				counts[tt.DType]++
				if len(tt.Shape) == 0 || len(tt.Data) == 0 {
					t.Errorf("%s: empty tensor, shape %v", n, tt.Shape)
				}
				for _, d := range tt.Shape {
					if d <= 0 {
						t.Errorf("%s: shape %v", n, tt.Shape)
					}
				}
				if len(tt.Data) != tt.Elements()*tt.DType.Size() {
					t.Errorf("%s: %d bytes for %v %v", n, len(tt.Data), tt.DType, tt.Shape)
				}
				embed = embed || strings.Contains(n, "embed")
			}
			if !embed {
				t.Errorf("no embedding tensor among %v", names)
			}
			if want != 0 && 2*counts[want] < len(names) {
				t.Errorf("config says %v but tensors are %v", want, counts)
			}
			if md := m.Metadata(); md["format"] != "pt" {
				t.Errorf("metadata %v, want format pt", md)
			}
			// The reference logits beside the model are a valid file too,
			// and not part of the model.
			ref := filepath.Join(modelDir, "reference_logits.safetensors")
			if _, err := os.Stat(ref); err == nil {
				r, err := OpenFile(ref)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				for _, n := range r.Names() {
					if m.Has(n) {
						t.Errorf("reference tensor %q leaked into the model", n)
					}
					if tt, err := r.Tensor(n); err != nil || tt.DType != gpu.F32 {
						t.Errorf("reference %s: %v %v", n, tt, err)
					}
				}
			}
		})
	}
}
