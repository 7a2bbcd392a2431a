package chat

import (
	"fmt"
	"slices"
	"time"

	"github.com/troupe-ai/troupe/templates"
)

// Cache TTLs a breakpoint may ask for (Anthropic's cache_control ttl).
const (
	// DefaultCacheTTL is how long a breakpoint's prefix is kept when the
	// request names no TTL ("5m").
	DefaultCacheTTL = 5 * time.Minute
	// LongCacheTTL is the longer TTL ("1h").
	LongCacheTTL = time.Hour
)

// MaxBreakpoints is the most cache breakpoints one request may carry
// (Anthropic's limit on blocks with cache_control).
const MaxBreakpoints = 4

// Breakpoint marks the end of a prompt prefix the client wants kept in
// the prompt cache (Anthropic's cache_control on a tool, a system block or
// a content block). It describes the prefix as the conversation it
// renders, not as a token position: Prepare finds the position (see
// Prepared.Breakpoints).
type Breakpoint struct {
	// Tools are the tools the prefix renders with: the request's tools for
	// a breakpoint in the system prompt or the messages, the tools up to
	// and including the marked one for a breakpoint on a tool (nil when
	// the model is shown none).
	Tools any
	// Messages are the template messages (in the request's shape, before
	// normalization) up to and including the marked block: the message
	// holding it is cut after it. Empty for a breakpoint on a tool.
	Messages []any
	// TTL is how long the prefix should stay cached; 0 means
	// DefaultCacheTTL.
	TTL time.Duration
	// Field names the marked block in the request (for notes and errors).
	Field string
}

// CachePoint is a breakpoint resolved to the prompt: the first Pos tokens
// of Prepared.IDs are the cached prefix, kept for TTL.
type CachePoint struct {
	Pos int
	TTL time.Duration
}

// breakpoints resolves r's breakpoints to token positions of the prompt
// ids: each is the longest token prefix the prompt shares with the prefix's
// renders (see prefixLen). The result is strictly increasing, each position
// in 1..len(ids)-1 (at least one token is always computed); a breakpoint
// whose prefix cannot be rendered, or shares nothing with the prompt, is
// dropped; two that land on one position keep the longer TTL. Only the
// first MaxBreakpoints are resolved (the APIs refuse more).
func (a *Assets) breakpoints(tmpl *templates.Template, r *Request, ids []int32, promptCache bool) []CachePoint {
	if len(r.Breakpoints) == 0 || len(ids) < 2 {
		return nil
	}
	byPos := map[int]time.Duration{}
	for _, b := range r.Breakpoints[:min(len(r.Breakpoints), MaxBreakpoints)] {
		n, err := a.prefixLen(tmpl, r, &b, ids, promptCache)
		if err != nil || n <= 0 {
			continue
		}
		n = min(n, len(ids)-1)
		ttl := b.TTL
		if ttl <= 0 {
			ttl = DefaultCacheTTL
		}
		byPos[n] = max(byPos[n], ttl)
	}
	out := make([]CachePoint, 0, len(byPos))
	for pos, ttl := range byPos {
		out = append(out, CachePoint{Pos: pos, TTL: ttl})
	}
	slices.SortFunc(out, func(x, y CachePoint) int { return x.Pos - y.Pos })
	return out
}

// prefixLen is how many leading tokens of the prompt ids the breakpoint's
// prefix covers. The prefix is rendered twice, each time followed by a
// different placeholder message (a user message, or an assistant one after
// a user message, so that roles keep alternating), and the answer is the
// common token prefix of both renders and the prompt: whatever the
// template writes after a message (an end-of-turn token, a think block it
// only shows in the last turn, a generation prompt) counts only where the
// prompt has it too. A template that refuses the placeholders is asked
// for the prefix alone, without a generation prompt. The prefix's
// messages go through what the prompt's went through (normalization, kept
// reasoning re-attached when preserve_thinking is on), with the same
// template variables.
func (a *Assets) prefixLen(tmpl *templates.Template, r *Request, b *Breakpoint, ids []int32, promptCache bool) (int, error) {
	prefix := *r
	prefix.Messages = b.Messages
	h, err := a.history(tmpl, &prefix, promptCache)
	if err != nil {
		return 0, err
	}
	msgs, kwargs := h.msgs, h.kwargs
	render := func(msgs []any) ([]int32, error) {
		text, err := tmpl.RenderChat(templates.ChatInput{Messages: msgs, Tools: b.Tools, Documents: r.Documents,
			SpecialTokens: a.SpecialTokens, Kwargs: kwargs})
		if err != nil {
			return nil, fmt.Errorf("chat template, cache breakpoint at %s: %w", b.Field, err)
		}
		return a.encode(text), nil
	}
	role := "user"
	if len(msgs) > 0 {
		if d, ok := msgs[len(msgs)-1].(*templates.Dict); ok {
			if last, _ := d.Get("role"); last == "user" {
				role = "assistant"
			}
		}
	}
	n := len(ids)
	for _, placeholder := range []string{"A", "B"} {
		got, err := render(append(slices.Clip(msgs), message(role, placeholder)))
		if err != nil {
			if len(msgs) == 0 {
				return 0, err
			}
			alone, err := render(msgs)
			if err != nil {
				return 0, err
			}
			return commonPrefix(alone, ids), nil
		}
		n = min(n, commonPrefix(got, ids))
	}
	return n, nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
