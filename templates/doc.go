// Package templates renders Hugging Face chat templates exactly as
// transformers' apply_chat_template(..., tokenize=False) does, byte for
// byte, and computes the history boundary the prompt cache needs.
//
// # What it matches
//
// transformers compiles a chat template with
// jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True,
// lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols]), replaces
// the tojson filter with json.dumps(x, ensure_ascii=False, indent=...,
// separators=..., sort_keys=...), adds the globals raise_exception (raises
// TemplateError) and strftime_now (datetime.now().strftime), and renders
// with messages, tools and documents (None when absent),
// add_generation_prompt, the tokenizer's special_tokens_map and any extra
// keyword arguments. This package reproduces that environment (jinja2
// 3.1.x semantics, Python 3.11 value semantics):
//
//   - the lexer rules: trim_blocks, lstrip_blocks, "-"/"+" whitespace
//     control, comments, {% raw %}, newline normalisation and the dropped
//     trailing newline;
//   - the grammar and precedence of jinja2's parser (filters bind tighter
//     than arithmetic, "is" tests tighter than "not", conditional
//     expressions anywhere an expression may stand, implicit tuples), and
//     the statements if/for (else, if-filter, recursive, loop.*),
//     set (including namespace attributes and block sets), macro (defaults,
//     varargs, kwargs, caller), call, filter, with, break/continue, block,
//     generation; include/import/extends parse and fail as they do without
//     a loader;
//   - jinja2's scoping (loop bodies and macros get their own scope, "if"
//     does not) and Undefined (prints empty, is false, iterates empty,
//     raises UndefinedError with jinja2's message when used otherwise);
//   - the sandbox: attribute lookup tries the Python attribute first, then
//     the item (dict.items is the method); dunder attributes and the methods
//     that mutate lists and dicts give the sandbox's unsafe undefined
//     (SecurityError when used); values are never modified; there is no
//     reflection, file or network access at all;
//   - Python semantics for str, int (arbitrary precision), float (repr),
//     list, tuple, dict (insertion order), None and bool: operators and their
//     TypeErrors, comparisons, "in", truthiness, str() and repr(), slicing,
//     str methods (strip, split with and without maxsplit, replace,
//     startswith, find, format, ...), dict methods (items, keys, values,
//     get), json.dumps, %-formatting and strftime (glibc, C locale);
//   - jinja2's filters and tests, with transformers' tojson.
//
// Errors are *Error values whose Type is the Python exception class jinja2
// raises (TemplateError for raise_exception, also matched by ErrRaised;
// TypeError, UndefinedError, TemplateSyntaxError, ...) and whose Message is
// jinja2's wording for the failures chat templates hit.
//
// # Design
//
// The package is its own small template engine: a lexer, a parser that
// follows jinja2's parser production by production, and a tree-walking
// evaluator over plain Go values (nil, bool, int64, *big.Int, float64,
// string, []any, *Dict). DESIGN.md beside this file explains why it does
// not build on github.com/nikolalohinski/gonja/v2, with the measured parity
// of each option. A Template is immutable after Compile and safe for
// concurrent renders; each render has its own scopes and output buffer.
// Renders are bounded (Limits): output size, loop iterations and calls,
// recursion depth, range() size (the sandbox's own limit), and the size of
// strings and lists built by operators.
//
// Request JSON should be decoded with DecodeJSON, which keeps object key
// order and Python's int/float distinction (a tool argument 1.0 renders as
// 1.0 through tojson).
//
// # History boundary
//
// For a request whose messages contain an assistant message, the history
// boundary H is the render of the messages up to and including the last
// assistant message with add_generation_prompt=false. When H's tokens are a
// prefix of the full prompt's tokens, a model-state snapshot taken after H
// is reusable by the conversation's next turn. HistoryBoundary renders H and
// compares it with the prompt, in characters and, given an EncodeFunc, in
// tokens.
//
// # Where templates come from
//
// LoadModelTemplates finds a model folder's templates as transformers does
// (chat_template.jinja, else tokenizer_config.json's chat_template string or
// named list, else chat_template.json) and Select picks "tool_use" when a
// request has tools; LoadSpecialTokens builds special_tokens_map. A model
// without a template is an error wrapping ErrNoTemplate.
package templates
