package checkpoint_test

import (
	"testing"

	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/tokenizer"
)

// TestByteTokenizerRoundTrips: the demo's tokenizer loads with our
// tokenizer package, encodes every byte to one token, keeps ChatML's special
// tokens whole, and decodes back to the text.
func TestByteTokenizerRoundTrips(t *testing.T) {
	dir := t.TempDir()
	if err := checkpoint.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"hello, world", "naïve café 🎉\n\ttabs", "<|im_start|>user\nhi<|im_end|>\n"} {
		ids := tok.EncodeIDs(text, false)
		if got := tok.Decode(ids, false); got != text {
			t.Errorf("%q decodes to %q", text, got)
		}
	}
	ids := tok.EncodeIDs("<|im_start|>a", false)
	if len(ids) != 2 || ids[0] != 257 || ids[1] != 'a' {
		t.Fatalf("special token and byte: got %v, want [257 97]", ids)
	}
	if eos, ok := tok.EOS(); !ok || eos != 258 {
		t.Fatalf("EOS %d %v, want 258", eos, ok)
	}
	if tok.VocabSize() != checkpoint.ByteVocab {
		t.Fatalf("vocab %d, want %d", tok.VocabSize(), checkpoint.ByteVocab)
	}
}
