package model

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/troupe-ai/troupe/sample"
)

// GenerationConfig is what troupe takes from a checkpoint's
// generation_config.json: the ids that end generation and the model's
// recommended sampling parameters.
type GenerationConfig struct {
	// Path is the file read; "" when the checkpoint has none.
	Path string
	// EOS are the file's eos_token_id (one id or a list); nil when it gives
	// none.
	EOS []int
	// Sampling are the file's sampling parameters.
	Sampling sample.Defaults
	// Ignored says, for each sampling parameter the file holds but troupe
	// cannot use (a wrong type, a value out of range), why it was left out;
	// the loader logs them as warnings.
	Ignored []string
}

// ReadGenerationConfig reads dir/generation_config.json; a checkpoint
// without one gives an empty GenerationConfig.
//
// The sampling parameters taken are vLLM's (get_diff_sampling_param):
// temperature, top_p, top_k, min_p and repetition_penalty, each when
// present and not null. As in vLLM, do_sample is not read: a file with
// "do_sample": false and a temperature still recommends that temperature,
// and greedy decoding is what a request asks for with temperature 0.
// max_new_tokens and the beam-search and other transformers-only keys are
// not taken. Like transformers, which loads any value and only warns when
// it validates, a parameter of the wrong type or out of range is left out
// (and named in Ignored) rather than failing the load. A file that is not
// a JSON object, or whose eos_token_id is not ids, fails the load: it is
// the source of the ids that end generation.
func ReadGenerationConfig(dir string) (*GenerationConfig, error) {
	path := filepath.Join(dir, "generation_config.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &GenerationConfig{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read generation config: %w", err)
	}
	c, err := ParseConfig(path, data)
	if err != nil {
		return nil, err
	}
	g := &GenerationConfig{Path: path}
	if g.EOS, err = c.Ints("eos_token_id"); err != nil {
		return nil, err
	}
	d := &g.Sampling
	d.Temperature = g.number(c, "temperature", "a number >= 0", func(v float64) bool { return v >= 0 })
	d.TopP = g.number(c, "top_p", "a number in (0, 1]", func(v float64) bool { return v > 0 && v <= 1 })
	if k := g.number(c, "top_k", fmt.Sprintf("an integer in [-1, %d]", sample.MaxTopK), func(v float64) bool {
		return v == math.Trunc(v) && v >= -1 && v <= sample.MaxTopK
	}); k != nil {
		n := int(*k)
		d.TopK = &n
	}
	d.MinP = g.number(c, "min_p", "a number in [0, 1]", func(v float64) bool { return v >= 0 && v <= 1 })
	d.RepetitionPenalty = g.number(c, "repetition_penalty", "a number > 0", func(v float64) bool { return v > 0 })
	return g, nil
}

// number returns key's value when it is a finite number that ok accepts,
// nil when the key is absent or null, and otherwise records in Ignored why
// it is left out.
func (g *GenerationConfig) number(c *Config, key, want string, ok func(float64) bool) *float64 {
	v := c.Raw(key)
	if v == nil {
		return nil
	}
	f, isNum := v.(float64)
	if !isNum || math.IsNaN(f) || math.IsInf(f, 0) || !ok(f) {
		shown := fmt.Sprint(v)
		if s, isStr := v.(string); isStr {
			shown = fmt.Sprintf("the string %q", s)
		}
		g.Ignored = append(g.Ignored, fmt.Sprintf("%s must be %s, got %s", key, want, shown))
		return nil
	}
	return &f
}
