package tokenizer

import "strings"

// StreamDecoder detokenizes incrementally: Add takes one id and returns the
// text it completes. Deltas never split a UTF-8 character, a byte-fallback
// sequence or a ByteLevel multi-byte character; text that a later token can
// still change is held back until it is settled. The concatenation of every
// Add and the final Flush is exactly Decode of all ids. A StreamDecoder is
// not safe for concurrent use; make one per sequence.
type StreamDecoder struct {
	t       *Tokenizer
	skip    bool
	stages  []stage
	emits   []emitFn
	out     *strings.Builder
	cleanup bool
	pending string // text held back by clean_up_tokenization_spaces
}

// NewStreamDecoder starts a stream (skipSpecial as in Decode).
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	d := &StreamDecoder{t: t, skip: skipSpecial, cleanup: t.cleanup && !t.raw}
	if t.decoder != nil {
		d.stages = t.decoder.newStages()
	}
	if len(d.stages) == 0 {
		d.stages = []stage{&joinStage{}}
	}
	d.emits = make([]emitFn, len(d.stages))
	for i := range d.stages {
		if i+1 < len(d.stages) {
			next, nextEmit := i+1, &d.emits[i+1]
			d.emits[i] = func(s string, start bool) { d.stages[next].push(s, start, *nextEmit) }
		} else {
			d.emits[i] = func(s string, _ bool) { d.out.WriteString(s) }
		}
	}
	return d
}

// NewContinuationDecoder starts a stream of ids that continue earlier text,
// such as a generation after its prompt: the decoder's start-of-text rules
// (SentencePiece decoders drop the first token's leading space) do not
// apply. This is what vLLM's incremental detokenizer gives by decoding with
// the prompt's last tokens as prefix: "Lily was" continues " a little
// girl", not "a little girl".
func (t *Tokenizer) NewContinuationDecoder(skipSpecial bool) *StreamDecoder {
	d := t.NewStreamDecoder(skipSpecial)
	for _, st := range d.stages {
		if c, ok := st.(continuer); ok {
			c.continueText()
		}
	}
	return d
}

// Add feeds one id and returns the newly settled text (possibly "").
func (d *StreamDecoder) Add(id int32) string {
	var sb strings.Builder
	d.add(id, &sb)
	return sb.String()
}

// Flush ends the stream and returns the text still held back.
func (d *StreamDecoder) Flush() string {
	var sb strings.Builder
	d.flush(&sb)
	return sb.String()
}

func (d *StreamDecoder) add(id int32, sb *strings.Builder) {
	tok, ok := d.t.IDToken(id)
	if !ok || (d.skip && d.t.special[id]) {
		return
	}
	if !d.cleanup {
		d.out = sb
		d.stages[0].push(tok, true, d.emits[0])
		return
	}
	var raw strings.Builder
	d.out = &raw
	d.stages[0].push(tok, true, d.emits[0])
	d.settle(raw.String(), false, sb)
}

func (d *StreamDecoder) flush(sb *strings.Builder) {
	if !d.cleanup {
		d.out = sb
		for i, st := range d.stages {
			st.flush(d.emits[i])
		}
		return
	}
	var raw strings.Builder
	d.out = &raw
	for i, st := range d.stages {
		st.flush(d.emits[i])
	}
	d.settle(raw.String(), true, sb)
}

// settle applies clean_up_tokenization_spaces to the settled part of the
// text. Its replacements all start with a space and span at most four
// bytes, and only delete spaces, so the text can be cut after any four
// non-space bytes and cleaned piecewise with the same result.
func (d *StreamDecoder) settle(more string, final bool, sb *strings.Builder) {
	d.pending += more
	cut := len(d.pending)
	if !final {
		cut = safeCleanupCut(d.pending)
	}
	if cut > 0 {
		sb.WriteString(cleanUpTokenization(d.pending[:cut]))
		d.pending = d.pending[cut:]
	}
}

func safeCleanupCut(s string) int {
	for k := len(s); k >= 4; k-- {
		if k < len(s) && s[k]&0xC0 == 0x80 {
			continue
		}
		if !strings.Contains(s[k-4:k], " ") {
			return k
		}
	}
	return 0
}

// cleanUpTokenization is transformers' clean_up_tokenization.
func cleanUpTokenization(s string) string {
	if !strings.Contains(s, " ") {
		return s
	}
	for _, r := range cleanupPairs {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

var cleanupPairs = [...][2]string{
	{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
	{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
}
