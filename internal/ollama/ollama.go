// Package ollama finds the models of a local Ollama store, so that troupe
// serves the GGUF files Ollama has pulled where they lie, without copying
// or converting them.
//
// The store is Ollama's content-addressed layout (OLLAMA_MODELS, by default
// ~/.ollama/models): manifests/HOST/NAMESPACE/MODEL/TAG is a JSON manifest
// (the OCI image manifest shape) whose layers name blobs by digest, and
// blobs/sha256-HEX holds each. The layer of media type
// application/vnd.ollama.image.model is the GGUF file; the template,
// system prompt, parameters and licence are other layers (troupe renders
// the GGUF's own chat template, so it only reports them). A model name is
// Ollama's: "llama3.2:3b" is registry.ollama.ai/library/llama3.2:3b, a
// missing tag is "latest", "user/model" is another namespace and
// "host/namespace/model:tag" names everything.
package ollama

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Defaults of a model name's parts.
const (
	DefaultHost      = "registry.ollama.ai"
	DefaultNamespace = "library"
	DefaultTag       = "latest"
)

// Media types of the layers troupe reads.
const (
	MediaModel     = "application/vnd.ollama.image.model"
	MediaTemplate  = "application/vnd.ollama.image.template"
	MediaSystem    = "application/vnd.ollama.image.system"
	MediaParams    = "application/vnd.ollama.image.params"
	MediaProjector = "application/vnd.ollama.image.projector"
)

// maxManifest bounds the manifest file read (they are a few hundred bytes).
const maxManifest = 1 << 20

// ErrNotFound is the error of a name the store does not hold.
var ErrNotFound = errors.New("not in the Ollama store")

// Name is a parsed model name.
type Name struct {
	Host, Namespace, Model, Tag string
}

// String is the name in full, host/namespace/model:tag.
func (n Name) String() string {
	return n.Host + "/" + n.Namespace + "/" + n.Model + ":" + n.Tag
}

