package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The agent loop: one conversation of Steps steps, each a request whose
// reply is (reasoning and) a tool call, answered by a tool result in the
// next request, as an agent framework drives a model. Like the official
// SDKs, the client sends back the reply's text and tool calls and drops its
// reasoning (KeepReasoning sends it back). Each step reports what the
// server said it computed: the prompt tokens less the cached ones.

// Agent-loop APIs.
const (
	APIChat      = "chat"      // POST /v1/chat/completions
	APIResponses = "responses" // POST /v1/responses
	APIMessages  = "messages"  // POST /v1/messages (Anthropic)
)

// AgentConfig describes an agent-loop run.
type AgentConfig struct {
	URL, Model, APIKey string
	// API is APIChat, APIResponses or APIMessages.
	API   string
	Steps int
	// MaxTokens bounds each reply (default 256).
	MaxTokens int
	// ToolDelay is the simulated tool's latency between a reply and the
	// next request (what lets the server warm the next step's history up).
	ToolDelay time.Duration
	// KeepReasoning sends each reply's reasoning back with it.
	KeepReasoning bool
	// ForceTool asks for a tool call every step (tool_choice "required",
	// Anthropic's {"type": "any"}), for models that would not call one.
	ForceTool bool
	// Kwargs are chat_template_kwargs sent with every chat request, e.g.
	// {"preserve_thinking": false}.
	Kwargs map[string]any
	// AfterStep, when set, is called after each step (before the tool
	// delay): progress reports, or a test's wait.
	AfterStep func(AgentStep)
	Timeout   time.Duration // per request; 0 means 5 minutes
	Client    *http.Client
}

// AgentStep is one step's figures.
type AgentStep struct {
	Step       int `json:"step"`
	Prompt     int `json:"prompt_tokens"`
	Cached     int `json:"cached_tokens"`
	Computed   int `json:"computed_tokens"`
	Completion int `json:"completion_tokens"`
	ToolCalls  int `json:"tool_calls"`
	// Reasoning is the reply's reasoning text length in bytes.
	Reasoning int     `json:"reasoning_bytes"`
	LatencyMs float64 `json:"latency_ms"`
	// ToolResult is the text the tool answered (the next step's new
	// message).
	ToolResult string `json:"tool_result"`
	// Reply is the reply as the client received it, reasoning apart: its
	// text, then each tool call as name and arguments on a line.
	Reply string `json:"reply"`
}

// addCall appends a tool call to the step's reply text.
func (s *AgentStep) addCall(name, args string) { s.Reply += "\n" + name + " " + args }

// AgentReport is an agent-loop run's result.
type AgentReport struct {
	API   string      `json:"api"`
	Steps []AgentStep `json:"steps"`
}

// agentTool is the loop's one tool.
var agentTool = struct{ name, description string }{"lookup", "Look something up and return what was found."}

func agentSchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string", "maxLength": 40}},
		"required": []string{"query"}, "additionalProperties": false}
}

// toolResult is the simulated tool's answer at a step.
func toolResult(step int) string {
	return fmt.Sprintf("Result %d: the lookup found %d matching records, the first dated 2026-%02d-%02d.", step, 3+step*7%11, 1+step%12, 1+step*5%28)
}

// AgentLoop runs an agent loop against a server.
func AgentLoop(ctx context.Context, cfg AgentConfig) (*AgentReport, error) {
	if cfg.Steps < 1 {
		return nil, errors.New("agent loop: steps must be at least 1")
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 256
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	var c agentClient
	switch cfg.API {
	case APIChat:
		c = &chatAgent{cfg: cfg}
	case APIResponses:
		c = &responsesAgent{cfg: cfg}
	case APIMessages:
		c = &messagesAgent{cfg: cfg}
	default:
		return nil, fmt.Errorf("agent loop: unknown API %q (chat, responses or messages)", cfg.API)
	}
	c.start("Find the records about the " + cfg.API + " migration, then summarise them. Use the lookup tool.")
	rep := &AgentReport{API: cfg.API}
	for i := 1; i <= cfg.Steps; i++ {
		body, path := c.request()
		t0 := time.Now()
		out, err := post(ctx, cfg, path, body)
		if err != nil {
			return rep, fmt.Errorf("agent loop step %d: %w", i, err)
		}
		st, err := c.reply(out)
		if err != nil {
			return rep, fmt.Errorf("agent loop step %d: %w", i, err)
		}
		st.Step, st.LatencyMs = i, float64(time.Since(t0).Microseconds())/1000
		st.Computed = st.Prompt - st.Cached
		st.ToolResult = toolResult(i)
		c.answer(st.ToolResult)
		rep.Steps = append(rep.Steps, st)
		if cfg.AfterStep != nil {
			cfg.AfterStep(st)
		}
		if cfg.ToolDelay > 0 && i < cfg.Steps {
			select {
			case <-time.After(cfg.ToolDelay):
			case <-ctx.Done():
				return rep, ctx.Err()
			}
		}
	}
	return rep, nil
}

// Table renders the report for people.
func (r *AgentReport) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent loop over %s\n", r.API)
	fmt.Fprintf(&b, "step  prompt  cached  computed  completion  calls  latency_ms\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "%4d  %6d  %6d  %8d  %10d  %5d  %10.1f\n", s.Step, s.Prompt, s.Cached, s.Computed, s.Completion, s.ToolCalls, s.LatencyMs)
	}
	return b.String()
}

