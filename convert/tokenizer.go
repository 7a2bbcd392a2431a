package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/tokenizer"
)

// GGUF's token types (llama_token_type).
const (
	tokenNormal      = 1
	tokenControl     = 3
	tokenUserDefined = 4
	tokenUnused      = 5
)

// hfTokenizer is the part of tokenizer.json written to GGUF.
type hfTokenizer struct {
	Model struct {
		Type   string          `json:"type"`
		Vocab  map[string]int  `json:"vocab"`
		Merges json.RawMessage `json:"merges"`
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
}

// tokenizerKVs are the tokenizer.ggml.* keys and the chat template for the
// byte-level BPE tokenizer of dir, with vocab tokens (the embedding's rows:
// ids past the tokenizer's are unused padding, as convert_hf_to_gguf.py
// writes them).
func tokenizerKVs(dir string, cfg *model.Config, vocab int) ([]gguf.KV, error) {
	var tj hfTokenizer
	ok, err := readJSON(dir, "tokenizer.json", &tj)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("no tokenizer.json (troupe writes byte-level BPE tokenizers to GGUF)")
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model type %q (troupe writes byte-level BPE to GGUF)", tj.Model.Type)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		return nil, err
	}
	pre, err := tok.GGUFPre()
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	size := vocab
	for _, id := range tj.Model.Vocab {
		size = max(size, id+1)
	}
	for _, a := range tj.AddedTokens {
		size = max(size, a.ID+1)
	}
	tokens := make([]string, size)
	types := make([]int32, size)
	for tok, id := range tj.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer.json: token %q has id %d", tok, id)
		}
		tokens[id], types[id] = tok, tokenNormal
	}
	special := map[string]int{}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("tokenizer.json: added token %q has id %d", a.Content, a.ID)
		}
		tokens[a.ID] = a.Content
		types[a.ID] = tokenUserDefined
		if a.Special {
			types[a.ID] = tokenControl
		}
		special[a.Content] = a.ID
	}
	for id := range tokens {
		if types[id] == 0 {
			tokens[id], types[id] = fmt.Sprintf("[PAD%d]", id), tokenUnused
		}
	}
	merges, err := readMerges(tj.Model.Merges)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	kvs := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("gpt2")},
		{Key: "tokenizer.ggml.pre", Value: gguf.StringValue(pre)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.StringsValue(tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Int32sValue(types)},
		{Key: "tokenizer.ggml.merges", Value: gguf.StringsValue(merges)},
	}
	// Special ids and flags: tokenizer_config.json's tokens, else config.json's ids.
	var tc map[string]any
	if _, err := readJSON(dir, "tokenizer_config.json", &tc); err != nil {
		return nil, err
	}
	idOf := func(key, cfgKey string) (int, bool) {
		if s := tokenizer.TokenName(tc[key]); s != "" {
			if id, ok := special[s]; ok {
				return id, true
			}
			if id, ok := tj.Model.Vocab[s]; ok {
				return id, true
			}
		}
		if cfgKey != "" && cfg.Has(cfgKey) {
			if id, err := cfg.Int(cfgKey, -1); err == nil && id >= 0 {
				return id, true
			}
		}
		return 0, false
	}
	for _, s := range []struct{ key, cfgKey, gguf string }{
		{"bos_token", "bos_token_id", "tokenizer.ggml.bos_token_id"},
		{"eos_token", "eos_token_id", "tokenizer.ggml.eos_token_id"},
		{"unk_token", "", "tokenizer.ggml.unknown_token_id"},
		{"pad_token", "pad_token_id", "tokenizer.ggml.padding_token_id"},
	} {
		if id, ok := idOf(s.key, s.cfgKey); ok {
			kvs = append(kvs, gguf.KV{Key: s.gguf, Value: gguf.Uint32Value(uint32(id))})
		}
	}
	for _, k := range []string{"add_bos_token", "add_eos_token"} {
		if b, ok := tc[k].(bool); ok {
			kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml." + k, Value: gguf.BoolValue(b)})
		}
	}
	tmpl, err := chatTemplate(dir, tc)
	if err != nil {
		return nil, err
	}
	if tmpl != "" {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template", Value: gguf.StringValue(tmpl)})
	}
	return kvs, nil
}

// chatTemplate is chat_template.jinja, else tokenizer_config.json's
// chat_template (a string, or the "default" of a list of named ones).
func chatTemplate(dir string, tc map[string]any) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if err == nil {
		return string(data), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	switch t := tc["chat_template"].(type) {
	case string:
		return t, nil
	case []any:
		for _, e := range t {
			if m, ok := e.(map[string]any); ok && m["name"] == "default" {
				s, _ := m["template"].(string)
				return s, nil
			}
		}
	}
	return "", nil
}

// readMerges reads BPE merges in either of tokenizer.json's forms ("a b",
// or ["a", "b"]) as GGUF writes them ("a b").
func readMerges(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []string{}, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		return strs, nil
	}
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("merges: %w", err)
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
			return nil, fmt.Errorf("merge %d %q holds a space, which GGUF's \"a b\" form cannot write", i, p)
		}
		out[i] = p[0] + " " + p[1]
	}
	return out, nil
}
