package chat

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/troupe-ai/troupe/templates"
)

// Preserved reasoning. Agent loops send the model's earlier replies back
// as history, and a template that renders earlier turns' reasoning
// (Qwen3 for the turns since the last user message; templates with a
// preserve_thinking switch for every turn) then renders the prompt the
// model generated: the state the server kept at the end of that reply (its
// dense pages, its snapshot) is a prefix of the next prompt, and only the
// new tool result or user message is computed. OpenAI-style clients drop
// the reasoning they were shown (the SDKs send back content and tool
// calls only), so the server keeps the reasoning of each reply it produced,
// keyed by what the client will send back, and re-attaches it when a
// request has preserve_thinking on (llama.cpp's --reasoning-preserve,
// oMLX's preserve_thinking for external clients).

// PreserveVar is the template variable (chat_template_kwargs) that asks a
// template to keep earlier turns' reasoning, and the request switch.
const PreserveVar = "preserve_thinking"

// PreserveSupport is what a chat template does with earlier turns'
// reasoning_content, found by rendering probe conversations (never by
// matching its source).
type PreserveSupport struct {
	// Variable: the template reads preserve_thinking (with it true an
	// earlier turn's reasoning is rendered, without it it is not).
	Variable bool
	// History: an assistant turn's reasoning before the last user message
	// is rendered (with preserve_thinking true when the template reads it).
	History bool
	// ToolLoop: the reasoning of an assistant turn since the last user
	// message (an agent loop's earlier steps) is rendered.
	ToolLoop bool
}

// Supported reports whether the template keeps any earlier turn's
// reasoning, so that preserved reasoning reaches the prompt.
func (s PreserveSupport) Supported() bool { return s.History || s.ToolLoop }

// probeReasoning marks the probe's reasoning in a render.
const probeReasoning = "zq7-probe-reasoning"

// probePreserve renders the probe conversations through t (messages in the
// template's tool shape sh).
func probePreserve(t *templates.Template, special *templates.Dict, sh toolShape, toJSON func(any) (string, error)) PreserveSupport {
	renders := func(msgs []any, preserve bool) bool {
		msgs, err := normalizeMessages(msgs, sh, toJSON)
		if err != nil {
			return false
		}
		var kw *templates.Dict
		if preserve {
			kw = templates.NewDict(1)
			kw.Set(PreserveVar, true)
		}
		out, err := t.RenderChat(templates.ChatInput{Messages: msgs, Tools: probeTools(), AddGenerationPrompt: true,
			SpecialTokens: special, Kwargs: kw})
		return err == nil && strings.Contains(out, probeReasoning)
	}
	// an earlier exchange, then a new user message
	asst := message("assistant", "Probe answer.")
	asst.Set("reasoning_content", probeReasoning)
	history := []any{message("user", "Probe?"), asst, message("user", "Again?")}
	// an agent loop: a reasoned tool call, then its result
	loop := probeConversation(toolShape{}, "pRobe0001", true)
	call := loop[1].(*templates.Dict)
	call.Set("reasoning_content", probeReasoning)
	var s PreserveSupport
	s.History = renders(history, true)
	s.Variable = s.History && !renders(history, false)
	s.ToolLoop = renders(loop, true)
	return s
}

// preserves caches each template's PreserveSupport.
type preserves struct {
	mu sync.Mutex
	m  map[*templates.Template]PreserveSupport
}

// PreserveThinking is what the model's chat template (its tool-use
// template for requests with tools, when it has one) does with earlier
// turns' reasoning.
func (a *Assets) PreserveThinking(tools bool) PreserveSupport {
	tmpl := a.Template
	if tools && a.ToolTemplate != nil {
		tmpl = a.ToolTemplate
	}
	if tmpl == nil {
		return PreserveSupport{}
	}
	return a.preserveSupport(tmpl)
}