func post(ctx context.Context, cfg AgentConfig, path string, body map[string]any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(cfg.URL, "/")+path, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		req.Header.Set("x-api-key", cfg.APIKey)
	}
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("HTTP %d: %.500s", resp.StatusCode, out)
	}
	return out, nil
}

// agentClient is one API's side of the loop: its history and shapes.
type agentClient interface {
	start(task string)
	request() (body map[string]any, path string)
	reply(body []byte) (AgentStep, error)
	answer(result string) // the tool's result for the last reply's calls
}

// chatAgent speaks OpenAI chat completions.
type chatAgent struct {
	cfg   AgentConfig
	msgs  []map[string]any
	calls []string // the last reply's call ids
}

func (a *chatAgent) start(task string) {
	a.msgs = []map[string]any{{"role": "user", "content": task}}
}

func (a *chatAgent) request() (map[string]any, string) {
	body := map[string]any{"model": a.cfg.Model, "messages": a.msgs, "max_tokens": a.cfg.MaxTokens, "temperature": 0,
		"tools": []map[string]any{{"type": "function", "function": map[string]any{
			"name": agentTool.name, "description": agentTool.description, "parameters": agentSchema()}}}}
	if a.cfg.Kwargs != nil {
		body["chat_template_kwargs"] = a.cfg.Kwargs
	}
	if a.cfg.ForceTool {
		body["tool_choice"], body["parallel_tool_calls"] = "required", false
	}
	return body, "/v1/chat/completions"
}

