//go:build hftokenizers

package tokenizer

import (
	"reflect"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// With the native library installed, the adapter must agree with the
// fixtures (and so with the Go implementation) on ids and decodes.
func TestHFAdapterParity(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			h, err := LoadHF(fixtures.Path(t, "tokenizers", fam), Options{Raw: true})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			for _, r := range readRecords(t, fixtures.Path(t, "tokenizers", "expected", fam+".jsonl")) {
				if got := h.EncodeIDs(r.Text, true); !reflect.DeepEqual(nz(got), nz(r.IDs)) {
					t.Errorf("%s: ids %v, want %v", r.ID, got, r.IDs)
				}
				if got := h.Decode(r.IDs, false); got != r.Decode {
					t.Errorf("%s: decode %q, want %q", r.ID, got, r.Decode)
				}
			}
		})
	}
}
