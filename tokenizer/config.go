package tokenizer

// TokenName reads a special token the way tokenizer_config.json writes it
// (bos_token, eos_token, ...): a plain string, or an AddedToken object with
// its text in "content". It returns "" for anything else (null, absent).
func TokenName(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		s, _ := t["content"].(string)
		return s
	}
	return ""
}
