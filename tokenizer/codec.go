package tokenizer

import (
	"encoding/json"
	"fmt"
)

// Codec is what the serving path needs from a tokenizer. *Tokenizer
// implements it; so does the adapter for github.com/daulet/tokenizers
// (build tag hftokenizers), for users who have its native library.
type Codec interface {
	// Encode tokenizes text with tokens, byte offsets and the special mask.
	Encode(text string, addSpecial bool) Encoding
	// EncodeIDs tokenizes text to ids only.
	EncodeIDs(text string, addSpecial bool) []int32
	// Decode turns ids back into text.
	Decode(ids []int32, skipSpecial bool) string
	// VocabSize is the number of ids (one more than the largest).
	VocabSize() int
}

var _ Codec = (*Tokenizer)(nil)

// transformersLayer is what transformers adds on top of a tokenizer.json:
// the special ids its rebuilt post-processor puts around a sequence (when
// it rebuilds it) and whether decoding cleans up spaces. The adapter for
// the native library applies it itself, since that library only runs
// tokenizer.json.
type transformersLayer struct {
	override         bool
	prefix, suffix   []int32
	prefixT, suffixT []string
	cleanup          bool
}

// parseTransformersLayer reads tokenizer_config.json (empty: none) and
// resolves bos/eos through tokenizer.json's added tokens.
func parseTransformersLayer(tokenizerJSON, configJSON []byte) (transformersLayer, error) {
	var l transformersLayer
	if len(configJSON) == 0 {
		return l, nil
	}
	var cfg tokenConfig
	if err := json.Unmarshal(configJSON, &cfg); err != nil {
		return l, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	l.cleanup = cfg.CleanUp != nil && *cfg.CleanUp
	var doc struct {
		Added []AddedToken `json:"added_tokens"`
	}
	if err := json.Unmarshal(tokenizerJSON, &doc); err != nil {
		return l, fmt.Errorf("tokenizer.json: %w", err)
	}
	ids := map[string]int32{}
	for _, a := range doc.Added {
		ids[a.Content] = a.ID
	}
	tp, err := transformersTemplate(cfg, func(s string) (int32, bool) {
		id, ok := ids[s]
		return id, ok
	})
	if err != nil || tp == nil {
		return l, err
	}
	l.override = true
	seen := false
	for _, it := range tp.items {
		switch {
		case it.seq:
			seen = true
		case seen:
			l.suffix, l.suffixT = append(l.suffix, it.ids...), append(l.suffixT, it.toks...)
		default:
			l.prefix, l.prefixT = append(l.prefix, it.ids...), append(l.prefixT, it.toks...)
		}
	}
	return l, nil
}
