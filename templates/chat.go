package templates

import (
	"fmt"
	"time"
)

// ChatInput is what transformers' apply_chat_template passes to a chat
// template: template.render(messages=..., tools=..., documents=...,
// add_generation_prompt=..., **special_tokens, **kwargs).
type ChatInput struct {
	// Messages is the conversation, a list of message dicts (*Dict from
	// DecodeJSON, or Go maps and slices FromGo converts).
	Messages []any
	// Tools and Documents are passed as they are; nil is None (so
	// "tools is defined" is true and "tools is none" is true, as in
	// transformers).
	Tools     any
	Documents any
	// AddGenerationPrompt asks the template to open the assistant's turn.
	AddGenerationPrompt bool
	// SpecialTokens are the tokenizer's special_tokens_map (bos_token,
	// eos_token, ..., additional_special_tokens, extra special tokens).
	SpecialTokens *Dict
	// Kwargs are extra template variables (enable_thinking,
	// reasoning_effort, builtin_tools, ...); they override special tokens.
	Kwargs *Dict
	// Now, when not zero, is the time strftime_now formats, instead of the
	// template's clock.
	Now time.Time
}

// isReserved reports the names apply_chat_template passes itself; a kwarg
// with one of these names is a TypeError in transformers too.
func isReserved(name string) bool {
	switch name {
	case "messages", "tools", "documents", "add_generation_prompt":
		return true
	}
	return false
}

// RenderChat renders the template for a chat request, exactly as
// transformers' apply_chat_template(..., tokenize=False) does.
func (t *Template) RenderChat(in ChatInput) (string, error) {
	root, err := chatScope(in)
	if err != nil {
		return "", err
	}
	return t.render(root, in.Now)
}

func chatScope(in ChatInput) (*scope, error) {
	n := 4 + in.SpecialTokens.Len() + in.Kwargs.Len()
	root := &scope{names: make([]string, 0, n), vals: make([]any, 0, n)}
	msgs, _, err := fromGo(in.Messages, 0)
	if err != nil {
		return nil, fmt.Errorf("templates: messages: %w", err)
	}
	if in.Messages == nil {
		msgs = []any{}
	}
	tools, _, err := fromGo(in.Tools, 0)
	if err != nil {
		return nil, fmt.Errorf("templates: tools: %w", err)
	}
	docs, _, err := fromGo(in.Documents, 0)
	if err != nil {
		return nil, fmt.Errorf("templates: documents: %w", err)
	}
	root.names = append(root.names, "messages", "tools", "documents", "add_generation_prompt")
	root.vals = append(root.vals, msgs, tools, docs, in.AddGenerationPrompt)
	add := func(d *Dict, what string, checkReserved bool) error {
		if d == nil {
			return nil
		}
		for i, k := range d.keys {
			name, ok := k.(string)
			if !ok {
				return fmt.Errorf("templates: %s key %v is not a string", what, k)
			}
			if checkReserved && isReserved(name) {
				return &Error{Type: excType, Message: fmt.Sprintf("render() got multiple values for keyword argument '%s'", name)}
			}
			v, _, err := fromGo(d.vals[i], 0)
			if err != nil {
				return fmt.Errorf("templates: %s %q: %w", what, name, err)
			}
			root.set(name, v)
		}
		return nil
	}
	if err := add(in.SpecialTokens, "special token", true); err != nil {
		return nil, err
	}
	if err := add(in.Kwargs, "kwarg", true); err != nil {
		return nil, err
	}
	return root, nil
}
