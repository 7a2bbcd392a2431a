// Package anthropic serves Anthropic's Messages API (POST /v1/messages and
// POST /v1/messages/count_tokens) so that Anthropic's SDKs and the tools
// built on them can talk to a local model unchanged.
//
// It is a thin translator, like http/openai: a Messages body becomes the
// one internal chat.Request (system text as a leading system message,
// tool_use blocks as OpenAI-style tool_calls, tool_result blocks as "tool"
// messages, thinking blocks as reasoning_content, custom tools as function
// tools), because that is the shape the models' chat templates were
// written for; rendering and tokenizing stay with the runtime's preparers,
// and generation, output processing (stop strings, <think> reasoning, tool
// calls) and metrics with http/turn, shared with every other route. Only
// the request translation and the answer's shape are Anthropic's.
//
// The answer follows the upstream API's observable behaviour: max_tokens is
// required, temperature is 0..1; usage splits the prompt into
// cache_read_input_tokens (served from the prompt cache),
// cache_creation_input_tokens (written to it at the request's cache_control
// breakpoints) and input_tokens (the rest), which add up to the prompt; content is
// thinking, then text, then tool_use blocks; stop_reason is end_turn,
// max_tokens, stop_sequence (with the matched stop_sequence) or tool_use.
// A stream is message_start, ping, per block content_block_start,
// deltas (text_delta, thinking_delta then signature_delta, input_json_delta)
// and content_block_stop, then message_delta (stop reason and final usage)
// and message_stop, with ping events while the model is silent; every event
// has an event: line, since Anthropic's clients dispatch on it. message_start
// waits for the first token (or the first keep-alive) so that its usage
// already counts the cached prompt tokens; message_delta repeats the final
// numbers. Errors are Anthropic's {"type":"error","error":{...}} shape, as
// the JSON answer before a stream begins and as an error event after.
//
// What a local model cannot honour is accepted where it changes nothing
// about the shape, and refused where it would: thinking signatures are a
// digest of the thinking text, and any signature is accepted back;
// budget_tokens is checked (>= 1024, < max_tokens) but not enforced;
// tool_choice "any" and "tool" are enforced with a grammar of the
// template's tool-call syntax (the arguments follow the tool's input_schema);
// redacted_thinking blocks are dropped, and a tool_result's is_error is
// checked but not shown to the model; image and document blocks, and
// server tools, are refused with a 400 naming them. A final assistant
// message is rendered as a finished turn, not continued as a prefill.
//
// Prompt caching: cache_control ({"type": "ephemeral"}, with an optional
// "ttl" of "5m" or "1h") is honoured where Anthropic documents it: on
// tools, on system blocks (system as an array of text blocks), and on
// messages' content blocks (text, tool_use, tool_result, and the text
// blocks inside a tool_result, which mark the tool_result). It is a 400
// naming the field when it is not an object, has another type or TTL,
// sits on a thinking or redacted_thinking block, or when more than four
// blocks carry one; count_tokens validates the same way. Each breakpoint
// becomes a chat.Breakpoint: the conversation up to and including the
// marked block (tools: the tools up to the marked one), which the preparer
// resolves to a token position of the rendered prompt, the common token
// prefix of the prompt and that prefix rendered with two different
// placeholder continuations, so that it is exact whatever the template
// writes around a message (see chat.Assets.Prepare). With the prompt cache
// on, the scheduler keeps each prefix as soon as prefill has computed it:
// dense-KV models insert its pages into the prefix index and pin them
// ahead of LRU eviction for the TTL (pins give way only when nothing
// unpinned is left to evict; see kvcache.Index.Pin), a cache hit pinning
// again; snapshot-reuse models stop prefill at the breakpoint and store a
// snapshot there that later snapshots of the conversation do not
// supersede, evicted in LRU order within the snapshot budget (the TTL does
// not apply). cache_creation_input_tokens is the prompt up to the last
// breakpoint less what was read from the cache (0 without breakpoints, or
// with the prompt cache off, when breakpoints are ignored). Any prefix is
// reused whether or not it was marked, as before; breakpoints only decide
// what is kept, and for how long. Prefixes are positions of the rendered
// prompt, so a template that moves the tools or the system text (qwen3
// writes the tools after the system text) makes a breakpoint on a tool
// cover only the prompt the tools alone decide.
package anthropic
