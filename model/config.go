package model

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/troupe-ai/troupe/model/pyjson"
)

// Config is a parsed config.json: the raw key/value pairs with typed getters
// that fall back to the family's defaults (the values of the transformers
// config class), because save_pretrained leaves out fields that equal them.
type Config struct {
	Path string
	raw  map[string]any
	// ropeFactors divide the rotary inverse frequencies: how a GGUF file
	// stores llama3 rope scaling (its rope_freqs tensor). nil for
	// config.json.
	ropeFactors []float32
}

// ReadConfig reads dir/config.json, accepting the bare Infinity and NaN that
// Python's json module writes.
func ReadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig parses config.json bytes; path is used in error messages.
func ParseConfig(path string, data []byte) (*Config, error) {
	var raw map[string]any
	if err := pyjson.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%s: not a JSON object", path)
	}
	return &Config{Path: path, raw: raw}, nil
}

// Has reports whether key is present and not null.
func (c *Config) Has(key string) bool { return c.raw[key] != nil }

// Null reports whether key is present with the value null (which some
// keys, such as Gemma's soft-capping values, tell apart from absent).
func (c *Config) Null(key string) bool { v, ok := c.raw[key]; return ok && v == nil }

// Raw returns the raw value of key (nil when absent or null).
func (c *Config) Raw(key string) any { return c.raw[key] }

// Int returns key as an int, def when absent or null.
func (c *Config) Int(key string, def int) (int, error) {
	v, ok := c.raw[key]
	if !ok || v == nil {
		return def, nil
	}
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s: %q must be an integer, got %v", c.Path, key, v)
	}
	return int(f), nil
}

// Float returns key as a float64, def when absent or null.
func (c *Config) Float(key string, def float64) (float64, error) {
	v, ok := c.raw[key]
	if !ok || v == nil {
		return def, nil
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("%s: %q must be a number, got %v", c.Path, key, v)
	}
	return f, nil
}

// Bool returns key as a bool, def when absent or null.
func (c *Config) Bool(key string, def bool) (bool, error) {
	v, ok := c.raw[key]
	if !ok || v == nil {
		return def, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%s: %q must be a boolean, got %v", c.Path, key, v)
	}
	return b, nil
}

// String returns key as a string, def when absent or null.
func (c *Config) String(key, def string) (string, error) {
	v, ok := c.raw[key]
	if !ok || v == nil {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: %q must be a string, got %v", c.Path, key, v)
	}
	return s, nil
}

// Ints returns key as a list of ints; a single number becomes a one-element
// list (eos_token_id may be either). nil when absent or null.
func (c *Config) Ints(key string) ([]int, error) {
	v, ok := c.raw[key]
	if !ok || v == nil {
		return nil, nil
	}
	switch t := v.(type) {
	case float64:
		return []int{int(t)}, nil
	case []any:
		out := make([]int, 0, len(t))
		for _, e := range t {
			f, ok := e.(float64)
			if !ok {
				return nil, fmt.Errorf("%s: %q must hold integers, got %v", c.Path, key, e)
			}
			out = append(out, int(f))
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: %q must be an integer or a list of integers, got %v", c.Path, key, v)
}

// Floats reads key as a list of numbers.
func (c *Config) Floats(key string) ([]float64, error) {
	list, ok := c.raw[key].([]any)
	if !ok {
		return nil, fmt.Errorf("%s: %q must be a list of numbers", c.Path, key)
	}
	out := make([]float64, len(list))
	for i, v := range list {
		f, ok := v.(float64)
		if !ok {
			return nil, fmt.Errorf("%s: %q[%d] is not a number", c.Path, key, i)
		}
		out[i] = f
	}
	return out, nil
}

// Sub returns the object under key as a Config (nil when absent or null).
func (c *Config) Sub(key string) (*Config, error) {
	v, ok := c.raw[key]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: %q must be an object, got %v", c.Path, key, v)
	}
	return &Config{Path: c.Path + ":" + key, raw: m}, nil
}

// Keys lists the keys present, sorted.
func (c *Config) Keys() []string {
	keys := make([]string, 0, len(c.raw))
	for k := range c.raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// getter collects the first error of a run of typed reads so that family
// loaders read a dozen fields without a dozen if-statements.
type getter struct {
	c   *Config
	err error
}

func (g *getter) int(key string, def int) int {
	v, err := g.c.Int(key, def)
	g.keep(err)
	return v
}

func (g *getter) float(key string, def float64) float64 {
	v, err := g.c.Float(key, def)
	g.keep(err)
	return v
}

func (g *getter) bool(key string, def bool) bool {
	v, err := g.c.Bool(key, def)
	g.keep(err)
	return v
}

func (g *getter) string(key, def string) string {
	v, err := g.c.String(key, def)
	g.keep(err)
	return v
}

func (g *getter) keep(err error) {
	if g.err == nil {
		g.err = err
	}
}
