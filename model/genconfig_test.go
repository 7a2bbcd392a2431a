package model_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/model"
)

// TestReadGenerationConfig: the sampling parameters vLLM takes are read
// with the file's values; null is absent; do_sample and other keys are not
// read; a value troupe cannot use is left out with a reason rather than
// failing the load; eos_token_id keeps its old strictness.
func TestReadGenerationConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string // "" = no file
		want    string // the sampling defaults as JSON
		eos     []int
		ignored []string // substrings, one per ignored parameter
		err     string   // substring of the load error
	}{
		{name: "no file", want: `{}`},
		{name: "typical", file: `{"bos_token_id": 1, "eos_token_id": [2, 7], "do_sample": true, "temperature": 0.6,
			"top_p": 0.9, "top_k": 20, "repetition_penalty": 1.1, "transformers_version": "4.45.0"}`,
			want: `{"temperature":0.6,"top_p":0.9,"top_k":20,"repetition_penalty":1.1}`, eos: []int{2, 7}},
		{name: "every parameter", file: `{"temperature": 1.0, "top_p": 1.0, "top_k": 50, "min_p": 0.05, "repetition_penalty": 1.0}`,
			want: `{"temperature":1,"top_p":1,"top_k":50,"min_p":0.05,"repetition_penalty":1}`},
		{name: "do_sample false does not switch sampling off", file: `{"do_sample": false, "temperature": 0.7}`,
			want: `{"temperature":0.7}`},
		{name: "greedy recommended", file: `{"temperature": 0}`, want: `{"temperature":0}`},
		{name: "null is absent", file: `{"eos_token_id": 5, "temperature": null, "top_k": null}`, want: `{}`, eos: []int{5}},
		{name: "no sampling keys", file: `{"max_new_tokens": 256, "num_beams": 4}`, want: `{}`},
		{name: "top_k -1 and integral floats", file: `{"top_k": -1.0}`, want: `{"top_k":-1}`},
		{name: "wrong types are left out", file: `{"temperature": "0.6", "top_p": true, "top_k": [20], "min_p": {}, "repetition_penalty": 1.05}`,
			want:    `{"repetition_penalty":1.05}`,
			ignored: []string{`temperature must be a number >= 0, got the string "0.6"`, "top_p must be", "top_k must be", "min_p must be"}},
		{name: "out of range is left out", file: `{"temperature": -0.5, "top_p": 0, "top_k": 2.5, "min_p": 1.5, "repetition_penalty": 0}`,
			want:    `{}`,
			ignored: []string{"temperature must be a number >= 0, got -0.5", "top_p must be a number in (0, 1], got 0", "top_k must be an integer", "min_p", "repetition_penalty must be a number > 0"}},
		{name: "Python's Infinity is left out", file: `{"temperature": Infinity, "top_p": NaN, "top_k": 40}`,
			want: `{"top_k":40}`, ignored: []string{"temperature", "top_p"}},
		{name: "not JSON", file: `{"temperature": 0.6,`, err: "generation_config.json"},
		{name: "not an object", file: `[]`, err: "generation_config.json"},
		{name: "bad eos_token_id", file: `{"eos_token_id": "</s>", "temperature": 0.6}`, err: "eos_token_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			g, err := model.ReadGenerationConfig(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(g.Sampling)
			if string(got) != tc.want {
				t.Errorf("sampling %s, want %s", got, tc.want)
			}
			if !reflect.DeepEqual(g.EOS, tc.eos) {
				t.Errorf("eos %v, want %v", g.EOS, tc.eos)
			}
			if len(g.Ignored) != len(tc.ignored) {
				t.Fatalf("ignored %q, want %d entries like %q", g.Ignored, len(tc.ignored), tc.ignored)
			}
			for i, want := range tc.ignored {
				if !strings.Contains(g.Ignored[i], want) {
					t.Errorf("ignored[%d] = %q, want it to mention %q", i, g.Ignored[i], want)
				}
			}
			if (g.Path != "") != (tc.file != "") {
				t.Errorf("path %q", g.Path)
			}
		})
	}
}