// ParseName reads an Ollama model name: [[host/]namespace/]model[:tag].
func ParseName(s string) (Name, error) {
	n := Name{Host: DefaultHost, Namespace: DefaultNamespace, Tag: DefaultTag}
	rest := s
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.Contains(rest[i:], "/") {
		n.Tag, rest = rest[i+1:], rest[:i]
	}
	parts := strings.Split(rest, "/")
	switch len(parts) {
	case 1:
		n.Model = parts[0]
	case 2:
		n.Namespace, n.Model = parts[0], parts[1]
	case 3:
		n.Host, n.Namespace, n.Model = parts[0], parts[1], parts[2]
	default:
		return Name{}, fmt.Errorf("ollama: model name %q: more than host/namespace/model", s)
	}
	for _, p := range []struct{ what, v string }{{"host", n.Host}, {"namespace", n.Namespace}, {"model", n.Model}, {"tag", n.Tag}} {
		if p.v == "" || p.v == "." || p.v == ".." || strings.ContainsAny(p.v, `\`+"\x00") {
			return Name{}, fmt.Errorf("ollama: model name %q: bad %s %q", s, p.what, p.v)
		}
	}
	return n, nil
}

// Dir is the store: OLLAMA_MODELS, or ~/.ollama/models.
func Dir() (string, error) {
	if d := os.Getenv("OLLAMA_MODELS"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("ollama: finding the store: %w", err)
	}
	return filepath.Join(home, ".ollama", "models"), nil
}

// Model is a model of the store: where its GGUF file is, and what Ollama
// keeps beside it.
type Model struct {
	Name Name
	// GGUF is the path of the model's GGUF blob, read in place.
	GGUF string
	// Size is the GGUF blob's size in bytes, as the manifest says and the
	// file has.
	Size int64
	// Template, System and Params are Ollama's template (Go text/template
	// syntax, not the GGUF's Jinja chat template), system prompt and
	// parameters (JSON), when the manifest has them.
	Template, System, Params string
	// Projector is the path of a vision projector blob, if any.
	Projector string
}

type manifest struct {
	Layers []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	} `json:"layers"`
}

// Resolve finds the model called name in the store at dir.
func Resolve(dir, name string) (Model, error) {
	n, err := ParseName(name)
	if err != nil {
		return Model{}, err
	}
	path := filepath.Join(dir, "manifests", n.Host, n.Namespace, n.Model, n.Tag)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Model{}, notFound(dir, n)
	}
	if err != nil {
		return Model{}, fmt.Errorf("ollama: %s: %w", n, err)
	}
	defer f.Close()
	var m manifest
	dec := json.NewDecoder(&limitedReader{f, maxManifest})
	if err := dec.Decode(&m); err != nil {
		return Model{}, fmt.Errorf("ollama: %s: manifest %s: %w", n, path, err)
	}
	out := Model{Name: n}
	for _, l := range m.Layers {
		mt, _, _ := strings.Cut(l.MediaType, ";")
		switch strings.TrimSpace(mt) {
		case MediaModel:
			blob, err := blobPath(dir, l.Digest)
			if err != nil {
				return Model{}, fmt.Errorf("ollama: %s: %w", n, err)
			}
			st, err := os.Stat(blob)
			if err != nil {
				return Model{}, fmt.Errorf("ollama: %s: the model's blob: %w", n, err)
			}
			if l.Size > 0 && st.Size() != l.Size {
				return Model{}, fmt.Errorf("ollama: %s: blob %s has %d bytes, the manifest says %d (an interrupted pull? run ollama pull %s)", n, blob, st.Size(), l.Size, name)
			}
			out.GGUF, out.Size = blob, st.Size()
		case MediaTemplate, MediaSystem, MediaParams:
			text, err := readBlob(dir, l.Digest)
			if err != nil {
				return Model{}, fmt.Errorf("ollama: %s: %w", n, err)
			}
			switch mt {
			case MediaTemplate:
				out.Template = text
			case MediaSystem:
				out.System = text
			default:
				out.Params = text
			}
		case MediaProjector:
			if out.Projector, err = blobPath(dir, l.Digest); err != nil {
				return Model{}, fmt.Errorf("ollama: %s: %w", n, err)
			}
		}
	}
	if out.GGUF == "" {
		return Model{}, fmt.Errorf("ollama: %s: the manifest has no %s layer (a model stored as safetensors tensors, which troupe reads only from a Hugging Face folder)", n, MediaModel)
	}
	return out, nil
}

// blobPath is the file of a digest "sha256:HEX".
func blobPath(dir, digest string) (string, error) {
	algo, hex, ok := strings.Cut(digest, ":")
	if !ok || algo != "sha256" || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", fmt.Errorf("bad layer digest %q", digest)
	}
	return filepath.Join(dir, "blobs", "sha256-"+hex), nil
}

// readBlob reads a small text layer.
func readBlob(dir, digest string) (string, error) {
	path, err := blobPath(dir, digest)
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(&limitedReader{f, maxManifest})
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return string(b), nil
}

// notFound says what the store has of the model, or that it has none.
func notFound(dir string, n Name) error {
	tags, _ := os.ReadDir(filepath.Join(dir, "manifests", n.Host, n.Namespace, n.Model))
	var have []string
	for _, t := range tags {
		if !t.IsDir() {
			have = append(have, t.Name())
		}
	}
	slices.Sort(have)
	if len(have) > 0 {
		return fmt.Errorf("ollama: %s: %w (the store at %s has tags %s)", n, ErrNotFound, dir, strings.Join(have, ", "))
	}
	return fmt.Errorf("ollama: %s: %w at %s (run ollama pull, or set OLLAMA_MODELS)", n, ErrNotFound, dir)
}

// limitedReader reads at most n bytes, then fails (io.LimitReader would
// end silently and hand a cut manifest to the decoder).
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("larger than 1 MiB")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
