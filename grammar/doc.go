// Package grammar is troupe's constrained-decoding engine: grammars whose
// terminals are byte classes, a Matcher that follows one output through a
// grammar byte by byte, and token masks computed by walking a trie of the
// vocabulary's bytes with the Matcher.
//
// # Why bytes, and why Earley
//
// Tokens do not respect lexemes: one token may close a JSON string, add a
// comma and open the next key. A grammar over bytes makes a token just a
// path of bytes, so a token spanning several lexemes needs nothing special,
// and the grammars of every source (JSON Schema, regular expressions,
// llama.cpp's GBNF) are the same kind of object. The recognizer is Earley's
// algorithm (with Aycock and Horspool's handling of empty rules): it takes
// any context-free grammar, ambiguous or left-recursive, with no conflicts
// to resolve at compile time, and keeps one set per byte so that a mask's
// trie walk can take a token's bytes and undo them by truncation.
// Repetitions compile to left-recursive rules, which Earley runs in a
// constant number of items per byte.
//
// # Masks inside free strings
//
// Inside a JSON string of free content (Builder.JSONText) nearly every token
// is allowed, and walking them all costs one Earley step per trie node. The
// Vocab knows, for each token, from which byte on it is plain string content
// (whole characters JSON writes raw, possibly ending inside one more); when
// the walk reaches a node where the Matcher is inside free content, the
// tokens below whose tail from there is plain are allowed at once (tokens in
// depth-first order, a node's subtree a range), and only subtrees holding
// other tokens (quotes, backslashes, control bytes) are walked. TestMaskExact
// checks the result against taking every token's bytes.
//
// # Strictness
//
// A compiler that cannot express a constraint fails with an error that names
// it; it never emits a looser grammar. The mask allows a token only if every
// one of its bytes is accepted, and EOS only where the grammar can end.
package grammar
