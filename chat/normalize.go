package chat

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"

	"github.com/troupe-ai/troupe/templates"
)

// Message normalisation: every API (and a Go caller) may hand messages in
// any of the shapes clients send, and templates were written for one shape
// each. Before a render, Prepare rewrites a copy of the messages into the
// shape the model's template renders:
//
//   - content null or missing becomes "" (vLLM does the same), and a list of
//     text parts becomes their text joined with "\n" (vLLM's join); a part of
//     another type (an image, audio, a file) is a BadRequest naming it;
//   - an assistant message with tool calls and no text keeps content None
//     instead when the template renders tool calls only then (DeepSeek V3 and
//     R1 test "content is none");
//   - tool-call arguments become an object, as transformers documents and
//     most templates expect (a JSON string is parsed, null or "" is {}), or
//     JSON text for the templates that concatenate them to strings (DeepSeek);
//   - tool-call ids (and the tool messages' tool_call_id) are mapped to nine
//     alphanumerics when the template accepts no other ids (Mistral), so ids
//     such as our own call_... round-trip.
//
// Which of these a template needs is found by rendering a small probe
// conversation once per template (toolShape), not by matching its source.

// ContentParam is a BadRequest about one message's content; Param names the
// offending field in the internal request's terms (messages[i].content[j]).
type ContentParam struct {
	Param string
	Err   error
}

func (e *ContentParam) Error() string { return e.Param + ": " + e.Err.Error() }
func (e *ContentParam) Unwrap() error { return e.Err }

// ErrImageInput is the error of an image (or other non-text) content part:
// the served models read text only.
var ErrImageInput = errors.New("image inputs are not supported: this server serves a text-only model; send text content parts only")

// toolShape is how a template wants an assistant tool-call turn.
type toolShape struct {
	nullContent bool // an assistant turn with tool calls and no text keeps content None
	stringArgs  bool // tool-call arguments as JSON text
	shortIDs    bool // tool-call ids of exactly nine alphanumerics
}

// shapes caches each template's toolShape (probing renders the template a
// few times, once per template and process).
type shapes struct {
	mu sync.Mutex
	m  map[*templates.Template]toolShape
}

func (s *shapes) get(t *templates.Template, special *templates.Dict) toolShape {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh, ok := s.m[t]; ok {
		return sh
	}
	sh := probeShape(t, special)
	if s.m == nil {
		s.m = map[*templates.Template]toolShape{}
	}
	s.m[t] = sh
	return sh
}

// probeMarker is the argument value the probe looks for in a render: it
// appears in the prompt only when the template rendered the call.
const probeMarker = "zq7-probe-arg-value"

// probeShape finds, by rendering a tool-call conversation, the first shape
// in which the template renders the call (preferring what vLLM passes:
// content "", arguments as an object), then whether it also accepts a long
// id. A template that renders no tool calls at all gets the default shape.
func probeShape(t *templates.Template, special *templates.Dict) toolShape {
	renders := func(sh toolShape, id string) bool {
		for _, withResult := range []bool{true, false} {
			out, err := t.RenderChat(templates.ChatInput{Messages: probeConversation(sh, id, withResult),
				Tools: probeTools(), AddGenerationPrompt: true, SpecialTokens: special})
			if err == nil && strings.Contains(out, probeMarker) {
				return true
			}
		}
		return false
	}
	for _, sh := range []toolShape{{}, {nullContent: true}, {stringArgs: true}, {nullContent: true, stringArgs: true}} {
		if renders(sh, "pRobe0001") {
			sh.shortIDs = !renders(sh, "call_0123456789abcdefghijKLMN")
			return sh
		}
	}
	return toolShape{}
}

