package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// TokenBytes returns the bytes token id adds to the decoded text when it
// follows other tokens (continuation position: no start-of-text rules such
// as SentencePiece dropping a leading space), exactly, even when they are
// not valid UTF-8 on their own (a byte-level BPE token holding part of a
// multi-byte character, a byte-fallback token <0x..>). ok is false for
// special tokens and ids out of range.
//
// The bytes are those of the decoder chain of tokenizer.json as
// NewContinuationDecoder runs it, so for any ids whose decoded bytes are
// valid UTF-8 the concatenation of TokenBytes equals the continuation
// decode. Where that text is not valid UTF-8 the decoder emits U+FFFD
// instead (an unfinished character, an invalid byte-fallback run); the raw
// bytes here are what a byte-level consumer such as a grammar engine needs.
//
// ok is also false for the tokens whose contribution depends on the tokens
// around them, which no single byte string can express:
//   - a Replace with a pattern of several characters after Fuse (an
//     occurrence can straddle tokens), or applied to a byte-fallback token;
//   - a Strip that removes trailing characters after Fuse (or ByteLevel),
//     for tokens ending with that character (dropped at the end of the
//     text), and a per-token Strip applied to a byte-fallback token (a run
//     of them is stripped as one token);
//   - a Replace or Metaspace with a non-ASCII pattern applied to a token
//     whose bytes are an incomplete UTF-8 sequence;
//   - any decoder this package does not know how to reduce to bytes
//     (every token then).
//
// None of the supported fixture families (byte-level BPE; SentencePiece
// BPE with Replace, ByteFallback, Fuse and Strip(start)) has such a
// decoder: there ok is false only for special tokens and unknown ids.
// Without a decoder, tokens are joined by spaces, so a token's bytes are a
// space followed by the token.
//
// clean_up_tokenization_spaces (on unless Options.Raw, when
// tokenizer_config.json asks for it) is a post-pass over the decoded text
// that deletes a space before some punctuation and contractions (" ." ->
// "."): it is not part of the decoder chain and TokenBytes does not apply
// it. Constrained output should be decoded without it (as with
// Options.Raw), or those spaces may be lost.
//
// The slice is shared (built once by AllTokenBytes) and must not be
// modified.
func (t *Tokenizer) TokenBytes(id int32) (b []byte, ok bool) {
	all := t.AllTokenBytes()
	if id < 0 || int(id) >= len(all) || all[id] == nil {
		return nil, false
	}
	return all[id], true
}

// AllTokenBytes returns TokenBytes of every id, indexed by id (length
// VocabSize): nil for special tokens, unused ids and tokens whose bytes
// depend on their neighbours, a non-nil (possibly empty) slice otherwise.
// It is built once, on the first call of AllTokenBytes or TokenBytes, and
// shared: neither the outer nor the inner slices may be modified.
func (t *Tokenizer) AllTokenBytes() [][]byte {
	t.tokBytesOnce.Do(func() { t.tokBytes = t.buildTokenBytes() })
	return t.tokBytes
}

func (t *Tokenizer) buildTokenBytes() [][]byte {
	var stages []stage
	if t.decoder != nil {
		stages = t.decoder.newStages()
	}
	if len(stages) == 0 {
		stages = []stage{&joinStage{}}
	}
	// A lone ByteLevel decoder (the byte-level BPE families) maps each
	// token on its own: decode straight into the table.
	_, byteLevelOnly := stages[0].(*byteLevelStage)
	byteLevelOnly = byteLevelOnly && len(stages) == 1
	n := len(t.idToTok)
	ends := make([]int, n) // end offset in buf; -1: not ok
	buf := make([]byte, 0, 8*n)
	for id := range n {
		ends[id] = -1
		if !t.hasTok[id] || t.special[id] {
			continue
		}
		if byteLevelOnly {
			buf = byteLevelDecode(buf, t.idToTok[id])
		} else {
			s, ok := continuationBytes(stages, t.idToTok[id])
			if !ok {
				continue
			}
			buf = append(buf, s...)
		}
		ends[id] = len(buf)
	}
	out := make([][]byte, n)
	start := 0
	for id, end := range ends {
		if end < 0 {
			continue
		}
		// Cap each slice so that an append by a caller cannot write into
		// the next token's bytes.
		out[id] = buf[start:end:end]
		start = end
	}
	return out
}

// continuationBytes reduces the decoder chain to what it does to one token
// in the middle of a text: the stages as NewContinuationDecoder configures
// them, with ByteLevel and ByteFallback yielding raw bytes instead of
// (lossily) decoded text. Strings here may hold any bytes.
func continuationBytes(stages []stage, tok string) (string, bool) {
	s := tok
	var (
		fused   bool // one token from here on: later stages see no token starts
		grouped bool // s is a byte-fallback byte, part of a run later stages see as one token
		partial bool // s is not valid UTF-8 on its own
	)
	for _, st := range stages {
		switch st := st.(type) {
		case *byteLevelStage:
			if grouped {
				return "", false
			}
			s = string(byteLevelDecode(nil, s))
			partial = !utf8.ValidString(s)
			// The stage joins everything into one text; in continuation
			// position none of it is the start of a token.
			fused = true
		case *byteFallbackStage:
			// Only token starts are byte tokens (not after Fuse).
			if !fused {
				if by, ok := parseByteToken(s); ok {
					s = string([]byte{by})
					grouped, partial = true, by >= utf8.RuneSelf
				}
			}
		case *fuseStage:
			fused = true
		case *replaceStage:
			switch {
			case st.pat == "":
			case utf8.RuneCountInString(st.pat) == 1:
				if partial && st.pat[0] >= utf8.RuneSelf {
					return "", false
				}
				s = strings.ReplaceAll(s, st.pat, st.content)
			default:
				if fused || grouped || partial {
					return "", false
				}
				s = strings.ReplaceAll(s, st.pat, st.content)
			}
		case *stripStage:
			if st.start == 0 && st.stop == 0 {
				continue
			}
			c := string(st.content)
			if fused {
				// Leading characters are stripped only at the start of the
				// text, trailing ones only at its end.
				if st.stop > 0 && (partial || strings.HasSuffix(s, c)) {
					return "", false
				}
				continue
			}
			if grouped {
				return "", false
			}
			for i := 0; i < st.start && strings.HasPrefix(s, c); i++ {
				s = s[len(c):]
			}
			for i := 0; i < st.stop && strings.HasSuffix(s, c); i++ {
				s = s[:len(s)-len(c)]
			}
		case *metaspaceStage:
			rep := string(st.rep)
			if partial && rep[0] >= utf8.RuneSelf {
				return "", false
			}
			// In continuation position every token is past the first,
			// except after Fuse, where all are one first token.
			with := " "
			if fused && st.stripFirst {
				with = ""
			}
			s = strings.ReplaceAll(s, rep, with)
		case *joinStage:
			s = " " + s
		default:
			return "", false
		}
	}
	return s, true
}
