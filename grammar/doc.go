// Package grammar is troupe's constrained-decoding engine: grammars whose
// terminals are byte classes, a Matcher that follows one output through a
// grammar byte by byte, and token masks computed by walking a trie of the
// vocabulary's bytes over the grammar's states, which the Matcher finds.
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
// # Masks: a walk over the vocabulary's trie
//
// A mask is the set of tokens whose every byte the grammar takes from the
// matcher's state (and EOS where it can end). The Vocab is a trie of the
// tokens' bytes, laid out flat in depth-first order, and Fill walks it from
// the matcher's state: tokens that share a prefix share its work, and a
// byte the state refuses prunes its whole subtree.
//
// # The grammar's states, learnt by the walks
//
// Running an Earley step per trie node is what made masks slow. But what
// an Earley set can still accept depends only on its live items (those
// with a symbol after the dot, and the start item that says the match can
// end) and, through completion, on the live items of their origin sets,
// recursively. So each set gets a 128-bit structural signature as it is
// built (the sum of a hash of each live item's production, dot and origin
// set's signature; Matcher.setSig), and sets with equal signatures are one
// state of the grammar. The grammar keeps these states (stateCache): what
// the walk needs of each (the bytes it takes, whether it can end, whether
// it is in free text) and the state each byte class leads to, learnt the
// first time a walk takes it. A walk follows learnt transitions (pointer
// loads) and runs the Matcher only to learn a new one, replaying the
// path's bytes from where the Matcher last agreed with it. Together the
// states are a lazily built DFA of the grammar's viable prefixes: the
// lexer layer of engines such as LLGuidance and XGrammar, found by the
// Earley parser itself rather than declared by the grammar, so that it
// covers keys, numbers, enums, patterns and GBNF alike. Bytes that every
// terminal of the grammar takes or refuses together form a class
// (Grammar.cls) and share transitions.
//
// A state's whole mask is cached too (up to 4 MiB of masks per grammar,
// least recently used dropped first): the state inside a string value, at
// an array's next element or an object's next key recurs along an output,
// and recurring costs one 16 KiB copy. States are bounded (8 MiB per
// grammar, then dropped and learnt anew) because a grammar with unbounded
// nesting never stops making new ones. The cache is per grammar, safe for
// concurrent Fills of several sequences (transitions and masks are atomic
// pointers, a mutex guards the map of states). Grammar.CacheStats reports
// it.
//
// Exactness rests on the signature: equal signatures mean equal futures
// (up to a 2^-128 chance of a false match per pair of states), and a byte
// class is taken to the identical set by every byte in it. Nothing else is
// approximated: every mask is the walk's, cached or not. TestMaskExact and
// TestMaskExactStates compare Fill with taking each token's bytes one by
// one at every byte of outputs of JSON Schema, regex and GBNF grammars, on
// a cold cache, a warm one, with transitions alone and with budgets so
// small that states and masks are dropped all the time; TestMaskConcurrent
// runs Fills at once.
//
// # Masks inside string content
//
// Inside a JSON string nearly every token is often allowed, and walking
// them all would visit the whole trie. The Vocab knows, for each token,
// from which byte on it is plain string content (whole characters JSON
// writes raw, possibly ending inside one more) and how many characters
// that tail has. The grammar marks its text alternatives (Builder.TextAlt):
// items before a character that say "any plain text of up to n characters
// is taken from here, each character leading to such a state again"
// (n unbounded for free content, the search semantics' surroundings of a
// pattern, a key that may be any other string, or any state of a pattern's
// automaton from which every plain character keeps it alive; n the
// characters left under maxLength). Matcher.TextBudget reads it off a set;
// a bounded budget counts only where nothing else in the set takes a plain
// character, so that a longer tail is known to be refused. When the walk
// reaches a node in such a state, the tokens whose plain tail starts there
// and fits are allowed at once (a list per node; at the root, a mask per
// small budget), and only subtrees holding other tokens (quotes,
// backslashes, control bytes) are walked. Where the root is not in free
// text but some of its children are (a key's first character), the plain
// tokens below those children are set at once, or every plain token is set
// and those below the other children cleared.
//
// # Grammars whose states repeat
//
// States are only shared when sets look alike, so the compilers write
// string content the way Earley keeps small: automata over characters
// (patterns, formats, pattern-property keys, and length counts up to 1024)
// as left-linear rules, R_t → R_q c, whose items inside the content all
// start where the content starts, so two positions in one automaton state
// are one grammar state (a right-linear chain would leave an item per
// character, and the closing quote would complete them all); large
// automata stay right-linear so the start does not predict every state.
// Objects in the schema's order predict the next key's alternatives only
// after its comma, and give each additional property one parse.
//
// # What remains slow
//
// A state first met costs a walk, and its transitions each an Earley step.
// The first visits that still cost a millisecond or more: a string under a
// pattern whose classes leave out some plain characters (\w, [^\s], an
// email's local part: no text fast path, the walk visits every token made
// of those characters), key positions of large objects (each position is a
// new context, and its names' trie is learnt again), and sets of hundreds
// of items (a value inside deeply nested free JSON). BenchmarkMask and
// BenchmarkMaskBench report the figures, cold per schema.
//
// # Strictness
//
// A compiler that cannot express a constraint fails with an error that names
// it; it never emits a looser grammar. The mask allows a token only if every
// one of its bytes is accepted, and EOS only where the grammar can end.
//
// # From a request to a sequence's masks
//
// A request's constraint is data, a Spec (a schema, free JSON, a regex, a
// choice, GBNF, literal text, and sequences and alternatives of those, so a
// tool call is its template's literal text around the arguments' schema),
// inside a Plan that says where in the output it applies: from the first
// token; after a reasoning block (After, and Open when the model may open
// the block itself); or lazily, each time the output contains a trigger
// such as <tool_call> (strict tools under tool_choice auto). A Plan
// travels as JSON in the scheduler's job, so a cluster gateway's preparer
// compiles it once to refuse a bad one with a 400 and the replica that runs
// the job compiles it again from the same bytes (Cache). Guides holds one
// model's vocabulary trie and compiled plans; a Guide follows one sequence:
// its Mask is computed on another goroutine while the forward pass runs,
// and Accept takes the token the sampler chose under that mask. Triggers
// are KMP automata over bytes; a token that completes one and runs past it
// is allowed only if its bytes after the trigger are the grammar's.
//
// # JSON Schema in full
//
// Objects: properties in any order (a rule per subset written, so each
// once and the required ones before the end) up to six declared
// properties, and up to ten within a budget per schema, else in the
// schema's order; additional properties anywhere; dependentRequired and
// property counts through the same subsets. patternProperties and patterns
// with length bounds go through deterministic automata over characters
// (keys.go): each pattern with search semantics, in product with the
// declared names' trie or a character count, each transition a JSONChar,
// so keys written with escapes mean their decoded characters.
package grammar
