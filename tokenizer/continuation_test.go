package tokenizer

import (
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// TestContinuationDecoder: a continuation stream decodes ids that follow
// earlier ones as the full decode has them: for every fixture family and
// corpus string split after each of its first tokens, the streamed
// continuation equals Decode(all) less Decode(prefix) whenever the latter
// is a prefix of the former (which is how vLLM's incremental detokenizer
// computes a generation's text). On the SentencePiece families this keeps
// the first continued token's leading space, which a fresh stream drops.
func TestContinuationDecoder(t *testing.T) {
	kept := 0
	for _, fam := range families {
		tk := loadFamily(t, fam, true)
		recs := readRecords(t, fixtures.Path(t, "tokenizers", "expected", fam+".jsonl"))
		checked := 0
		for _, r := range recs {
			ids := r.IDsNoSpecial
			for k := 1; k < min(len(ids), 6); k++ {
				full, prefix := tk.Decode(ids, true), tk.Decode(ids[:k], true)
				if prefix == "" || !strings.HasPrefix(full, prefix) {
					// Nothing visible to continue (only special tokens: the
					// text starts here), or the prefix decodes differently
					// alone (a split character).
					continue
				}
				d := tk.NewContinuationDecoder(true)
				var got strings.Builder
				for _, id := range ids[k:] {
					got.WriteString(d.Add(id))
				}
				got.WriteString(d.Flush())
				if want := full[len(prefix):]; got.String() != want {
					t.Errorf("%s %s after %d tokens: %q, want %q", fam, r.ID, k, got.String(), want)
				}
				if fresh := tk.Decode(ids[k:], true); strings.HasPrefix(got.String(), " ") && !strings.HasPrefix(fresh, " ") {
					kept++
				}
				checked++
			}
		}
		if checked == 0 {
			t.Errorf("%s: no split checked", fam)
		}
	}
	if kept == 0 {
		t.Error("no continuation kept a leading space a fresh decode drops: the test does not exercise SentencePiece decoders")
	}
}