func probeConversation(sh toolShape, id string, withResult bool) []any {
	args := templates.NewDict(1)
	args.Set("probe_arg", probeMarker)
	var a any = args
	if sh.stringArgs {
		a = `{"probe_arg": "` + probeMarker + `"}`
	}
	fn := templates.NewDict(2)
	fn.Set("name", "probe_tool")
	fn.Set("arguments", a)
	call := templates.NewDict(3)
	call.Set("id", id)
	call.Set("type", "function")
	call.Set("function", fn)
	var content any = ""
	if sh.nullContent {
		content = nil
	}
	asst := templates.NewDict(3)
	asst.Set("role", "assistant")
	asst.Set("content", content)
	asst.Set("tool_calls", []any{call})
	msgs := []any{message("user", "Probe?"), asst}
	if withResult {
		res := templates.NewDict(4)
		res.Set("role", "tool")
		res.Set("tool_call_id", id)
		res.Set("name", "probe_tool")
		res.Set("content", "done")
		return append(msgs, res)
	}
	return append(msgs, message("user", "Thanks."))
}

func probeTools() []any {
	prop := templates.NewDict(1)
	prop.Set("type", "string")
	props := templates.NewDict(1)
	props.Set("probe_arg", prop)
	params := templates.NewDict(2)
	params.Set("type", "object")
	params.Set("properties", props)
	fn := templates.NewDict(3)
	fn.Set("name", "probe_tool")
	fn.Set("description", "A probe.")
	fn.Set("parameters", params)
	tool := templates.NewDict(2)
	tool.Set("type", "function")
	tool.Set("function", fn)
	return []any{tool}
}

// hasToolTurns reports whether any message carries tool calls or answers
// one (only then does the template's tool shape matter).
func hasToolTurns(msgs []any) bool {
	for _, m := range msgs {
		d, ok := m.(*templates.Dict)
		if !ok {
			continue
		}
		if c, _ := d.Get("tool_calls"); c != nil {
			return true
		}
		if _, ok := d.Get("tool_call_id"); ok {
			return true
		}
	}
	return false
}

// textPartTypes are the content-part types whose text is the part's "text".
var textPartTypes = map[string]bool{"text": true, "input_text": true, "output_text": true}

// normalizeMessages returns msgs rewritten into shape sh (see the package
// comment above); msgs themselves are not modified.
func normalizeMessages(msgs []any, sh toolShape, toJSON func(any) (string, error)) ([]any, error) {
	out := make([]any, len(msgs))
	for i, m := range msgs {
		d, ok := m.(*templates.Dict)
		if !ok {
			out[i] = m // the template decides what to make of it
			continue
		}
		nd := templates.NewDict(d.Len() + 1)
		var err error
		d.Range(func(k, v any) bool {
			key, _ := k.(string)
			switch key {
			case "tool_calls":
				v, err = normalizeCalls(v, sh, toJSON, fmt.Sprintf("messages[%d].tool_calls", i))
			case "tool_call_id":
				if s, ok := v.(string); ok && sh.shortIDs {
					v = shortID(s)
				}
			}
			if err != nil {
				return false
			}
			nd.Set(key, v)
			return true
		})
		if err != nil {
			return nil, err
		}
		content, err := normalizeContent(d, fmt.Sprintf("messages[%d].content", i))
		if err != nil {
			return nil, err
		}
		role, _ := d.Get("role")
		if calls, _ := d.Get("tool_calls"); role == "assistant" && calls != nil && content == "" && sh.nullContent {
			nd.Set("content", nil)
		} else {
			nd.Set("content", content)
		}
		out[i] = nd
	}
	return out, nil
}

