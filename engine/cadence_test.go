package engine

import (
	"testing"
	"time"
)

func TestCadence(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	for _, tc := range []struct {
		name     string
		stretch  float64
		steps    [][3]float64 // ms, decoders, prefill
		decoders int
		limit    int
		want     int
	}{
		{"no decode step measured: decode only", 2, nil, 4, 512, 0},
		{"no prefill token measured: the smallest chunk", 2, [][3]float64{{20, 4, 0}}, 4, 512, minPrefillChunk},
		{"nobody decoding: the whole budget", 2, [][3]float64{{20, 4, 0}, {120, 4, 100}}, 0, 512, 512},
		// decode 20 ms, a prefill token 1 ms: one extra decode step is 20 tokens.
		{"one extra decode step of prefill", 2, [][3]float64{{20, 4, 0}, {120, 4, 100}}, 4, 512, 20},
		{"stretch 3: two decode steps of prefill", 3, [][3]float64{{20, 4, 0}, {120, 4, 100}}, 4, 512, 40},
		{"a pure prefill step gives the first guess", 2, [][3]float64{{20, 1, 0}, {200, 0, 200}}, 1, 512, 20},
		// beside decoding a token costs 2 ms, in a chunk of its own 0.5 ms: mixed steps are sized by the 2 ms.
		{"mixed steps measure the cost beside decoding", 2, [][3]float64{{40, 4, 0}, {100, 0, 200}, {120, 4, 40}}, 4, 512, 20},
		{"never below the smallest chunk", 2, [][3]float64{{2, 1, 0}, {102, 1, 100}}, 1, 512, minPrefillChunk},
		{"never above the step budget left", 50, [][3]float64{{20, 1, 0}, {30, 1, 100}}, 1, 300, 300},
		{"off", 0, [][3]float64{{20, 4, 0}, {120, 4, 100}}, 4, 512, 512},
		{"tiny chunks do not measure", 2, [][3]float64{{20, 4, 0}, {400, 4, 8}}, 4, 512, minPrefillChunk},
		{"after 8 mixed steps one decodes only", 2, [][3]float64{{20, 4, 0}, {120, 4, 100}, {40, 4, 20}, {40, 4, 20}, {40, 4, 20}, {40, 4, 20}, {40, 4, 20}, {40, 4, 20}, {40, 4, 20}}, 4, 512, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cadence{stretch: tc.stretch}
			for _, s := range tc.steps {
				c.observe(ms(s[0]), int(s[1]), int(s[2]))
			}
			if got := c.budget(tc.decoders, tc.limit); got != tc.want {
				t.Fatalf("budget %d, want %d (decode %.4fs, token %.5fs)", got, tc.want, c.decode, c.perToken)
			}
		})
	}
}

// TestCadenceAverages: the averages follow a change in cost.
func TestCadenceAverages(t *testing.T) {
	c := cadence{stretch: 2}
	for range 50 {
		c.observe(10*time.Millisecond, 2, 0)
		c.observe(60*time.Millisecond, 2, 50) // 1 ms a token
	}
	if got := c.budget(2, 512); got != 16 {
		t.Fatalf("budget %d, want 16 (the smallest chunk: 10 ms / 1 ms = 10)", got)
	}
	for range 50 {
		c.observe(40*time.Millisecond, 8, 0)
		c.observe(90*time.Millisecond, 8, 50)
	}
	if got := c.budget(8, 512); got < 38 || got > 42 {
		t.Fatalf("budget %d after decode steps grew to 40 ms, want about 40", got)
	}
}
