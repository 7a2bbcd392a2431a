package output

import (
	"encoding/json"
	"strings"
)

// Syntax is how a template's model writes tool calls (and, for Harmony,
// its whole reply): it selects the parser. The chat package reads it off
// the template (chat.Prepared.Syntax).
type Syntax int

const (
	// SyntaxDefault parses Hermes/Qwen <tool_call>{json}</tool_call> tags,
	// and a reply that is only Llama 3 JSON calls.
	SyntaxDefault Syntax = iota
	// SyntaxMistral parses Mistral's [TOOL_CALLS] calls, in both shapes
	// its templates render: Mistral Nemo's JSON list
	// [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "abcdefghi"}, ...]
	// and the v11+ tokenizers' (Mistral Small 3.2)
	// [TOOL_CALLS]f[CALL_ID]abcdefghi[ARGS]{...}, one [TOOL_CALLS] per call
	// ([CALL_ID] optional). [TOOL_CALLS], [ARGS] and [CALL_ID] are special
	// tokens in Mistral's tokenizers: with Options.Tools they are decoded
	// as their text, the other special tokens are still skipped.
	SyntaxMistral
	// SyntaxHarmony parses gpt-oss's harmony messages: each message is a
	// header (<|start|>assistant, <|channel|>NAME, an optional recipient
	// to=functions.f and content type, <|constrain|>json) then
	// <|message|>, its text, and <|end|>, <|call|> or <|return|>. The
	// analysis channel is reasoning, a message to functions.f is a call to
	// f (its text the arguments), any other message is content. Harmony's
	// special tokens are decoded as their text for the parser.
	SyntaxHarmony
)

// String names the syntax.
func (s Syntax) String() string {
	switch s {
	case SyntaxMistral:
		return "mistral"
	case SyntaxHarmony:
		return "harmony"
	}
	return "default"
}

// Markers are the special tokens a syntax needs to see as text: the
// processor decodes them (and skips the other special tokens).
func (s Syntax) Markers() []string {
	switch s {
	case SyntaxMistral:
		return []string{mistralCalls, mistralArgs, mistralCallID}
	case SyntaxHarmony:
		return []string{harmonyStart, harmonyChannel, harmonyConstrain, harmonyMessage, harmonyEnd, harmonyCall, harmonyReturn}
	}
	return nil
}

// Mistral's markers.
const (
	mistralCalls  = "[TOOL_CALLS]"
	mistralArgs   = "[ARGS]"
	mistralCallID = "[CALL_ID]"
)

// scanMistral scans held Mistral tool-call text (starting at [TOOL_CALLS])
// into calls, like scanTools.
func scanMistral(text string, final bool) []callScan {
	var calls []callScan
	s := strings.TrimLeft(text, " \t\r\n")
	for s != "" {
		if !strings.HasPrefix(s, mistralCalls) {
			return calls
		}
		s = strings.TrimLeft(s[len(mistralCalls):], " \t\r\n")
		if s == "" {
			return calls
		}
		var more []callScan
		if s[0] == '[' {
			more, s = scanMistralList(s, final)
		} else {
			more, s = scanMistralArgs(s, final)
		}
		calls = append(calls, more...)
		if s == "" || len(more) == 0 || !more[len(more)-1].done {
			return calls
		}
		s = strings.TrimLeft(s, " \t\r\n")
	}
	return calls
}

// scanMistralList scans Nemo's [{"name": ..., "arguments": ...}, ...] at
// the start of s; rest is what follows the list ("" while it goes on).
func scanMistralList(s string, final bool) (calls []callScan, rest string) {
	s = s[1:]
	for {
		c, end := scanCall(s)
		if end < 0 {
			if c.hasName || c.hasArgs {
				calls = append(calls, c)
			}
			return calls, ""
		}
		c.done = true
		c.valid = c.hasName && json.Valid([]byte(strings.TrimSpace(s[:end])))
		if !c.hasArgs {
			c.hasArgs, c.args, c.argsDone = true, "{}", true
		}
		calls = append(calls, c)
		s = strings.TrimLeft(s[end:], " \t\r\n")
		switch {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, "]"):
			return calls, s[1:]
		case s == "" && !final:
			calls[len(calls)-1].done = false // "]" still coming
			return calls, ""
		default: // cut short before "]", or not a list after all
			return calls, ""
		}
	}
}

// scanMistralArgs scans one name[CALL_ID]id[ARGS]{...} call at the start
// of s; rest is what follows its arguments ("" while they go on).
func scanMistralArgs(s string, final bool) (calls []callScan, rest string) {
	var c callScan
	i := strings.Index(s, mistralArgs)
	head := s
	if i >= 0 {
		head = s[:i]
	}
	name, _, hasID := strings.Cut(head, mistralCallID)
	if i < 0 && !hasID {
		return nil, "" // the name goes on
	}
	if name = strings.TrimSpace(name); name == "" || strings.ContainsAny(name, "[]{}\"") {
		return nil, "" // not a call
	}
	c.name, c.hasName = name, true
	if i < 0 {
		return []callScan{c}, "" // the call id goes on: not announced yet
	}
	s = s[i+len(mistralArgs):]
	v := skipWS(s, 0)
	if v >= len(s) {
		return []callScan{c}, ""
	}
	end := skipValue(s, v)
	if end < 0 && final && json.Valid([]byte(strings.TrimSpace(s[v:]))) {
		end = len(strings.TrimRight(s, " \t\r\n")) // a number or literal at the very end
	}
	c.hasArgs = true
	c.args, c.argsDone = argsText(s, v, end)
	if end < 0 {
		return []callScan{c}, ""
	}
	c.done = true
	c.valid = json.Valid([]byte(s[v:end]))
	return []callScan{c}, s[end:]
}
