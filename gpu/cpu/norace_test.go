//go:build !race

package cpu

// raceDetector: see race_test.go.
const raceDetector = false