func (a *Assets) preserveSupport(t *templates.Template) PreserveSupport {
	a.preserve.mu.Lock()
	defer a.preserve.mu.Unlock()
	if s, ok := a.preserve.m[t]; ok {
		return s
	}
	s := probePreserve(t, a.SpecialTokens, a.shapes.get(t, a.SpecialTokens), a.json.dumps)
	if a.preserve.m == nil {
		a.preserve.m = map[*templates.Template]PreserveSupport{}
	}
	a.preserve.m[t] = s
	return s
}

// preserveOn decides whether r renders with preserved reasoning: the
// request's chat_template_kwargs.preserve_thinking when it sets a boolean,
// else on with the prompt cache and a template that keeps earlier
// reasoning (the cache is what makes it pay; the decision does not depend
// on the model's snapshot capability).
func preserveOn(r *Request, s PreserveSupport, promptCache bool) bool {
	if r.Kwargs != nil {
		if v, ok := r.Kwargs.Get(PreserveVar); ok {
			if b, ok := v.(bool); ok {
				return b
			}
		}
	}
	return promptCache && s.Supported()
}

// preserveKwargs returns kw with preserve_thinking true added, for a
// template that reads it and a request that did not set it.
func preserveKwargs(kw *templates.Dict) *templates.Dict {
	if kw != nil {
		if _, ok := kw.Get(PreserveVar); ok {
			return kw
		}
	}
	out := templates.NewDict(1)
	if kw != nil {
		kw.Range(func(k, v any) bool {
			out.Set(k.(string), v)
			return true
		})
	}
	out.Set(PreserveVar, true)
	return out
}

// Call is a tool call as a reply carried it: its name and its arguments'
// JSON text.
type Call struct {
	ID, Name, Arguments string
}

// Reply is an assistant turn the server generated: what the client was
// sent, reasoning apart.
type Reply struct {
	Content, Reasoning string
	Calls              []Call
}

