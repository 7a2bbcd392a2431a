package peerbench

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// LlamaCommit is the llama.cpp commit the peer binaries were built from; its
// gguf-py writes the GGUF files.
const LlamaCommit = "34af94cd"

// ModelName is the name both servers serve the peer model under, and the
// stem of its GGUF file.
const ModelName = "smollm2-135m-random"

// PrepareConfig says where the peer models live and how to make them.
type PrepareConfig struct {
	CacheDir      string // models and gguf-py go here, outside the repository
	Script        string // make_smollm_random.py
	TokenizerJSON string // the Qwen3 tokenizer.json the script truncates
	Python        string // an interpreter with numpy (/usr/bin/python3)
	// GGUFPy is a folder holding llama.cpp's gguf package (gguf-py at
	// LlamaCommit); default CacheDir/gguf-py-LlamaCommit/gguf-py.
	GGUFPy string
	// LlamaGit is a git directory holding LlamaCommit (a clone or mirror of
	// llama.cpp); when GGUFPy is missing, gguf-py is exported from it.
	LlamaGit string
	Seed     int
	Log      *slog.Logger // progress; nil: none
}

// Models are the prepared peer checkpoints.
type Models struct {
	Name      string            `json:"name"`
	Dir       string            `json:"dir"`
	HF        string            `json:"hf"`   // Hugging Face bf16 checkpoint folder (troupe)
	GGUF      string            `json:"gguf"` // bf16 GGUF file (llama.cpp)
	Seed      int               `json:"seed"`
	Checksums map[string]string `json:"sha256"` // as make_smollm_random.py --checksums printed them
	Check     WeightCheck       `json:"weight_check"`
}

// markerFile is written last into a prepared model folder.
const markerFile = "peer.json"

// marker is markerFile's content.
type marker struct {
	Script    string            `json:"script"`
	Seed      int               `json:"seed"`
	Checksums map[string]string `json:"sha256"`
}

// modelFiles are the files of a prepared folder that the checksums cover.
var modelFiles = []string{"hf-bf16/model.safetensors", ModelName + "-bf16.gguf"}

// verifyChecksums recomputes the sha256 of the model files.
func verifyChecksums(dir string, sums map[string]string) error {
	for _, p := range modelFiles {
		want := sums[p]
		if want == "" {
			return fmt.Errorf("%s: no checksum recorded for %s", markerFile, p)
		}
		f, err := os.Open(filepath.Join(dir, p))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			return fmt.Errorf("%s: sha256 %s, recorded %s", p, got, want)
		}
	}
	return nil
}

// Prepare returns the peer models, writing them first if the cache lacks
// them, and checks that the two checkpoints hold the same weights.
func Prepare(ctx context.Context, c PrepareConfig) (Models, error) {
	dir := filepath.Join(c.CacheDir, fmt.Sprintf("%s-seed%d", ModelName, c.Seed))
	m := Models{Name: ModelName, Dir: dir, HF: filepath.Join(dir, "hf-bf16"),
		GGUF: filepath.Join(dir, ModelName+"-bf16.gguf"), Seed: c.Seed}
	if b, err := os.ReadFile(filepath.Join(dir, markerFile)); err == nil {
		var saved marker
		if err := json.Unmarshal(b, &saved); err != nil {
			return m, fmt.Errorf("prepare: %s: %w (remove the folder to rebuild it)", filepath.Join(dir, markerFile), err)
		}
		m.Checksums = saved.Checksums
		if err := verifyChecksums(dir, m.Checksums); err != nil {
			return m, fmt.Errorf("prepare: %w (remove %s to rebuild it)", err, dir)
		}
	} else {
		if err := makeModels(ctx, c, dir, &m); err != nil {
			return m, err
		}
	}
	check, err := CompareWeights(m.HF, m.GGUF)
	if err != nil {
		return m, fmt.Errorf("prepare: the two checkpoints differ: %w", err)
	}
	m.Check = check
	return m, nil
}

