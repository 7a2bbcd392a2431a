// Package termchat is the terminal chat behind `troupe chat`: a streaming
// client for an OpenAI-compatible /v1/chat/completions endpoint, the input
// rules of the prompt (multi-line blocks, slash commands) and the REPL that
// ties them to a conversation history.
//
// It is shaped after `ollama run`: a ">>> " prompt, replies streamed as they
// are generated, a line starting with """ opening a block that a line
// ending with """ closes, /bye and Ctrl-D to leave, and Ctrl-C stopping the
// reply in progress rather than the program. Unlike ollama it keeps an
// interrupted reply in the history when any of it was shown (so the model
// sees what the user saw and the roles keep alternating); a reply
// interrupted before its first word is dropped together with its question.
//
// There is one client path: `troupe chat --url` talks to a server over HTTP,
// and `troupe chat MODEL` starts the runtime in-process behind a loopback
// HTTP server and talks to that the same way, so everything here is
// exercised against a plain HTTP fake in the tests. The package reads
// lines in the terminal's own (cooked) mode: the terminal does the line
// editing and turns Ctrl-C into SIGINT, which the caller forwards as
// Config.Interrupt; no raw mode is entered, so nothing needs restoring if
// the program dies.
//
// Server-sent events are parsed as the WHATWG HTML specification describes
// them (fields, multi-line data, comments, an event dispatched at a blank
// line), with each event bounded in size because the server is not trusted
// with the client's memory; reasoning arrives as delta.reasoning_content
// (troupe, vLLM, DeepSeek) or delta.reasoning (OpenRouter, newer vLLM) and
// is never sent back in the history, as DeepSeek's API asks.
package termchat
