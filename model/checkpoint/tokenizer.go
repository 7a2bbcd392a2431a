package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/troupe-ai/troupe/tokenizer"
)

// AdoptTokenizer copies tokenizer.json, tokenizer_config.json (and with it
// the chat template) and chat_template.jinja from tokDir into outDir, and sets
// c's vocab_size, bos_token_id and eos_token_id from them, so the checkpoint
// written next is a complete model folder.
func AdoptTokenizer(c Config, tokDir, outDir string) error {
	tj, err := os.ReadFile(filepath.Join(tokDir, "tokenizer.json"))
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	var tok struct {
		Model struct {
			Vocab json.RawMessage `json:"vocab"`
		} `json:"model"`
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(tj, &tok); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(tokDir, "tokenizer.json"), err)
	}
	ids := map[string]int{}
	// BPE and WordPiece vocabularies are objects token -> id; Unigram's are
	// lists of [token, score] pairs whose index is the id.
	var obj map[string]int
	var list [][2]any
	if json.Unmarshal(tok.Model.Vocab, &obj) == nil {
		ids = obj
	} else if json.Unmarshal(tok.Model.Vocab, &list) == nil {
		for i, e := range list {
			if s, ok := e[0].(string); ok {
				ids[s] = i
			}
		}
	} else {
		return fmt.Errorf("%s: model.vocab is neither a token->id object nor a list", filepath.Join(tokDir, "tokenizer.json"))
	}
	for _, a := range tok.Added {
		ids[a.Content] = a.ID
	}
	vocab := 0
	for _, id := range ids {
		vocab = max(vocab, id+1)
	}
	if vocab == 0 {
		return fmt.Errorf("%s: empty vocabulary", filepath.Join(tokDir, "tokenizer.json"))
	}
	c["vocab_size"] = vocab
	if cfg, err := os.ReadFile(filepath.Join(tokDir, "tokenizer_config.json")); err == nil {
		var tc map[string]any
		if err := json.Unmarshal(cfg, &tc); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(tokDir, "tokenizer_config.json"), err)
		}
		for key, field := range map[string]string{"bos_token": "bos_token_id", "eos_token": "eos_token_id"} {
			if name := tokenizer.TokenName(tc[key]); name != "" {
				if id, ok := ids[name]; ok {
					c[field] = id
				}
			} else if tc[key] == nil {
				delete(c, field)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"} {
		data, err := os.ReadFile(filepath.Join(tokDir, name))
		if errors.Is(err, fs.ErrNotExist) && name != "tokenizer.json" {
			continue
		}
		if err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
		if err := os.WriteFile(filepath.Join(outDir, name), data, 0o644); err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
	}
	return nil
}