// replyKey is the key of an assistant turn: a digest of its text (spaces
// at the ends trimmed) and of each call's name and arguments (as canonical
// JSON, so that a client re-serialising them with other spacing or key
// order still matches; ids are left out, which some clients rewrite).
func replyKey(content string, calls []Call) [32]byte {
	h := sha256.New()
	h.Write([]byte(strings.TrimSpace(content)))
	for _, c := range calls {
		h.Write([]byte{0})
		h.Write([]byte(c.Name))
		h.Write([]byte{0})
		h.Write([]byte(canonicalJSON(c.Arguments)))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// canonicalJSON is s re-serialised with sorted keys and no spaces, or s
// trimmed when it is not JSON.
func canonicalJSON(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return strings.TrimSpace(s)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return strings.TrimSpace(s)
	}
	return string(out)
}

// ReasoningMemory keeps the reasoning of the replies the server produced,
// keyed by what a client sends back of them, bounded in bytes (least
// recently used first out) and in time. The zero value keeps nothing;
// NewReasoningMemory makes a usable one. It is safe for concurrent use.
type ReasoningMemory struct {
	maxBytes int
	ttl      time.Duration
	now      func() time.Time

	mu    sync.Mutex
	byKey map[[32]byte]*list.Element
	lru   list.List // of *memEntry, most recent at the front
	bytes int
}

type memEntry struct {
	key       [32]byte
	reasoning string
	expires   time.Time
}

// Reasoning memory defaults: enough for thousands of agent steps.
const (
	DefaultReasoningBytes = 16 << 20
	DefaultReasoningTTL   = time.Hour
)

// NewReasoningMemory keeps up to maxBytes of reasoning, each for ttl; now
// is the clock (nil: time.Now).
func NewReasoningMemory(maxBytes int, ttl time.Duration, now func() time.Time) *ReasoningMemory {
	if now == nil {
		now = time.Now
	}
	return &ReasoningMemory{maxBytes: maxBytes, ttl: ttl, now: now, byKey: map[[32]byte]*list.Element{}}
}

// Remember keeps reply's reasoning (a reply without reasoning, or larger
// than the whole budget, is not kept).
func (m *ReasoningMemory) Remember(reply Reply) {
	if m == nil || m.byKey == nil || reply.Reasoning == "" || len(reply.Reasoning) > m.maxBytes {
		return
	}
	key := replyKey(reply.Content, reply.Calls)
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.byKey[key]; ok {
		m.remove(el)
	}
	e := &memEntry{key: key, reasoning: reply.Reasoning, expires: m.now().Add(m.ttl)}
	m.byKey[key] = m.lru.PushFront(e)
	m.bytes += len(e.reasoning)
	for m.bytes > m.maxBytes {
		m.remove(m.lru.Back())
	}
}

// Recall returns the reasoning kept for the assistant turn with content
// and calls.
func (m *ReasoningMemory) Recall(content string, calls []Call) (string, bool) {
	if m == nil || m.byKey == nil {
		return "", false
	}
	key := replyKey(content, calls)
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byKey[key]
	if !ok {
		return "", false
	}
	e := el.Value.(*memEntry)
	if !m.now().Before(e.expires) {
		m.remove(el)
		return "", false
	}
	m.lru.MoveToFront(el)
	return e.reasoning, true
}

// Bytes is the reasoning held now.
func (m *ReasoningMemory) Bytes() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

func (m *ReasoningMemory) remove(el *list.Element) {
	e := m.lru.Remove(el).(*memEntry)
	delete(m.byKey, e.key)
	m.bytes -= len(e.reasoning)
}

// memory returns the assets' reasoning memory, made with the defaults on
// first use when none was set.
func (a *Assets) memory() *ReasoningMemory {
	a.memOnce.Do(func() {
		if a.Memory == nil {
			a.Memory = NewReasoningMemory(DefaultReasoningBytes, DefaultReasoningTTL, nil)
		}
	})
	return a.Memory
}

// Remember keeps a generated reply's reasoning for re-attachment (see
// ReasoningMemory).
func (a *Assets) Remember(reply Reply) { a.memory().Remember(reply) }

// reattach returns msgs (normalised) with each assistant turn that comes
// without reasoning given the reasoning kept for it, when there is some;
// msgs themselves are not modified.
func (a *Assets) reattach(msgs []any) []any {
	mem := a.memory()
	out, copied := msgs, false
	for i, m := range msgs {
		d, ok := m.(*templates.Dict)
		if !ok {
			continue
		}
		if role, _ := d.Get("role"); role != "assistant" {
			continue
		}
		if r, _ := d.Get("reasoning_content"); r != nil && r != "" {
			continue
		}
		content, _ := d.Get("content")
		text, _ := content.(string)
		reasoning, ok := mem.Recall(text, a.callsOf(d))
		if !ok {
			continue
		}
		if !copied {
			out, copied = append([]any(nil), msgs...), true
		}
		nd := templates.NewDict(d.Len() + 1)
		d.Range(func(k, v any) bool {
			nd.Set(k.(string), v)
			return true
		})
		nd.Set("reasoning_content", reasoning)
		out[i] = nd
	}
	return out
}

// callsOf reads a normalised assistant message's tool calls (arguments an
// object or JSON text).
func (a *Assets) callsOf(d *templates.Dict) []Call {
	v, _ := d.Get("tool_calls")
	list, _ := v.([]any)
	var calls []Call
	for _, c := range list {
		cd, ok := c.(*templates.Dict)
		if !ok {
			continue
		}
		fv, _ := cd.Get("function")
		fd, ok := fv.(*templates.Dict)
		if !ok {
			continue
		}
		name, _ := fd.Get("name")
		ns, _ := name.(string)
		args, _ := fd.Get("arguments")
		text, ok := args.(string)
		if !ok {
			text, _ = a.json.dumps(args)
		}
		calls = append(calls, Call{Name: ns, Arguments: text})
	}
	return calls
}
