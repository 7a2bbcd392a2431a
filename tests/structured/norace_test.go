//go:build !race

package structured

const raceDetector = false
