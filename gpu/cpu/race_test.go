//go:build race

package cpu

// raceDetector: the race detector makes the C kernels' Go callers and the
// references far slower; the fixture sweep checks a sample under it.
const raceDetector = true