// makeModels runs make_smollm_random.py into a temporary folder (bf16 GGUF
// only), drops the f32 checkpoint the script always writes, records the
// checksums and renames the folder into place.
func makeModels(ctx context.Context, c PrepareConfig, dir string, m *Models) error {
	ggufPy, err := ensureGGUFPy(ctx, c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.CacheDir, 0o755); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	tmp, err := os.MkdirTemp(c.CacheDir, ".models-")
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer os.RemoveAll(tmp)
	if c.Log != nil {
		c.Log.Info("writing the peer models (make_smollm_random.py, bf16 only)", "dir", dir)
	}
	out, err := runOutput(ctx, nil, "", c.Python, c.Script, "--tokenizer-json", c.TokenizerJSON,
		"--out-dir", tmp, "--gguf-py", ggufPy, "--seed", fmt.Sprint(c.Seed), "--gguf-types", "bf16", "--checksums")
	if err != nil {
		if strings.Contains(err.Error(), "No module named 'numpy'") {
			err = fmt.Errorf("%w (install numpy: apt-get install python3-numpy)", err)
		}
		return fmt.Errorf("prepare: %w", err)
	}
	if m.Checksums, err = parseChecksums(out); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	delete(m.Checksums, "hf-f32/model.safetensors")
	if err := os.RemoveAll(filepath.Join(tmp, "hf-f32")); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	for _, p := range modelFiles {
		if m.Checksums[p] == "" {
			return fmt.Errorf("prepare: the script printed no checksum for %s", p)
		}
	}
	b, _ := json.MarshalIndent(marker{Script: c.Script, Seed: m.Seed, Checksums: m.Checksums}, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, markerFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp makes it private
		return fmt.Errorf("prepare: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil { // a half-written earlier attempt
		return fmt.Errorf("prepare: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	return nil
}

// parseChecksums reads the "sha256 HEX  PATH" lines make_smollm_random.py
// prints with --checksums.
func parseChecksums(out []byte) (map[string]string, error) {
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "sha256" && len(f[1]) == 64 {
			sums[f[2]] = f[1]
		}
	}
	if len(sums) == 0 {
		return nil, errors.New("no sha256 lines in the script's output")
	}
	return sums, nil
}

// ensureGGUFPy returns a folder holding the gguf package, exporting gguf-py
// from c.LlamaGit at LlamaCommit when it is missing.
func ensureGGUFPy(ctx context.Context, c PrepareConfig) (string, error) {
	dest := filepath.Join(c.CacheDir, "gguf-py-"+LlamaCommit)
	dir := c.GGUFPy
	if dir == "" {
		dir = filepath.Join(dest, "gguf-py")
	}
	if _, err := os.Stat(filepath.Join(dir, "gguf", "__init__.py")); err == nil {
		return dir, nil
	}
	if c.GGUFPy != "" || c.LlamaGit == "" {
		return "", fmt.Errorf("prepare: no gguf package in %s: give a llama.cpp git directory holding commit %s "+
			"(--llama-git; github:ngxson/llama.cpp carries it) to export gguf-py from, or run "+
			"`git archive %s gguf-py | tar -x -C %s` in one", dir, LlamaCommit, LlamaCommit, dest)
	}
	cmd := exec.CommandContext(ctx, "git", "--git-dir", c.LlamaGit, "archive", "--format=tar", LlamaCommit, "gguf-py")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	tarball, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("prepare: git archive %s gguf-py in %s: %w: %s", LlamaCommit, c.LlamaGit, err, tail(stderr.Bytes(), 400))
	}
	if err := os.MkdirAll(c.CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	tmp, err := os.MkdirTemp(c.CacheDir, ".gguf-py-")
	if err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := untar(bytes.NewReader(tarball), tmp); err != nil {
		return "", fmt.Errorf("prepare: gguf-py: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	if err := os.RemoveAll(dest); err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	return filepath.Join(dest, "gguf-py"), nil
}

// untar extracts regular files and folders of a tar stream under dir,
// refusing paths that would leave it.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("tar entry %q leaves the folder", h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