func (a *chatAgent) reply(out []byte) (AgentStep, error) {
	var r struct {
		Choices []struct {
			Message struct {
				Content   *string           `json:"content"`
				Reasoning string            `json:"reasoning_content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Details    struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Choices) == 0 {
		return AgentStep{}, fmt.Errorf("bad chat completion %.300s: %v", out, err)
	}
	m := r.Choices[0].Message
	// what the SDK sends back: the message as received, reasoning dropped
	back := map[string]any{"role": "assistant", "content": m.Content}
	if len(m.ToolCalls) > 0 {
		back["tool_calls"] = m.ToolCalls
	}
	if a.cfg.KeepReasoning && m.Reasoning != "" {
		back["reasoning_content"] = m.Reasoning
	}
	a.msgs = append(a.msgs, back)
	st := AgentStep{Prompt: r.Usage.Prompt, Cached: r.Usage.Details.Cached, Completion: r.Usage.Completion,
		ToolCalls: len(m.ToolCalls), Reasoning: len(m.Reasoning)}
	if m.Content != nil {
		st.Reply = *m.Content
	}
	a.calls = a.calls[:0]
	for _, c := range m.ToolCalls {
		var call struct {
			ID       string
			Function struct{ Name, Arguments string }
		}
		json.Unmarshal(c, &call)
		a.calls = append(a.calls, call.ID)
		st.addCall(call.Function.Name, call.Function.Arguments)
	}
	return st, nil
}

func (a *chatAgent) answer(result string) {
	if len(a.calls) == 0 {
		a.msgs = append(a.msgs, map[string]any{"role": "user", "content": result})
		return
	}
	for _, id := range a.calls {
		a.msgs = append(a.msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": result})
	}
}

// responsesAgent speaks OpenAI Responses, keeping the history itself (no
// previous_response_id), as stateless clients do.
type responsesAgent struct {
	cfg   AgentConfig
	input []any
	calls []string
}

func (a *responsesAgent) start(task string) {
	a.input = []any{map[string]any{"role": "user", "content": task}}
}

func (a *responsesAgent) request() (map[string]any, string) {
	body := map[string]any{"model": a.cfg.Model, "input": a.input, "max_output_tokens": a.cfg.MaxTokens, "temperature": 0,
		"tools": []map[string]any{{"type": "function", "name": agentTool.name, "description": agentTool.description,
			"parameters": agentSchema()}}}
	if a.cfg.ForceTool {
		body["tool_choice"], body["parallel_tool_calls"] = "required", false
	}
	return body, "/v1/responses"
}

func (a *responsesAgent) reply(out []byte) (AgentStep, error) {
	var r struct {
		Output []json.RawMessage `json:"output"`
		Usage  struct {
			Input   int `json:"input_tokens"`
			Output  int `json:"output_tokens"`
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return AgentStep{}, fmt.Errorf("bad response %.300s: %v", out, err)
	}
	st := AgentStep{Prompt: r.Usage.Input, Cached: r.Usage.Details.Cached, Completion: r.Usage.Output}
	a.calls = a.calls[:0]
	for _, raw := range r.Output {
		var item struct {
			Type      string `json:"type"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Content   []struct {
				Text string `json:"text"`
			} `json:"content"`
			Summary []struct {
				Text string `json:"text"`
			} `json:"summary"`
		}
		if err := json.Unmarshal(raw, &item); err != nil {
			return AgentStep{}, err
		}
		switch item.Type {
		case "reasoning":
			for _, c := range item.Content {
				st.Reasoning += len(c.Text)
			}
			for _, c := range item.Summary {
				st.Reasoning += len(c.Text)
			}
			if !a.cfg.KeepReasoning {
				continue
			}
		case "function_call":
			st.ToolCalls++
			a.calls = append(a.calls, item.CallID)
			st.addCall(item.Name, item.Arguments)
		case "message":
			for _, c := range item.Content {
				st.Reply += c.Text
			}
		}
		a.input = append(a.input, raw)
	}
	return st, nil
}

func (a *responsesAgent) answer(result string) {
	if len(a.calls) == 0 {
		a.input = append(a.input, map[string]any{"role": "user", "content": result})
		return
	}
	for _, id := range a.calls {
		a.input = append(a.input, map[string]any{"type": "function_call_output", "call_id": id, "output": result})
	}
}

// messagesAgent speaks Anthropic Messages.
type messagesAgent struct {
	cfg   AgentConfig
	msgs  []map[string]any
	calls []string
}

func (a *messagesAgent) start(task string) {
	a.msgs = []map[string]any{{"role": "user", "content": task}}
}

func (a *messagesAgent) request() (map[string]any, string) {
	body := map[string]any{"model": a.cfg.Model, "messages": a.msgs, "max_tokens": a.cfg.MaxTokens, "temperature": 0,
		"tools": []map[string]any{{"name": agentTool.name, "description": agentTool.description, "input_schema": agentSchema()}}}
	if a.cfg.ForceTool {
		body["tool_choice"] = map[string]any{"type": "any", "disable_parallel_tool_use": true}
	}
	return body, "/v1/messages"
}

func (a *messagesAgent) reply(out []byte) (AgentStep, error) {
	var r struct {
		Content []json.RawMessage `json:"content"`
		Usage   struct {
			Input         int `json:"input_tokens"`
			Output        int `json:"output_tokens"`
			CacheRead     int `json:"cache_read_input_tokens"`
			CacheCreation int `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return AgentStep{}, fmt.Errorf("bad message %.300s: %v", out, err)
	}
	st := AgentStep{Prompt: r.Usage.Input + r.Usage.CacheRead + r.Usage.CacheCreation, Cached: r.Usage.CacheRead,
		Completion: r.Usage.Output}
	var back []json.RawMessage
	a.calls = a.calls[:0]
	for _, raw := range r.Content {
		var block struct {
			Type     string          `json:"type"`
			ID       string          `json:"id"`
			Name     string          `json:"name"`
			Input    json.RawMessage `json:"input"`
			Text     string          `json:"text"`
			Thinking string          `json:"thinking"`
		}
		if err := json.Unmarshal(raw, &block); err != nil {
			return AgentStep{}, err
		}
		switch block.Type {
		case "thinking", "redacted_thinking":
			st.Reasoning += len(block.Thinking)
			if !a.cfg.KeepReasoning {
				continue
			}
		case "tool_use":
			st.ToolCalls++
			a.calls = append(a.calls, block.ID)
			st.addCall(block.Name, string(block.Input))
		case "text":
			st.Reply += block.Text
		}
		back = append(back, raw)
	}
	a.msgs = append(a.msgs, map[string]any{"role": "assistant", "content": back})
	return st, nil
}

func (a *messagesAgent) answer(result string) {
	if len(a.calls) == 0 {
		a.msgs = append(a.msgs, map[string]any{"role": "user", "content": result})
		return
	}
	var blocks []map[string]any
	for _, id := range a.calls {
		blocks = append(blocks, map[string]any{"type": "tool_result", "tool_use_id": id, "content": result})
	}
	a.msgs = append(a.msgs, map[string]any{"role": "user", "content": blocks})
}
