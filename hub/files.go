package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

const (
	singleWeights = "model.safetensors"
	shardIndex    = "model.safetensors.index.json"
	// maxIndexBytes bounds the shard index read into memory; the largest
	// real ones are a few MiB.
	maxIndexBytes = 64 << 20
)

// required are the files without which troupe cannot serve a model; the
// weights are chosen separately (selectWeights).
var required = []string{"config.json", "tokenizer.json"}

// optional are read when the repository has them.
var optional = []string{
	"generation_config.json", "tokenizer_config.json", "special_tokens_map.json",
	"chat_template.jinja", "chat_template.json",
}

// plan is what one revision of a repository needs fetched: files first (in
// order), then, when index is set, the shards that index names. model is
// the file to serve when it is not the snapshot folder (a GGUF model).
type plan struct {
	files []string
	index string
	model string
}

// selectFiles chooses, from a revision's file list, the files troupe reads:
// config, tokenizer and chat-template files and the safetensors weights,
// or, for quant or a repository of GGUF files only, one GGUF model
// (selectGGUF). It fails, naming what is missing, when the repository
// cannot be served.
func selectFiles(repo string, names []string, quant string) (plan, error) {
	if quant != "" {
		return ggufPlan(repo, names, quant)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	weights, index, err := selectWeights(repo, names, have)
	if errors.Is(err, errGGUFOnly) {
		return ggufPlan(repo, names, "")
	}
	if err != nil {
		return plan{}, err
	}
	var p plan
	for _, f := range required {
		if !have[f] {
			why := "not a Transformers model repository"
			if f == "tokenizer.json" {
				why = "troupe reads the fast tokenizer file; tokenizer.model or vocab files alone are not supported"
			}
			return plan{}, fmt.Errorf("hub: %s has no %s (%s): %w", repo, f, why, ErrUnsupported)
		}
		p.files = append(p.files, f)
	}
	for _, f := range optional {
		if have[f] {
			p.files = append(p.files, f)
		}
	}
	// Named chat templates (tool_use, rag, ...) beside the default one.
	for _, n := range slices.Sorted(slices.Values(names)) {
		if dir, file := path.Split(n); dir == "additional_chat_templates/" && strings.HasSuffix(file, ".jinja") {
			p.files = append(p.files, n)
		}
	}
	p.files = append(p.files, weights...)
	p.index = index
	return p, nil
}

// ggufPlan fetches one GGUF model, every part of a split set.
func ggufPlan(repo string, names []string, quant string) (plan, error) {
	set, err := selectGGUF(repo, names, quant)
	if err != nil {
		return plan{}, err
	}
	return plan{files: set.files, model: set.files[0]}, nil
}

// errGGUFOnly is selectWeights' answer for a repository of GGUF files.
var errGGUFOnly = errors.New("GGUF files only")

// selectWeights picks the weights: the shard index (whose shards are known
// only once it is read), else the single safetensors file. For a
// repository with GGUF files only it returns errGGUFOnly (selectFiles then
// takes one GGUF model).
func selectWeights(repo string, names []string, have map[string]bool) (files []string, index string, err error) {
	switch {
	case have[shardIndex]:
		return []string{shardIndex}, shardIndex, nil
	case have[singleWeights]:
		return []string{singleWeights}, "", nil
	}
	var torch []string
	gguf := false
	for _, n := range names {
		switch strings.ToLower(path.Ext(n)) {
		case ".gguf":
			gguf = true
		case ".bin", ".pt", ".pth":
			torch = append(torch, n)
		}
	}
	switch {
	case gguf:
		return nil, "", errGGUFOnly
	case len(torch) > 0:
		return nil, "", fmt.Errorf("hub: %s has PyTorch weights (%s) but no model.safetensors: troupe reads safetensors only: %w", repo, listSome(torch), ErrUnsupported)
	}
	return nil, "", fmt.Errorf("hub: %s has no %s or %s: %w", repo, singleWeights, shardIndex, ErrUnsupported)
}

// listSome names up to three items, then how many more.
func listSome(items []string) string {
	slices.Sort(items)
	if len(items) <= 3 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:3], ", "), len(items)-3)
}

// readShards reads a model.safetensors.index.json and returns the shard
// files its weight_map names, sorted and without repeats, each checked to be
// a safe relative path.
func readShards(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxIndexBytes+1))
	if err != nil {
		return nil, fmt.Errorf("hub: reading %s: %w", file, err)
	}
	if len(raw) > maxIndexBytes {
		return nil, fmt.Errorf("hub: %s is larger than %d bytes", file, maxIndexBytes)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("hub: %s: invalid shard index: %w", file, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("hub: %s: the shard index names no weights", file)
	}
	var shards []string
	for _, s := range idx.WeightMap {
		if err := checkRepoPath(s); err != nil {
			return nil, fmt.Errorf("hub: %s: %w", file, err)
		}
		shards = append(shards, s)
	}
	slices.Sort(shards)
	return slices.Compact(shards), nil
}

// missingFromSnapshot lists what a cached snapshot folder lacks for troupe
// to serve it: the required files and the weights (every shard of the
// index, or model.safetensors). A pointer whose blob is gone counts as
// missing.
func missingFromSnapshot(dir string) ([]string, error) {
	var missing []string
	for _, f := range required {
		if !isFile(filepath.Join(dir, f)) {
			missing = append(missing, f)
		}
	}
	switch {
	case isFile(filepath.Join(dir, shardIndex)):
		shards, err := readShards(filepath.Join(dir, shardIndex))
		if err != nil {
			return nil, err
		}
		for _, s := range shards {
			if !isFile(filepath.Join(dir, filepath.FromSlash(s))) {
				missing = append(missing, s)
			}
		}
	case !isFile(filepath.Join(dir, singleWeights)):
		missing = append(missing, singleWeights)
	}
	return missing, nil
}
