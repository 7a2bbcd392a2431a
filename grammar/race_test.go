//go:build race

package grammar_test

// raceDetector: the race detector makes the matcher about ten times
// slower; the heavier tests take a smaller sample under it.
const raceDetector = true
