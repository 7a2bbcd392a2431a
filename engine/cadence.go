package engine

import "time"

// cadence sizes prefill chunks so that running streams keep their pace.
//
// A step that feeds prefill tokens beside decoding sequences lasts as long
// as its decode part plus its prefill part; on a CPU one prefill token
// costs about as much as a tenth of a whole decode step, so a full
// 512-token chunk would hold every running stream for the time of dozens
// of tokens. cadence learns two costs from the steps it is shown, as
// moving averages: a decode-only step, and one prefill token beside
// decoding sequences (a prefill-only step gives only the first guess of
// that: in the short chunks of mixed steps a token costs more). While
// sequences decode, a step's prefill budget is what fits in (stretch − 1)
// decode steps, so a mixed step lasts at most about stretch times a decode
// step and inter-token gaps stay within that factor of the median. With
// nobody decoding, prefill takes the whole step budget (time to first
// token is all that matters then).
//
// The decode cost changes with the number of streams, so it is measured
// again after remeasureAfter mixed steps in a row: that step decodes only.
type cadence struct {
	stretch  float64 // most a mixed step may last, in decode steps; <= 1: off
	decode   float64 // seconds per decode-only step (0: not measured yet)
	perToken float64 // seconds per prefill token beside decoding (0: not measured yet)
	alone    float64 // seconds per prefill token in steps that decode nothing (the first guess)
	mixed    int     // mixed steps since the last decode-only one
}

// remeasureAfter is how many mixed steps in a row run before one decodes
// only, to measure the decode step again.
const remeasureAfter = 8

// cadenceAlpha is the weight of the newest step in the moving averages.
const cadenceAlpha = 0.2

// minPrefillChunk is the smallest prefill budget beside decoding
// sequences, so a prompt always progresses.
const minPrefillChunk = 16

// observe records a step of d with decoders decoding sequences and prefill
// prefill tokens.
func (c *cadence) observe(d time.Duration, decoders, prefill int) {
	s := d.Seconds()
	switch {
	case decoders > 0 && prefill == 0:
		c.decode = ewma(c.decode, s)
		c.mixed = 0
	case decoders > 0:
		c.mixed++
	}
	// A token costs more beside decoding sequences than in a long chunk of
	// its own (a short chunk runs the matmuls at a few dozen rows, where
	// they are less efficient), so only mixed steps measure the cost that
	// sizes mixed steps; a prefill-only step gives the first guess.
	switch {
	case prefill < minPrefillChunk:
	case decoders == 0:
		c.alone = ewma(c.alone, s/float64(prefill))
	case c.decode > 0: // else the decode part is not known yet
		if extra := s - c.decode; extra > 0 {
			c.perToken = ewma(c.perToken, extra/float64(prefill))
		}
	}
}

// budget is the prefill budget of a step that also decodes decoders
// sequences, at most limit (the step budget left). Until both costs are
// measured it is the smallest chunk.
func (c *cadence) budget(decoders, limit int) int {
	switch {
	case decoders == 0 || c.stretch <= 1:
		return limit
	case c.decode == 0 || c.mixed >= remeasureAfter:
		return 0 // decode only, to measure it
	}
	per := c.perToken
	if per == 0 {
		per = c.alone
	}
	if per == 0 {
		return min(limit, minPrefillChunk)
	}
	n := int((c.stretch - 1) * c.decode / per)
	return min(limit, max(n, minPrefillChunk))
}

func ewma(avg, x float64) float64 {
	if avg == 0 {
		return x
	}
	return avg + cadenceAlpha*(x-avg)
}
