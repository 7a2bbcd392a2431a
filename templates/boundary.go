package templates

import (
	"unicode/utf8"
)

// EncodeFunc tokenizes text as the prompt is tokenized for the model,
// without adding special tokens (the template writes them), e.g. a
// tokenizer's Encode method adapted to this signature.
type EncodeFunc func(text string) []int32

// Boundary describes the history boundary of a chat request: the render
// H of the conversation up to and including its last assistant message,
// with add_generation_prompt=false, compared with the full prompt. When
// H's tokens are a prefix of the prompt's tokens, a state snapshot taken
// after H can be reused by the next turn of the conversation.
type Boundary struct {
	// Messages is the number of messages H covers (index of the last
	// assistant message + 1).
	Messages int
	// History is H.
	History string
	// TextPrefix reports whether H is a byte prefix of the prompt;
	// CommonChars is their longest common prefix in Unicode code points.
	TextPrefix  bool
	CommonChars int
	// HistoryIDs are H's token ids; TokenPrefix reports whether they are a
	// prefix of the prompt's ids, and CommonTokens is the length of the
	// longest common prefix of the two id sequences. They are set only
	// when an EncodeFunc is given.
	HistoryIDs   []int32
	TokenPrefix  bool
	CommonTokens int
}

// LastAssistant returns the index of the last message whose role is
// "assistant", or -1.
func LastAssistant(messages []any) int {
	for i := len(messages) - 1; i >= 0; i-- {
		if d, ok := messages[i].(*Dict); ok {
			if role, _ := d.Get("role"); role == "assistant" {
				return i
			}
		} else if m, ok := messages[i].(map[string]any); ok && m["role"] == "assistant" {
			return i
		}
	}
	return -1
}

// RenderHistory renders H for the request in: the messages up to and
// including the last assistant message, with add_generation_prompt=false
// and the same tools, documents, special tokens and kwargs. ok is false
// (and nothing is rendered) when no message is an assistant message.
func (t *Template) RenderHistory(in ChatInput) (h string, messages int, ok bool, err error) {
	last := LastAssistant(in.Messages)
	if last < 0 {
		return "", 0, false, nil
	}
	hin := in
	hin.Messages = in.Messages[:last+1]
	hin.AddGenerationPrompt = false
	h, err = t.RenderChat(hin)
	if err != nil {
		return "", 0, false, err
	}
	return h, last + 1, true, nil
}

// HistoryBoundary renders H for the request in and compares it with the
// request's full prompt (the render with in.AddGenerationPrompt, as the
// model will see it). promptIDs are the prompt's token ids when the caller
// already has them; with encode set and promptIDs nil, the prompt is
// encoded here. With encode nil only the character-level facts are set.
// ok is false when the request has no assistant message.
func (t *Template) HistoryBoundary(in ChatInput, prompt string, promptIDs []int32, encode EncodeFunc) (b Boundary, ok bool, err error) {
	h, n, ok, err := t.RenderHistory(in)
	if err != nil || !ok {
		return Boundary{}, ok, err
	}
	b = CompareBoundary(h, prompt, promptIDs, encode)
	b.Messages = n
	return b, true, nil
}

// CompareBoundary compares a history render h with the full prompt.
// See HistoryBoundary for promptIDs and encode.
func CompareBoundary(h, prompt string, promptIDs []int32, encode EncodeFunc) Boundary {
	b := Boundary{History: h}
	b.CommonChars = commonPrefixRunes(h, prompt)
	b.TextPrefix = len(h) <= len(prompt) && prompt[:len(h)] == h
	if encode != nil {
		if promptIDs == nil {
			promptIDs = encode(prompt)
		}
		b.HistoryIDs = encode(h)
		n := 0
		for n < len(b.HistoryIDs) && n < len(promptIDs) && b.HistoryIDs[n] == promptIDs[n] {
			n++
		}
		b.CommonTokens = n
		b.TokenPrefix = n == len(b.HistoryIDs)
	}
	return b
}

// commonPrefixRunes is the length, in code points, of the longest common
// prefix of a and b.
func commonPrefixRunes(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	// Back off to the start of a character both strings do not share whole.
	if i < len(a) || i < len(b) {
		for i > 0 && (i < len(a) && !utf8.RuneStart(a[i]) || i < len(b) && !utf8.RuneStart(b[i])) {
			i--
		}
	}
	return utf8.RuneCountInString(a[:i])
}
