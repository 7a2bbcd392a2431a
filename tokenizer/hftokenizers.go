//go:build hftokenizers

package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"

	hf "github.com/daulet/tokenizers"
)

// HF is a Codec backed by github.com/daulet/tokenizers, the Hugging Face
// Rust library through cgo. It needs that library's native libtokenizers.a
// at link time; build with -tags hftokenizers. Unless opts.Raw, it applies
// the same transformers layer as Load (add_bos_token / add_eos_token and
// clean_up_tokenization_spaces from tokenizer_config.json).
type HF struct {
	tk    *hf.Tokenizer
	layer transformersLayer
	raw   bool
}

var _ Codec = (*HF)(nil)

// LoadHF loads dir/tokenizer.json (and tokenizer_config.json when present)
// with the native library. Close releases it.
func LoadHF(dir string, opts Options) (*HF, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	h := &HF{raw: opts.Raw}
	if !opts.Raw {
		if h.layer, err = parseTransformersLayer(tj, cfg); err != nil {
			return nil, fmt.Errorf("tokenizer %s: %w", dir, err)
		}
	}
	if h.tk, err = hf.FromBytes(tj); err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", dir, err)
	}
	return h, nil
}

// Close frees the native tokenizer.
func (h *HF) Close() error { return h.tk.Close() }

// Encode tokenizes text with tokens, byte offsets and the special mask.
func (h *HF) Encode(text string, addSpecial bool) Encoding {
	native := addSpecial && !h.layer.override
	enc := h.tk.EncodeWithOptions(text, native, hf.WithReturnTokens(), hf.WithReturnOffsets(), hf.WithReturnSpecialTokensMask())
	var out Encoding
	add := func(ids []int32, toks []string) {
		for i, id := range ids {
			out.IDs = append(out.IDs, id)
			out.Tokens = append(out.Tokens, toks[i])
			out.Offsets = append(out.Offsets, [2]int{0, 0})
			out.SpecialMask = append(out.SpecialMask, true)
		}
	}
	if addSpecial && h.layer.override {
		add(h.layer.prefix, h.layer.prefixT)
	}
	for i, id := range enc.IDs {
		out.IDs = append(out.IDs, int32(id))
		out.Tokens = append(out.Tokens, enc.Tokens[i])
		out.Offsets = append(out.Offsets, [2]int{int(enc.Offsets[i][0]), int(enc.Offsets[i][1])})
		out.SpecialMask = append(out.SpecialMask, enc.SpecialTokensMask[i] != 0)
	}
	if addSpecial && h.layer.override {
		add(h.layer.suffix, h.layer.suffixT)
	}
	return out
}

// EncodeIDs returns only the ids.
func (h *HF) EncodeIDs(text string, addSpecial bool) []int32 {
	native := addSpecial && !h.layer.override
	ids, _ := h.tk.Encode(text, native)
	out := make([]int32, 0, len(ids)+len(h.layer.prefix)+len(h.layer.suffix))
	if addSpecial && h.layer.override {
		out = append(out, h.layer.prefix...)
	}
	for _, id := range ids {
		out = append(out, int32(id))
	}
	if addSpecial && h.layer.override {
		out = append(out, h.layer.suffix...)
	}
	return out
}

// Decode turns ids back into text.
func (h *HF) Decode(ids []int32, skipSpecial bool) string {
	u := make([]uint32, 0, len(ids))
	for _, id := range ids {
		if id >= 0 {
			u = append(u, uint32(id))
		}
	}
	s := h.tk.Decode(u, skipSpecial)
	if h.layer.cleanup {
		s = cleanUpTokenization(s)
	}
	return s
}

// VocabSize is the native library's vocabulary size (with added tokens).
func (h *HF) VocabSize() int { return int(h.tk.VocabSize()) }
