package anthropic

import (
	"fmt"
	"slices"
	"time"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/templates"
)

// mark is one cache_control found in the request: where (the block's
// path), the index of the marked block in its list, and the TTL asked for.
type mark struct {
	at    string
	block int
	ttl   time.Duration
}

// cacheControl validates the cache_control of the block d at path at: nil
// (absent, or null) or {"type": "ephemeral"} with an optional "ttl" of
// "5m" or "1h". It reports whether there is one and its TTL.
func cacheControl(d *templates.Dict, at string) (time.Duration, bool, error) {
	v, _ := d.Get("cache_control")
	if v == nil {
		return 0, false, nil
	}
	at += ".cache_control"
	cc, ok := v.(*templates.Dict)
	if !ok {
		return 0, false, bad(at, "must be an object like {\"type\": \"ephemeral\"}")
	}
	typ, present := cc.Get("type")
	if !present || typ == nil {
		return 0, false, bad(at+".type", "field required")
	}
	if typ != "ephemeral" {
		return 0, false, bad(at+".type", "must be \"ephemeral\", got %s", show(typ))
	}
	ttl := chat.DefaultCacheTTL
	switch t, _ := cc.Get("ttl"); t {
	case nil, "5m":
	case "1h":
		ttl = chat.LongCacheTTL
	default:
		return 0, false, bad(at+".ttl", "must be \"5m\" or \"1h\", got %s", show(t))
	}
	return ttl, true, nil
}

// blockMarks returns the cache_control marks of a message's content
// blocks (already translated, so well formed). A tool_result's own text
// blocks may carry one too: it marks the tool_result. Thinking blocks
// cannot carry one.
func blockMarks(blocks []any, at string) ([]mark, error) {
	var out []mark
	for j, b := range blocks {
		bat := fmt.Sprintf("%s[%d]", at, j)
		d, typ, err := blockType(b, bat)
		if err != nil {
			return nil, err
		}
		ttl, ok, err := cacheControl(d, bat)
		if err != nil {
			return nil, err
		}
		if ok && (typ == "thinking" || typ == "redacted_thinking") {
			return nil, bad(bat+".cache_control", "cache_control cannot be set on a %s block", typ)
		}
		if ok {
			out = append(out, mark{at: bat, block: j, ttl: ttl})
		}
		if typ != "tool_result" {
			continue
		}
		inner, _ := d.Get("content")
		list, _ := inner.([]any)
		for k, ib := range list {
			iat := fmt.Sprintf("%s.content[%d]", bat, k)
			id, _, err := blockType(ib, iat)
			if err != nil {
				return nil, err
			}
			ttl, ok, err := cacheControl(id, iat)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, mark{at: iat, block: j, ttl: ttl})
			}
		}
	}
	return out, nil
}

// messageBreakpoints turns the marks of message i (raw, as sent) into
// breakpoints: the conversation so far (before, translated) and message i
// translated with its content cut after the marked block.
func messageBreakpoints(raw any, i int, before []any, marks []mark) ([]chat.Breakpoint, error) {
	d := raw.(*templates.Dict)
	role, _ := d.Get("role")
	content, _ := d.Get("content")
	blocks := content.([]any)
	out := make([]chat.Breakpoint, 0, len(marks))
	for _, m := range marks {
		cut := message(role.(string), slices.Clip(blocks[:m.block+1]))
		tm, err := translateMessage(cut, i)
		if err != nil {
			return nil, err
		}
		msgs := append(slices.Clip(before), tm...)
		out = append(out, chat.Breakpoint{Messages: msgs, TTL: m.ttl, Field: m.at})
	}
	return out, nil
}

// checkBreakpoints enforces Anthropic's limit on blocks with
// cache_control, naming the first one past it.
func checkBreakpoints(marks []mark) error {
	if len(marks) > chat.MaxBreakpoints {
		return bad(marks[chat.MaxBreakpoints].at+".cache_control",
			"a maximum of %d blocks with cache_control may be provided, found %d", chat.MaxBreakpoints, len(marks))
	}
	return nil
}
