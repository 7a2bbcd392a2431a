// Package tokenizer implements Hugging Face tokenizer.json in Go, giving
// exactly the ids, tokens, byte offsets and decodes of the Hugging Face Rust
// tokenizers (the version the parity fixtures were made with is 0.23.2), and
// the transformers (AutoTokenizer) behaviour on top of it that troupe serves
// with.
//
// # Pipeline
//
// Encoding follows the Rust TokenizerImpl step by step:
//
//  1. Added tokens are split out of the input (AddedVocabulary): first the
//     non-normalized ones on the raw text, then, after normalization, the
//     normalized ones. Matching is leftmost-longest (Aho-Corasick in Rust, a
//     byte trie here) with the single_word / lstrip / rstrip rules.
//  2. The normalizer (NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents,
//     Prepend, Replace, BertNormalizer, Sequence) rewrites each remaining
//     segment. When offsets are wanted every normalized byte carries the
//     original span it came from, with the same alignment rules as the Rust
//     NormalizedString (inserted characters take the previous character's
//     span, a composed character the span of its starter, a replacement the
//     span of the last byte it replaced, reordered combining marks the spans
//     in source order). Unicode normalization follows the Rust crate, which
//     never inserts U+034F into long runs of combining marks.
//  3. The pre-tokenizer (Split, ByteLevel, Metaspace, Digits, Punctuation,
//     Whitespace, WhitespaceSplit, Sequence) cuts segments into words.
//  4. The BPE model merges each word (byte-level as in GPT-2, Llama 3, Qwen,
//     DeepSeek and gpt-oss; SentencePiece-style with byte fallback as in
//     Llama 2 and Gemma; ignore_merges, fuse_unk, continuing_subword_prefix,
//     end_of_word_suffix). Merges are applied in the exact order of the Rust
//     Word::merge_all (a heap on rank, then position, with the same test for
//     stale entries), and merged words are cached.
//  5. The post-processor (TemplateProcessing, ByteLevel, Sequence) adds the
//     special tokens and trims offsets.
//
// Unsupported components (other models such as Unigram or WordPiece, other
// normalizers, pre-tokenizers, post-processors and decoders, BPE dropout)
// fail at load time with an error naming the component. Truncation and
// padding in tokenizer.json are not applied: serving decides lengths
// itself.
//
// # Speed
//
// The serving path is EncodeIDs/AppendIDs, which builds no token strings,
// offsets or alignments. The pre-tokenizer regexes of the common families
// (GPT-2, cl100k/Llama 3, Qwen2/3, o200k/gpt-oss, DeepSeek-V3) are matched by
// hand-written matchers that follow Oniguruma's backtracking step by step
// (Go's regexp has no look-ahead); any other pattern runs on regexp2. A
// differential test and fuzz target check the hand-written matchers against
// regexp2. ByteLevel words are merged from their raw bytes (no mapped
// string is built), the merge table is an open-addressing hash of id pairs,
// and the vocabulary keeps every token in one string so loading allocates
// little.
//
// # Decoding and streaming
//
// Decoders (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
// Sequence) are written once, as streaming stages that hold back only what
// a later token can still change: an unfinished run of byte-fallback tokens
// (the Rust decoder turns an invalid run into one U+FFFD per byte), an
// incomplete UTF-8 sequence of ByteLevel bytes (decoded like
// String::from_utf8_lossy), trailing characters a Strip may remove. Decode
// pushes all ids through them; a StreamDecoder pushes one at a time. The
// streamed deltas therefore never split a character and always concatenate
// to exactly Decode's result.
//
// # transformers semantics
//
// Unless Options.Raw is set, Load applies what transformers does with
// tokenizer_config.json: the Llama and Gemma tokenizer classes (and any
// class setting add_bos_token or add_eos_token to true) replace the
// post-processor by TemplateProcessing "[bos] $A [eos]" as
// update_post_processor does (so DeepSeek-V3 gets its BOS), and
// clean_up_tokenization_spaces post-processes decoded text (" ." -> ".",
// " n't" -> "n't", ...), also when streaming.
//
// # GGUF files
//
// LoadGGUF (and LoadGGUFFile, LoadPath) builds the same Tokenizer from a
// GGUF file's tokenizer.ggml.* metadata, encoding as llama.cpp's
// llama_tokenize does, with the same machinery: tokenizer.ggml.model "gpt2"
// is byte-level BPE over tokenizer.ggml.merges after the pre-tokenizer
// regexes tokenizer.ggml.pre names (llama.cpp's table, GGUFPreTokenizers,
// with the Hugging Face originals of the regexes llama.cpp rewrote);
// "llama" is SentencePiece-style BPE whose merges are derived from
// tokenizer.ggml.scores (a pair merges when its concatenation is a token;
// the highest score first and, on equal scores, the leftmost pair, as in
// llama.cpp's llm_tokenizer_spm), with <0xNN> byte fallback and a "▁"
// prepended to every text segment. CONTROL, USER_DEFINED and UNKNOWN
// tokens are added tokens (the first and last special). The parity suite
// compares every case of the GGUF fixtures with llama-tokenize, with and
// without special-token parsing (EncodeSplitSpecial). GGUFChatTemplate
// reads tokenizer.chat_template.
//
// # Input text
//
// Go strings may hold invalid UTF-8; each invalid byte is replaced by
// U+FFFD before encoding (Rust strings are always valid), and offsets refer
// to the repaired text.
//
// An adapter for github.com/daulet/tokenizers (the Rust library through
// cgo) implements the same Codec interface behind the build tag
// hftokenizers, for users who have its native library.
package tokenizer
