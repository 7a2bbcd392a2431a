package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// chatML is the ChatML chat template (as used by Qwen and SmolLM2).
const chatML = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// byteSpecials are the special tokens after the 256 byte tokens.
var byteSpecials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// ByteVocab is the vocabulary size of WriteByteTokenizer's tokenizer.
const ByteVocab = 256 + 3

// WriteByteTokenizer writes a byte-level BPE tokenizer.json with no merges
// (one token per byte, ids 0-255 in byte order, GPT-2's byte-to-character
// mapping) plus ChatML's special tokens, and a tokenizer_config.json with a
// ChatML chat template and <|im_end|> as EOS. Every text round-trips, so
// it is enough to serve chat with a random-weight model.
func WriteByteTokenizer(dir string) error { return WriteByteTokenizerSized(dir, ByteVocab) }

// WriteByteTokenizerSized is WriteByteTokenizer padded to vocab ids with
// plain added tokens "<tN>", so a random-weight checkpoint with a real
// model's vocabulary size (and its lm_head cost) can serve chat and every
// id it samples decodes to text.
func WriteByteTokenizerSized(dir string, size int) error {
	return writeByteTokenizer(dir, size, nil)
}

// WriteByteTokenizerSpecials is WriteByteTokenizer with more special tokens
// after ChatML's (ids from ByteVocab on, in order): the markers of another
// model's template ("[TOOL_CALLS]", "</s>", ...) for tests that render it
// over bytes.
func WriteByteTokenizerSpecials(dir string, extra ...string) error {
	return writeByteTokenizer(dir, ByteVocab+len(extra), extra)
}

func writeByteTokenizer(dir string, size int, extra []string) error {
	vocab := map[string]int{}
	for b, r := range byteChars() {
		vocab[string(r)] = b
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var specials []added
	for i, s := range byteSpecials {
		specials = append(specials, added{ID: 256 + i, Content: s, Special: true})
	}
	for i, s := range extra {
		specials = append(specials, added{ID: ByteVocab + i, Content: s, Special: true})
	}
	for id := ByteVocab + len(extra); id < size; id++ {
		specials = append(specials, added{ID: id, Content: fmt.Sprintf("<t%d>", id), Normalized: true})
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	tok := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   specials,
		"normalizer":     nil,
		"pre_tokenizer":  byteLevel,
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
		"decoder":        byteLevel,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": []string{},
		},
	}
	cfg := map[string]any{
		"add_bos_token": false, "add_eos_token": false, "bos_token": nil, "eos_token": "<|im_end|>",
		"pad_token": "<|endoftext|>", "unk_token": nil, "model_max_length": 4096,
		"clean_up_tokenization_spaces": false, "tokenizer_class": "PreTrainedTokenizerFast",
		"chat_template": chatML,
	}
	for name, v := range map[string]any{"tokenizer.json": tok, "tokenizer_config.json": cfg} {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	return nil
}

// byteChars is GPT-2's bytes_to_unicode: printable bytes map to themselves,
// the rest to code points from 256 on, so every byte is a visible character.
func byteChars() []rune {
	out := make([]rune, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			out[b] = rune(b)
		} else {
			out[b] = rune(256 + n)
			n++
		}
	}
	return out
}
