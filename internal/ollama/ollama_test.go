package ollama

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// store writes a fake Ollama store: blobs by digest and one manifest per
// name, as ollama pull leaves them.
type store struct {
	t   *testing.T
	dir string
}

func (s store) blob(data string) (digest string) {
	sum := sha256.Sum256([]byte(data))
	h := hex.EncodeToString(sum[:])
	if err := os.MkdirAll(filepath.Join(s.dir, "blobs"), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "blobs", "sha256-"+h), []byte(data), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return "sha256:" + h
}

type layer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

func (s store) manifest(host, ns, model, tag string, layers ...layer) {
	dir := filepath.Join(s.dir, "manifests", host, ns, model)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json", "layers": layers})
	if err := os.WriteFile(filepath.Join(dir, tag), b, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	s := store{t, t.TempDir()}
	gguf := "GGUF fake model bytes"
	model := layer{MediaModel, s.blob(gguf), int64(len(gguf))}
	tmpl := layer{MediaTemplate, s.blob("{{ .Prompt }}"), 13}
	sys := layer{MediaSystem, s.blob("be brief"), 8}
	params := layer{MediaParams, s.blob(`{"stop":["x"]}`), 14}
	s.manifest(DefaultHost, DefaultNamespace, "llama3.2", "3b", model, tmpl, sys, params)
	s.manifest(DefaultHost, DefaultNamespace, "llama3.2", "latest", model)
	s.manifest(DefaultHost, "someone", "tiny", "q4", model)
	s.manifest("hf.co", "org", "repo", "Q4_K_M", model)
	s.manifest(DefaultHost, DefaultNamespace, "short", "latest", layer{MediaModel, model.Digest, 999})
	s.manifest(DefaultHost, DefaultNamespace, "tensors", "latest", layer{"application/vnd.ollama.image.tensor; name=w; dtype=BF16; shape=2,2", s.blob("xxxx"), 4})
	s.manifest(DefaultHost, DefaultNamespace, "baddigest", "latest", layer{MediaModel, "sha256:../../etc/passwd", 4})
	blob := filepath.Join(s.dir, "blobs", "sha256-"+strings.TrimPrefix(model.Digest, "sha256:"))

	for _, tc := range []struct {
		name, want string
		full       string
	}{
		{"llama3.2:3b", "", "registry.ollama.ai/library/llama3.2:3b"},
		{"llama3.2", "", "registry.ollama.ai/library/llama3.2:latest"},
		{"someone/tiny:q4", "", "registry.ollama.ai/someone/tiny:q4"},
		{"hf.co/org/repo:Q4_K_M", "", "hf.co/org/repo:Q4_K_M"},
		{"llama3.2:70b", "has tags 3b, latest", ""},
		{"nothere", "run ollama pull", ""},
		{"short", "has 21 bytes, the manifest says 999", ""},
		{"tensors", "has no application/vnd.ollama.image.model layer", ""},
		{"baddigest", "bad layer digest", ""},
		{"a/b/c/d", "more than host/namespace/model", ""},
		{"../x", "bad namespace", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Resolve(s.dir, tc.name)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want one saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Name.String() != tc.full || m.GGUF != blob || m.Size != int64(len(gguf)) {
				t.Fatalf("got %+v (%s), want %s at %s", m, m.Name, tc.full, blob)
			}
			if tc.name == "llama3.2:3b" && (m.Template != "{{ .Prompt }}" || m.System != "be brief" || m.Params != `{"stop":["x"]}`) {
				t.Errorf("text layers: %+v", m)
			}
		})
	}
	if _, err := Resolve(s.dir, "nothere"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing model's error %v is not ErrNotFound", err)
	}
}

func TestDir(t *testing.T) {
	t.Setenv("OLLAMA_MODELS", "/srv/ollama")
	if d, err := Dir(); err != nil || d != "/srv/ollama" {
		t.Errorf("Dir() = %q, %v with OLLAMA_MODELS set", d, err)
	}
	t.Setenv("OLLAMA_MODELS", "")
	t.Setenv("HOME", "/home/u")
	if d, err := Dir(); err != nil || d != "/home/u/.ollama/models" {
		t.Errorf("Dir() = %q, %v", d, err)
	}
}
