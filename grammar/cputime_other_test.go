//go:build !linux

package grammar_test

import "time"

// threadCPU is not measured here (0).
func threadCPU() time.Duration { return 0 }
