//go:build !race

package grammar_test

// raceDetector: see race_test.go.
const raceDetector = false
