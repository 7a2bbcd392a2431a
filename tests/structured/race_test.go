//go:build race

package structured

// raceDetector: the race detector slows the Go side of generation (the
// grammar's matcher, the sampler) several times, so CI's -race run takes a
// smaller sample.
const raceDetector = true
