package engine_test

import (
	"errors"
	"testing"

	"github.com/troupe-ai/troupe/engine"
)

// TestLimitsAdmit: the pure admission check Submit runs, usable before
// submitting: which requests fit, what an optional max is lowered to, and
// whether the prompt alone is the problem.
func TestLimitsAdmit(t *testing.T) {
	dense := engine.Limits{MaxPos: 64, Pages: 8, PageSize: 4} // pool: 32 positions
	tests := []struct {
		name       string
		l          engine.Limits
		prompt     int
		max        int
		fit        bool
		want       int  // max tokens granted; -1: refused
		promptOnly bool // when refused
	}{
		{"fits", dense, 10, 5, false, 5, false},
		{"pool bound", dense, 20, 20, false, -1, false},
		{"prompt alone past the pool", dense, 40, 1, false, -1, true},
		{"fit lowers to the pool", dense, 20, 100, true, 12, false},
		{"fit cannot save a prompt past the pool", dense, 32, 100, true, -1, true},
		{"positions bound", engine.Limits{MaxPos: 64}, 60, 10, false, -1, false},
		{"no KV: positions only", engine.Limits{MaxPos: 64, PageSize: 16}, 60, 4, false, 4, false},
		{"unbounded", engine.Limits{}, 1 << 20, 1 << 20, false, 1 << 20, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.l.Admit(tc.prompt, tc.max, tc.fit)
			if tc.want < 0 {
				var tl *engine.TooLongError
				if !errors.As(err, &tl) || !errors.Is(err, engine.ErrTooLong) {
					t.Fatalf("error %v, want a TooLongError", err)
				}
				if tl.PromptOnly != tc.promptOnly {
					t.Fatalf("PromptOnly %v, want %v (%v)", tl.PromptOnly, tc.promptOnly, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Admit = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
