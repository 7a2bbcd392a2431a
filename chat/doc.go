// Package chat holds the one internal chat request every API translates
// into (OpenAI chat completions, Responses, Anthropic messages, prompt
// inspection) and the preparation algorithm the RequestPreparer actors run:
// render the chat template, tokenize, and — when asked — render and tokenize
// the history boundary. Because every route goes through Prepare, every route
// sees the same prompt, byte for byte and token for token (the design of
// Ollama's and mlxcel's routes).
//
// Whether the history boundary is rendered is decided by the caller (the
// preparer, from the model's capability), not here: this package is the
// algorithm, the actor owns the state.
package chat
