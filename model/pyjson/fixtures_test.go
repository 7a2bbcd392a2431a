package pyjson

import (
	"encoding/json"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// fixturesDir is the shared fixtures directory (see internal/fixtures).
func fixturesDir(t *testing.T) string {
	t.Helper()
	fixtures.Path(t, "models") // ends the test when the models are missing
	return fixtures.Dir(t)
}

func TestFixtureConfigs(t *testing.T) {
	dir := fixturesDir(t)
	configs, err := filepath.Glob(filepath.Join(dir, "models", "*", "config.json"))
	if err != nil || len(configs) == 0 {
		t.Fatalf("no config.json under %s/models (%v)", dir, err)
	}
	for _, p := range configs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := Unmarshal(data, &cfg); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if _, ok := cfg["model_type"].(string); !ok {
			t.Errorf("%s: no model_type", p)
		}
		// Whatever encoding/json can read must decode identically.
		var plain map[string]any
		if json.Unmarshal(data, &plain) == nil && len(plain) != len(cfg) {
			t.Errorf("%s: %d keys, encoding/json finds %d", p, len(cfg), len(plain))
		}
	}
	p := filepath.Join(dir, "models", "mamba2", "config.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("no mamba2 fixture: %v", err)
	}
	var cfg struct {
		TimeStepLimit []float64 `json:"time_step_limit"`
		ModelType     string    `json:"model_type"`
	}
	if err := Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.TimeStepLimit) != 2 || cfg.TimeStepLimit[0] != 0 || !math.IsInf(cfg.TimeStepLimit[1], 1) || cfg.ModelType != "mamba2" {
		t.Errorf("mamba2 config: %+v", cfg)
	}
}