// normalizeContent is a message's content as one string.
func normalizeContent(d *templates.Dict, at string) (string, error) {
	content, _ := d.Get("content")
	switch c := content.(type) {
	case nil:
		return "", nil
	case string:
		return c, nil
	case []any:
		texts := make([]string, 0, len(c))
		for j, p := range c {
			pat := fmt.Sprintf("%s[%d]", at, j)
			if s, ok := p.(string); ok { // a bare string part, as vLLM accepts
				texts = append(texts, s)
				continue
			}
			pd, ok := p.(*templates.Dict)
			if !ok {
				return "", &ContentParam{Param: pat, Err: errors.New("a content part must be an object")}
			}
			typ, _ := pd.Get("type")
			ts, _ := typ.(string)
			if !textPartTypes[ts] {
				if ts == "refusal" {
					r, _ := pd.Get("refusal")
					rs, _ := r.(string)
					texts = append(texts, rs)
					continue
				}
				return "", &ContentParam{Param: pat, Err: partError(ts)}
			}
			txt, _ := pd.Get("text")
			s, ok := txt.(string)
			if !ok {
				return "", &ContentParam{Param: pat + ".text", Err: errors.New("a text part needs a string text")}
			}
			texts = append(texts, s)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", &ContentParam{Param: at, Err: fmt.Errorf("content must be a string or a list of text parts, got %s", jsonType(content))}
}

// partError is the error of a content part that is not text.
func partError(typ string) error {
	switch {
	case strings.Contains(typ, "image"):
		return ErrImageInput
	case typ == "":
		return errors.New("a content part needs a type")
	}
	return fmt.Errorf("content part type %q is not supported: this server serves a text-only model; send text content parts only", typ)
}

func normalizeCalls(v any, sh toolShape, toJSON func(any) (string, error), at string) (any, error) {
	list, ok := v.([]any)
	if !ok {
		return v, nil
	}
	out := make([]any, len(list))
	for j, c := range list {
		cd, ok := c.(*templates.Dict)
		if !ok {
			out[j] = c
			continue
		}
		nc := templates.NewDict(cd.Len())
		var err error
		cd.Range(func(k, val any) bool {
			key, _ := k.(string)
			switch key {
			case "id":
				if s, ok := val.(string); ok && sh.shortIDs {
					val = shortID(s)
				}
			case "function":
				if fd, ok := val.(*templates.Dict); ok {
					val, err = normalizeFunction(fd, sh, toJSON, fmt.Sprintf("%s[%d].function.arguments", at, j))
				}
			}
			nc.Set(key, val)
			return err == nil
		})
		if err != nil {
			return nil, err
		}
		out[j] = nc
	}
	return out, nil
}

func normalizeFunction(fd *templates.Dict, sh toolShape, toJSON func(any) (string, error), at string) (*templates.Dict, error) {
	nf := templates.NewDict(fd.Len() + 1)
	fd.Range(func(k, v any) bool {
		nf.Set(k.(string), v)
		return true
	})
	args, _ := fd.Get("arguments")
	if s, ok := args.(string); ok {
		args = nil
		if strings.TrimSpace(s) != "" {
			args = s
			if obj, err := templates.DecodeJSON([]byte(s)); err == nil {
				args = obj
			}
		}
	}
	if args == nil {
		args = templates.NewDict(0)
	}
	if sh.stringArgs {
		if _, isStr := args.(string); !isStr {
			text, err := toJSON(args)
			if err != nil {
				return nil, &ContentParam{Param: at, Err: err}
			}
			args = text
		}
	}
	nf.Set("arguments", args)
	return nf, nil
}

// shortID maps a tool-call id to nine alphanumerics (the ids Mistral's
// templates accept), the same way every time, so a conversation's ids
// render alike on every turn; an id that already has that form is kept.
func shortID(id string) string {
	if len(id) == 9 && isAlnum(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	s := new(big.Int).SetBytes(sum[:]).Text(62)
	for len(s) < 9 {
		s = "0" + s
	}
	return s[:9]
}

func isAlnum(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// jsonType names a template value's JSON type for an error message.
func jsonType(v any) string {
	switch v.(type) {
	case bool:
		return "a boolean"
	case int64, float64, int, *big.Int:
		return "a number"
	case *templates.Dict:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// jsonText is a template compiled once to serialise template values as
// Python's json.dumps does (transformers' tojson), for templates that want
// tool-call arguments as text.
type jsonText struct {
	once sync.Once
	t    *templates.Template
	err  error
}

func (j *jsonText) dumps(v any) (string, error) {
	j.once.Do(func() { j.t, j.err = templates.Compile("{{ v | tojson }}") })
	if j.err != nil {
		return "", j.err
	}
	return j.t.Render(map[string]any{"v": v})
}
